//! One NBD export as the option and transmission phases see it: size,
//! block sizes, flags, what `base:allocation` reports.
//!
//! Thread: any (plain data).

use super::proto::MAX_PAYLOAD;
use super::{Allocation, BlockLimits};
use crate::export::Share;

/// One export as the option phase describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportInfo {
    /// Canonical name (`INFO_NAME`, `REP_SERVER`).
    pub name: String,
    /// Human-readable description (`INFO_DESCRIPTION`).
    pub description: String,
    /// Size in bytes.
    pub size: u64,
    /// Writes fail with `EPERM`; `FLAG_READ_ONLY` is advertised.
    pub read_only: bool,
    /// Minimum block size: requests must be aligned to it.
    pub block_size: u32,
    /// Preferred block size.
    pub preferred: u32,
    /// Largest READ/WRITE accepted (0: [`MAX_PAYLOAD`]); capped at
    /// [`MAX_PAYLOAD`].
    pub max_payload: u32,
    /// Flush and FUA are visible across connections (`CAN_MULTI_CONN`).
    pub can_multi_conn: bool,
    /// What `base:allocation` reports.
    pub data_kind: Allocation,
}

impl ExportInfo {
    /// The block size constraints advertised for (and enforced on) this
    /// export: `block_size` rounded up to a power of two in 1..=64 KiB,
    /// `max_payload` capped at [`MAX_PAYLOAD`] and rounded down to a
    /// multiple of the minimum, `preferred` made a power of two between
    /// `max(minimum, 512)` and the maximum.
    pub fn block_limits(&self) -> BlockLimits {
        let minimum = self.block_size.clamp(1, 1 << 16).next_power_of_two();
        let floor = minimum.max(512);
        let cap = if self.max_payload == 0 {
            MAX_PAYLOAD
        } else {
            self.max_payload.min(MAX_PAYLOAD)
        };
        let maximum = (cap - cap % minimum).max(floor);
        let mut preferred = self
            .preferred
            .max(floor)
            .checked_next_power_of_two()
            .unwrap_or(1 << 31);
        if preferred > maximum {
            // Largest power of two <= maximum; >= floor since floor is one.
            preferred = 1 << (31 - maximum.leading_zeros());
        }
        BlockLimits {
            minimum,
            preferred,
            maximum,
        }
    }
}

impl ExportInfo {
    /// The export of `share` as NBD describes it.
    pub fn of(share: &Share) -> ExportInfo {
        let bdev = share.desc.bdev();
        ExportInfo {
            name: share.name.clone(),
            description: format!("{} {}", bdev.product(), bdev.uri()),
            size: bdev.size_bytes(),
            read_only: share.read_only,
            block_size: bdev.block_size(),
            preferred: bdev.block_size().max(4096),
            max_payload: MAX_PAYLOAD,
            // Every connection sees every completed write at once: one device
            // memory, no per-connection cache.
            can_multi_conn: true,
            data_kind: if bdev.stores_data() {
                Allocation::Data
            } else {
                Allocation::Zero
            },
        }
    }
}
