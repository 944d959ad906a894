//! The assembled engine: reactors on their cores, the device registry with
//! its shared IO pool, the export registry with the servers of both export
//! protocols (NBD, NVMe/TCP), and what the engine was started with. The
//! control plane (gRPC), the daemon's flags and the metrics exporter see
//! the data plane through it.
//!
//! Thread: any. `Engine` is `Send + Sync`; it reaches the data plane only
//! through the reactors' one door, [`Reactors::run_on`].
//!
//! The rules of the control plane live here, not in the gRPC layer: what
//! may be destroyed ([`Engine::destroy_bdev`]), how a share over either
//! protocol is made and shown ([`Engine::share`], [`ShareView`]), what an
//! unset perf field means ([`PerfRequest`]), and one reading of every counter
//! ([`Engine::snapshot`]) that the stats service and the metrics share.

mod build_info;
mod destroy_error;
// The type is named after its folder, as every type is after its file.
mod device_snapshot;
#[allow(clippy::module_inception)]
mod engine;
mod engine_config;
mod engine_error;
mod nvmf_snapshot;
mod perf_request;
mod share_error;
mod share_view;
mod snapshot;

pub mod testing;
#[cfg(test)]
mod tests;

pub use build_info::{BUILD, BuildInfo};
pub use destroy_error::DestroyError;
pub use device_snapshot::DeviceSnapshot;
pub use engine::Engine;
pub use engine_config::EngineConfig;
pub use engine_error::EngineError;
pub use nvmf_snapshot::NvmfSnapshot;
pub use perf_request::PerfRequest;
pub use share_error::ShareError;
pub use share_view::ShareView;
pub use snapshot::Snapshot;
pub(crate) use snapshot::guarded;
