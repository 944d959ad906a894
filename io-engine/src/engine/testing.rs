//! The test engine the engine's and the metrics' tests share.
//!
//! Thread: the test thread; the engine's one reactor runs its own loop.

use super::{Engine, EngineConfig};
use crate::env::cores::{CoreSet, allowed_cpus};
use crate::reactor::PollMode;

/// An engine with one adaptive reactor on the first allowed CPU, an IO
/// pool of 4096 objects with 64 cached per core, no accel offload.
pub(crate) fn start_engine() -> Engine {
    let cpu = allowed_cpus().unwrap().cpus()[0];
    Engine::start(EngineConfig {
        cores: CoreSet::from_cpus([cpu]).unwrap(),
        poll_mode: PollMode::ADAPTIVE,
        io_pool_size: 4096,
        io_pool_cache: 64,
        nbd_max_per_export: 0,
        nvmf_max_connections: 0,
        nvmf_max_connecting: 0,
        nvmf_limits: crate::export::nvmf::Limits::default(),
        accel_modules: Vec::new(),
        accel_assign: Vec::new(),
    })
    .unwrap()
}
