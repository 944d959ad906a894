//! What every connection of the NVMe/TCP target shares: the exports, the
//! controllers, the listeners' addresses (for the discovery log), the
//! counters, and the bounds every host is held to (queues per host, the
//! budget of DH computations before authentication, the rate of the log
//! lines hosts cause).
//!
//! Thread: any. `Sync`: atomics, and mutexes taken at Connect and on the
//! control path only.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::controller::{Controllers, MAX_QID};
use super::identify::{self, DiscoveryEntry};
use super::limits::Limits;
use super::nqn;
use super::stats::NvmfCounters;
use super::{DhBudget, HostQueues, PeerLogs};
use crate::export::{Exports, Protocol};

/// The target's shared state.
pub struct Target {
    /// The exports (the NVMe-oF ones are its subsystems).
    pub exports: Arc<Exports>,
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
}

impl Target {
    /// A target over `exports`.
    pub fn new(
        exports: Arc<Exports>,
        max_connections: usize,
        max_connecting: usize,
        limits: Limits,
    ) -> Arc<Target> {
        Arc::new(Target {
            max_connecting,
            limits,
            exports,
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

    /// The discovery log: every NVMe-oF share at every listener, and this
    /// discovery subsystem itself.
    pub(super) fn discovery_log(&self) -> Vec<u8> {
        let listeners = self
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let shares = self.exports.shares(Protocol::Nvmf);
        let nqns: Vec<(String, u8)> = std::iter::once((nqn::DISCOVERY_NQN.to_string(), 3))
            .chain(shares.iter().filter_map(|s| Some((s.nqn.clone()?, 2))))
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
