//! The exports as an NBD connection's option phase sees them, with the
//! server's limit on established sessions on top: `GO` (or
//! `EXPORT_NAME`) is refused while `--nbd-max-connections` sessions are
//! established, counted when it arrives, so connections still in the
//! handshake never count against it.
//!
//! Thread: the connections' reactors (atomics; the export registry's lock
//! for its own per-export limit).

use std::sync::Arc;
use std::time::Instant;

use super::stats::NbdCounters;
use super::{ExportInfo, ExportLookup, Refusal};
use crate::export::{Exports, Protocol};

/// The exports, and the server's session limit.
pub struct SessionLimit {
    /// The exports.
    pub exports: Arc<Exports>,
    /// The counters (sessions established, refusals).
    pub counters: Arc<NbdCounters>,
    /// Established sessions beyond which `GO` is refused (0: no limit).
    pub max_connections: usize,
}

impl ExportLookup for SessionLimit {
    fn lookup(&self, name: &str) -> Option<ExportInfo> {
        ExportLookup::lookup(&*self.exports, name)
    }

    fn list(&self) -> Vec<(String, String)> {
        ExportLookup::list(&*self.exports)
    }

    /// The server's session limit first, then the export's.
    fn refusal(&self, name: &str) -> Option<String> {
        let max = self.max_connections;
        if max != 0 && self.counters.sessions() as usize >= max {
            if let Some(more) = self.counters.refused(Refusal::Connections, Instant::now()) {
                tracing::warn!(
                    max,
                    unlogged = more,
                    "NBD connection refused: the server is at its connection limit"
                );
            }
            return Some(format!(
                "the server is at its limit of {max} NBD connections; try again later"
            ));
        }
        self.exports.refusal(Protocol::Nbd, name)
    }
}
