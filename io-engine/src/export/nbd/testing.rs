//! Test fixtures for the NBD code, shared by the unit tests and the fuzz
//! targets: two exports of different shapes and a fixed export table.
//!
//! Thread: any (plain data).

use super::proto::MAX_PAYLOAD;
use super::{Allocation, ExportInfo, ExportLookup};

/// A writable 1 MiB export with 512-byte blocks, as a malloc device gives.
pub fn malloc_export() -> ExportInfo {
    ExportInfo {
        name: "disk0".into(),
        description: "malloc disk".into(),
        size: 1 << 20,
        read_only: false,
        block_size: 512,
        preferred: 4096,
        max_payload: MAX_PAYLOAD,
        can_multi_conn: true,
        data_kind: Allocation::Data,
    }
}

/// A read-only 1 GiB export with 4 KiB blocks that reads as zeroes, as a
/// null device gives, limited to 1 MiB per request.
pub fn null_export() -> ExportInfo {
    ExportInfo {
        name: "null0".into(),
        description: String::new(),
        size: 1 << 30,
        read_only: true,
        block_size: 4096,
        preferred: 4096,
        max_payload: 1 << 20,
        can_multi_conn: false,
        data_kind: Allocation::Zero,
    }
}

/// A fixed table of exports: exact name match, and `""` selects the first
/// export unless one is named `""`.
#[derive(Clone, Debug, Default)]
pub struct StaticExports {
    /// The exports, first one the default.
    pub exports: Vec<ExportInfo>,
    /// Why every export is refused (a server at its connection limit), if
    /// it is.
    pub refusal: Option<String>,
}

impl StaticExports {
    /// [`malloc_export`] (the default) and [`null_export`].
    pub fn two() -> StaticExports {
        StaticExports {
            exports: vec![malloc_export(), null_export()],
            refusal: None,
        }
    }
}

impl ExportLookup for StaticExports {
    fn lookup(&self, name: &str) -> Option<ExportInfo> {
        self.exports
            .iter()
            .find(|e| e.name == name)
            .or_else(|| {
                if name.is_empty() {
                    self.exports.first()
                } else {
                    None
                }
            })
            .cloned()
    }

    fn list(&self) -> Vec<(String, String)> {
        self.exports
            .iter()
            .map(|e| (e.name.clone(), e.description.clone()))
            .collect()
    }

    fn refusal(&self, _name: &str) -> Option<String> {
        self.refusal.clone()
    }
}
