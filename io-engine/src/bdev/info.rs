//! [`BdevInfo`]: a device's description as the control plane shows it.
//!
//! Thread: any; a snapshot, taken under the registry's lock.

use std::sync::atomic::Ordering;

use super::entry::Entry;

/// A device's description, as the control plane shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BdevInfo {
    /// Name.
    pub name: String,
    /// Identity.
    pub uuid: uuid::Uuid,
    /// Canonical URI.
    pub uri: String,
    /// `null`, `malloc`, `uring` or `aio`.
    pub product: String,
    /// The backing's path (`uring`, `aio`).
    pub backing_path: Option<String>,
    /// The backing's kind: `file` or `block_device`.
    pub backing_kind: Option<String>,
    /// Whether writes may sit in a volatile cache until a flush.
    pub volatile_write_cache: bool,
    /// Bytes per block.
    pub block_size: u32,
    /// Number of blocks.
    pub num_blocks: u64,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Open descriptors.
    pub open: usize,
}

impl BdevInfo {
    pub(super) fn of(e: &Entry) -> BdevInfo {
        let b = &e.bdev;
        BdevInfo {
            name: b.name().to_string(),
            uuid: b.uuid(),
            uri: b.uri(),
            product: b.product().to_string(),
            backing_path: b.backing().map(|(p, _)| p.display().to_string()),
            backing_kind: b.backing().map(|(_, k)| k.to_string()),
            volatile_write_cache: b.volatile_write_cache(),
            block_size: b.block_size(),
            num_blocks: b.num_blocks(),
            size_bytes: b.size_bytes(),
            open: e.open.load(Ordering::Relaxed),
        }
    }
}
