//! A small engine for tests: the engine's and the metrics' unit tests
//! share [`start_engine`].
//!
//! Thread: the caller's; the engine's one reactor runs its own loop.

use std::time::Duration;

use super::{Engine, EngineConfig};
use crate::env::core_sizing::CoreSizing;
use crate::env::core_source::CoreSource;
use crate::env::cores::{CoreSet, allowed_cpus};
use crate::export::nbd::TlsConfig;
use crate::export::nvmf;
use crate::reactor::PollMode;

/// An engine with one adaptive reactor on the first allowed CPU, an IO
/// pool of 4096 objects with 64 cached per core, no accel offload, no
/// limits on NBD or NVMe/TCP clients and no NBD TLS.
pub fn start_engine() -> Engine {
    let allowed = allowed_cpus().unwrap();
    Engine::start(EngineConfig {
        cores: CoreSet::from_cpus([allowed.cpus()[0]]).unwrap(),
        core_sizing: CoreSizing {
            source: CoreSource::List,
            allowed,
            quota: None,
        },
        poll_mode: PollMode::ADAPTIVE,
        io_pool_size: 4096,
        io_pool_cache: 64,
        nbd_max_per_export: 0,
        nbd_max_connections: 0,
        nbd_reply_hold: Duration::ZERO,
        nbd_handshake_timeout: Duration::ZERO,
        nbd_max_handshakes: 0,
        nbd_tls: TlsConfig::off(),
        nvmf_max_connections: 0,
        nvmf_max_connecting: 0,
        nvmf_limits: nvmf::Limits::default(),
        nvmf_digest_offload: None,
        accel_modules: Vec::new(),
        accel_assign: Vec::new(),
    })
    .unwrap()
}
