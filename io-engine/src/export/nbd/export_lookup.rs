//! Where the NBD option phase finds exports: the engine's export registry
//! (its NBD shares), or a fixed table in tests and fuzz targets.
//!
//! Thread: called on the connection's reactor; implementations are shared
//! between connections, hence `Send + Sync`.

use super::ExportInfo;
use crate::export::{Exports, Protocol};

/// Where the option phase finds exports.
pub trait ExportLookup: Send + Sync {
    /// The export called `name` (`""` is the default export, if any).
    fn lookup(&self, name: &str) -> Option<ExportInfo>;
    /// Every export as `(name, description)`, for `OPT_LIST`.
    fn list(&self) -> Vec<(String, String)>;
    /// Why a client may not attach to export `name` now (it is at its
    /// connection limit), or `None` if it may.
    fn refusal(&self, _name: &str) -> Option<String> {
        None
    }
}

impl ExportLookup for Exports {
    fn lookup(&self, name: &str) -> Option<ExportInfo> {
        self.find(Protocol::Nbd, name).map(|s| ExportInfo::of(&s))
    }

    fn list(&self) -> Vec<(String, String)> {
        self.shares(Protocol::Nbd)
            .iter()
            .map(ExportInfo::of)
            .map(|e| (e.name, e.description))
            .collect()
    }

    fn refusal(&self, name: &str) -> Option<String> {
        Exports::refusal(self, Protocol::Nbd, name)
    }
}
