//! How to start an engine: its cores (and why those), poll mode, IO pool,
//! the settings of its NBD server and NVMe/TCP target, and accel modules.
//!
//! Thread: any; plain data, read once by [`super::Engine::start`].

use std::sync::Arc;
use std::time::Duration;

use crate::accel::{Assignment, Module};
use crate::env::core_sizing::CoreSizing;
use crate::env::cores::CoreSet;
use crate::export::nbd::TlsConfig;
use crate::reactor::PollMode;

/// How to start an engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// CPUs to run reactors on.
    pub cores: CoreSet,
    /// Why those: the flag or rule that chose them, the allowed CPUs and
    /// the CPU quota (shown by engine info and the metrics).
    pub core_sizing: CoreSizing,
    /// How idle reactors wait.
    pub poll_mode: PollMode,
    /// IO objects in the shared pool.
    pub io_pool_size: usize,
    /// IO objects cached per core (0: no cache).
    pub io_pool_cache: usize,
    /// NBD connections per export beyond which clients are refused (0: no
    /// limit).
    pub nbd_max_per_export: usize,
    /// NBD sessions (connections in transmission) beyond which `GO` is
    /// refused (0: no limit).
    pub nbd_max_connections: usize,
    /// Longest an NBD connection holds a ready reply back to send it with
    /// others (zero: never).
    pub nbd_reply_hold: Duration,
    /// Longest an NBD connection may take from accept to transmission
    /// (zero: no limit).
    pub nbd_handshake_timeout: Duration,
    /// NBD connections in the handshake at once, beyond which the least
    /// advanced makes room (0: no limit).
    pub nbd_max_handshakes: usize,
    /// NBD TLS (`STARTTLS`): off, offered or required, and its setup.
    pub nbd_tls: TlsConfig,
    /// NVMe/TCP connections (queue pairs) allowed per listener (0: no
    /// limit).
    pub nvmf_max_connections: usize,
    /// NVMe/TCP connections per listener that have not finished ICReq and
    /// Connect, beyond which more are refused (0: no limit).
    pub nvmf_max_connecting: usize,
    /// The NVMe/TCP target's limits (in-capsule data, transfer, queues).
    pub nvmf_limits: crate::export::nvmf::Limits,
    /// NVMe/TCP: the smallest data PDU whose digest is computed on an
    /// offload engine where crc32c runs on one (`None`: always inline).
    pub nvmf_digest_offload: Option<usize>,
    /// Accel offload modules, best first (the software module is always
    /// added after them).
    pub accel_modules: Vec<Arc<dyn Module>>,
    /// Opcode assignments that override the default (best module).
    pub accel_assign: Vec<Assignment>,
}
