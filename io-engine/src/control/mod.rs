//! The control plane: the gRPC server (package `io_engine.v1`, plus the
//! standard health and reflection services) over a running `Engine`, one
//! file per service. The services only map messages onto the engine; its
//! rules (what may be destroyed, perf defaults, how counters are read) live
//! in `engine`. The listener speaks TLS (mTLS with a client CA) when
//! `grpc_tls` is given certificates (read by `env`'s TLS file loader),
//! accepted by `tls_incoming`, which tells a plaintext gRPC client to use
//! TLS (`plaintext_refusal`); plaintext only on loopback unless the
//! operator insists (`grpc_tls_args`).
//!
//! Thread: the control-plane runtime, a small tokio runtime whose threads
//! are not reactors. Requests reach the data plane only through the
//! reactors' run-on-core door; errors become statuses in `status`. The
//! bounds of `limits` (requests at once, request size, timeout) keep a
//! flood of requests from starving the runtime, the metrics endpoint on it,
//! or the blocking pool.

mod accel_service;
mod bdev_service;
mod blocking;
mod engine_service;
mod error;
mod export_service;
mod grpc_tls;
mod grpc_tls_args;
mod limits;
mod perf_service;
mod plaintext_refusal;
mod request_limit;
mod server;
mod stats_service;
mod status;
mod tls_incoming;

pub use accel_service::AccelService;
pub use bdev_service::BdevService;
pub use engine_service::EngineService;
pub use error::ControlError;
pub use export_service::ExportService;
pub use grpc_tls::{GrpcTls, HANDSHAKE_TIMEOUT};
pub use grpc_tls_args::GrpcTlsArgs;
pub use limits::Limits;
pub use perf_service::PerfService;
pub use plaintext_refusal::{PLAINTEXT_TIMEOUT, TLS_ONLY};
pub use request_limit::{RequestLimit, RequestLimitLayer};
pub use server::{SHUTDOWN_GRACE, serve};
pub use stats_service::StatsService;
pub use status::MAX_MESSAGE;
