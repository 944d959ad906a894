//! One device as a [`super::Snapshot`] saw it.
//!
//! Thread: any; plain data.

use crate::bdev::{BdevInfo, IoStats};

/// A device's description and its IO counters, summed over cores.
#[derive(Debug, Clone)]
pub struct DeviceSnapshot {
    /// Name, product, geometry, open descriptors.
    pub info: BdevInfo,
    /// Counters summed over cores.
    pub stats: IoStats,
}
