//! NBD counters: connections (in the handshake and established), clients
//! refused or cut short in the handshake per reason (their log lines
//! rate-limited here), requests per export and command, errors per
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
use std::time::Instant;

use crate::bdev::OpStats;
use crate::export::{REFUSAL_LOG_INTERVAL, RefusalLog};

use super::Refusal;
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
        // `command_index` is a [`COMMANDS`] index, one per counter.
        if let Some(n) = self.requests.get(command_index(c)) {
            n.fetch_add(1, Ordering::Relaxed);
        }
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
        let named = ERRNOS
            .iter()
            .zip(&self.errors)
            .find_map(|(e, n)| (e.0 == errno).then_some(n));
        if let Some(n) = named.or(self.errors.last()) {
            n.fetch_add(1, Ordering::Relaxed);
        }
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
pub struct NbdCounters {
    connections: AtomicU64,
    /// Of `connections`, those not in transmission yet.
    handshakes: AtomicU64,
    /// Per [`Refusal::ALL`] entry: how many, and the rate limit of their
    /// log lines.
    refused: [(AtomicU64, RefusalLog); 3],
    exports: Mutex<BTreeMap<String, Arc<ExportCounters>>>,
}

impl Default for NbdCounters {
    fn default() -> Self {
        NbdCounters {
            connections: AtomicU64::new(0),
            handshakes: AtomicU64::new(0),
            refused: std::array::from_fn(|_| {
                (AtomicU64::new(0), RefusalLog::new(REFUSAL_LOG_INTERVAL))
            }),
            exports: Mutex::default(),
        }
    }
}

/// The server-wide NBD counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct NbdServerStats {
    /// Connections in the handshake (accepted, not in transmission yet).
    pub handshakes: u64,
    /// Connections established (in transmission, or closing after it).
    pub sessions: u64,
    /// Clients refused or cut short in the handshake, per reason
    /// ([`Refusal::name`]).
    pub refused: Vec<(String, u64)>,
}

impl NbdCounters {
    /// A connection was accepted: it is in the handshake.
    pub fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
        self.handshakes.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection entered transmission: established.
    pub fn session_started(&self) {
        self.handshakes.fetch_sub(1, Ordering::Relaxed);
    }

    /// A connection closed (`established`: after `session_started`).
    pub fn connection_closed(&self, established: bool) {
        if !established {
            self.handshakes.fetch_sub(1, Ordering::Relaxed);
        }
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }

    /// Connections open now (handshaking or transmitting).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Connections established now (the count `--nbd-max-connections`
    /// bounds).
    pub fn sessions(&self) -> u64 {
        let open = self.connections.load(Ordering::Relaxed);
        open.saturating_sub(self.handshakes.load(Ordering::Relaxed))
    }

    /// Counts a client refused (or cut short) for `why` at `now`. `Some(n)`:
    /// log a line for it, adding that `n` more went unlogged since the last
    /// one; `None`: do not (one line per [`REFUSAL_LOG_INTERVAL`]).
    pub fn refused(&self, why: Refusal, now: Instant) -> Option<u64> {
        // `index` is a [`Refusal::ALL`] index, one per counter.
        let (count, log) = self.refused.get(why.index())?;
        count.fetch_add(1, Ordering::Relaxed);
        log.note(now)
    }

    /// Refusals left unlogged whose interval is over, per reason: log a
    /// line for each (see [`RefusalLog::flush`]).
    pub fn unlogged(&self, now: Instant) -> Vec<(Refusal, u64)> {
        Refusal::ALL
            .iter()
            .zip(&self.refused)
            .filter_map(|(&r, (_, log))| Some((r, log.flush(now)?)))
            .collect()
    }

    /// The server-wide counters now.
    pub fn server_stats(&self) -> NbdServerStats {
        NbdServerStats {
            handshakes: self.handshakes.load(Ordering::Relaxed),
            sessions: self.sessions(),
            refused: Refusal::ALL
                .iter()
                .zip(&self.refused)
                .map(|(r, (count, _))| (r.name().to_string(), count.load(Ordering::Relaxed)))
                .collect(),
        }
    }

    /// The counters of export `name`, created on first use; a connection
    /// attached to it counts in its connections until the handle drops.
    pub fn export(&self, name: &str) -> Arc<ExportCounters> {
        let mut m = self.exports.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(name.to_string()).or_default().clone()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn handshakes_and_sessions_are_counted_apart() {
        let c = NbdCounters::default();
        c.connection_opened();
        c.connection_opened();
        c.connection_opened();
        c.session_started();
        let s = c.server_stats();
        assert_eq!((c.connections(), s.handshakes, s.sessions), (3, 2, 1));
        c.connection_closed(false);
        c.connection_closed(true);
        let s = c.server_stats();
        assert_eq!((c.connections(), s.handshakes, s.sessions), (1, 1, 0));
        c.connection_closed(false);
        assert_eq!(c.server_stats().handshakes, 0);
    }

    #[test]
    fn refusals_are_all_counted_and_logged_once_per_interval() {
        let c = NbdCounters::default();
        let t = Instant::now();
        assert_eq!(c.refused(Refusal::HandshakeTimeout, t), Some(0));
        assert_eq!(c.refused(Refusal::HandshakeTimeout, t), None);
        assert_eq!(c.refused(Refusal::HandshakeTimeout, t), None);
        // Each reason has its own interval.
        assert_eq!(c.refused(Refusal::Handshakes, t), Some(0));
        let later = t + REFUSAL_LOG_INTERVAL + Duration::from_secs(1);
        assert_eq!(c.unlogged(later), vec![(Refusal::HandshakeTimeout, 2)]);
        assert_eq!(
            c.server_stats().refused,
            [
                ("connections", 0),
                ("handshakes", 1),
                ("handshake_timeout", 3)
            ]
            .map(|(r, n)| (r.to_string(), n))
        );
    }
}
