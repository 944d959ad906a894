//! What every connection of the NVMe/TCP target shares: the exports, the
//! subsystems, the controllers, the listeners' addresses (for the
//! discovery log), the counters, and the bounds every host is held to
//! (queues per host, the budget of DH computations before authentication,
//! the rate of the log lines hosts cause).
//!
//! Thread: any. `Sync`: atomics, and mutexes taken at Connect and on the
//! control path only.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::controller::{Controllers, MAX_QID};
use super::dh_budget::DhBudget;
use super::digest_offload::DigestOffload;
use super::host_queues::HostQueues;
use super::identify::{self, DiscoveryEntry};
use super::limits::Limits;
use super::nqn;
use super::peer_logs::PeerLogs;
use super::stats::NvmfCounters;
use super::subsystems::Subsystems;
use crate::export::Exports;

/// The target's shared state.
pub struct Target {
    /// The exports (a subsystem's device is its share there).
    pub exports: Arc<Exports>,
    /// The subsystems: which NQN exports which share, to which hosts.
    pub subsystems: Subsystems,
    /// Its controllers.
    pub controllers: Controllers,
    listeners: Mutex<Vec<SocketAddr>>,
    /// What hosts see of the target's limits.
    pub limits: Limits,
    /// Connections per listener beyond which hosts are refused, and
    /// connections per listener not connected yet beyond which hosts are
    /// refused (0: no limit).
    pub(super) max_connections: usize,
    pub(super) max_connecting: usize,
    pub(super) next: AtomicUsize,
    connections: AtomicUsize,
    /// Commands, errors, bytes.
    pub counters: NvmfCounters,
    /// Established queues by host NQN, each host bounded.
    pub host_queues: Arc<HostQueues>,
    /// Diffie-Hellman computations for queues not authenticated yet.
    pub dh_budget: DhBudget,
    /// The rate limits of the log lines hosts cause.
    pub logs: PeerLogs,
    /// Where large data PDUs' digests are computed (`None`: inline).
    digest_offload: Option<DigestOffload>,
}

impl Target {
    /// A target over `exports`.
    pub fn new(
        exports: Arc<Exports>,
        max_connections: usize,
        max_connecting: usize,
        limits: Limits,
        digest_offload: Option<DigestOffload>,
    ) -> Arc<Target> {
        Arc::new(Target {
            digest_offload,
            max_connecting,
            limits,
            exports,
            subsystems: Subsystems::default(),
            controllers: Controllers::default(),
            listeners: Mutex::new(Vec::new()),
            max_connections,
            next: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            counters: NvmfCounters::default(),
            host_queues: HostQueues::new(limits.queues_per_host),
            dh_budget: DhBudget::new(limits.dh_rate, limits.dh_burst),
            logs: PeerLogs::default(),
        })
    }

    /// Where large data PDUs' digests are computed (`None`: inline).
    pub fn digest_offload(&self) -> Option<&DigestOffload> {
        self.digest_offload.as_ref()
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    pub(super) fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn connection_closed(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }

    pub(super) fn max_io_queues(&self) -> u32 {
        MAX_QID as u32
    }

    /// The discovery log: every subsystem at every listener, and this
    /// discovery subsystem itself.
    pub(super) fn discovery_log(&self) -> Vec<u8> {
        let listeners = self
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let nqns: Vec<(String, u8)> = std::iter::once((nqn::DISCOVERY_NQN.to_string(), 3))
            .chain(self.subsystems.all().into_iter().map(|s| (s.nqn, 2)))
            .collect();
        let addrs: Vec<(String, u16, bool, u16)> = listeners
            .iter()
            .enumerate()
            .map(|(i, a)| (a.ip().to_string(), a.port(), a.is_ipv6(), i as u16 + 1))
            .collect();
        let mut entries = Vec::new();
        for (subnqn, subtype) in &nqns {
            for (traddr, port, ipv6, portid) in &addrs {
                entries.push(DiscoveryEntry {
                    subnqn,
                    traddr,
                    port: *port,
                    ipv6: *ipv6,
                    subtype: *subtype,
                    portid: *portid,
                });
            }
        }
        identify::discovery_log(1, &entries)
    }

    /// Records a listener's address, for the discovery log.
    pub(super) fn listening_at(&self, a: SocketAddr) {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(a);
    }
}
