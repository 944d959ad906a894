//! NBD counters: connections, requests per export and command, errors per
//! export and errno, and how long clients waited for replies per export
//! and command ([`RequestDurations`]). Read by the metrics exporter and
//! the control plane.
//!
//! Thread: any. Connections count requests and errors with relaxed
//! `fetch_add` on their export's counters (one shared line per export,
//! touched once per request); durations go to their reactor's own entry.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::bdev::OpStats;

use super::proto::{EINVAL, EIO, ENOMEM, ENOSPC, ENOTSUP, EOVERFLOW, EPERM, ESHUTDOWN};
use super::request_durations::RequestDurations;
use super::transmission::{COMMANDS, Command, command_index};

/// Errnos counted by name; anything else counts as "other".
pub const ERRNOS: [(u32, &str); 8] = [
    (EPERM, "EPERM"),
    (EIO, "EIO"),
    (ENOMEM, "ENOMEM"),
    (EINVAL, "EINVAL"),
    (ENOSPC, "ENOSPC"),
    (EOVERFLOW, "EOVERFLOW"),
    (ENOTSUP, "ENOTSUP"),
    (ESHUTDOWN, "ESHUTDOWN"),
];

/// One export's counters.
#[derive(Default)]
pub struct ExportCounters {
    requests: [AtomicU64; 9],
    /// Per [`ERRNOS`] entry, then "other" (protocol errors that close the
    /// connection count there with errno 0).
    errors: [AtomicU64; 9],
    /// How long clients waited for replies, per core.
    pub(super) durations: RequestDurations,
}

impl ExportCounters {
    /// A request arrived.
    #[inline]
    pub fn request(&self, c: Command) {
        self.requests[command_index(c)].fetch_add(1, Ordering::Relaxed);
    }

    /// A snapshot, for export `export` with `connections` attached.
    pub fn snapshot(&self, export: &str, connections: u64) -> ExportStats {
        ExportStats {
            export: export.to_string(),
            connections,
            requests: COMMANDS
                .iter()
                .zip(&self.requests)
                .map(|(n, v)| (n.to_string(), v.load(Ordering::Relaxed)))
                .collect(),
            errors: ERRNOS
                .iter()
                .map(|e| e.1)
                .chain(["other"])
                .zip(&self.errors)
                .map(|(n, v)| (n.to_string(), v.load(Ordering::Relaxed)))
                .collect(),
            durations: COMMANDS
                .iter()
                .map(|n| n.to_string())
                .zip(self.durations.snapshot())
                .collect(),
        }
    }

    /// A request was answered with `errno` (0: the connection was closed).
    pub fn error(&self, errno: u32) {
        let i = ERRNOS
            .iter()
            .position(|e| e.0 == errno)
            .unwrap_or(ERRNOS.len());
        self.errors[i].fetch_add(1, Ordering::Relaxed);
    }
}

/// A snapshot of one export's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportStats {
    /// Export name.
    pub export: String,
    /// Connections attached now.
    pub connections: u64,
    /// Requests per [`COMMANDS`] entry.
    pub requests: Vec<(String, u64)>,
    /// Errors per errno name ("other" last).
    pub errors: Vec<(String, u64)>,
    /// Per [`COMMANDS`] entry: the replies written (`ops`) and how long
    /// after its request each reached the socket (`latency_*`).
    pub durations: Vec<(String, OpStats)>,
}

/// Counters of the whole NBD server.
#[derive(Default)]
pub struct NbdCounters {
    connections: AtomicU64,
    exports: Mutex<BTreeMap<String, Arc<ExportCounters>>>,
}

impl NbdCounters {
    /// A connection was accepted.
    pub fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection closed.
    pub fn connection_closed(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }

    /// Connections open now (handshaking or transmitting).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// The counters of export `name`, created on first use; a connection
    /// attached to it counts in its connections until the handle drops.
    pub fn export(&self, name: &str) -> Arc<ExportCounters> {
        let mut m = self.exports.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(name.to_string()).or_default().clone()
    }
}
