//! [`Entry`]: what the registry keeps per device, shared with the
//! descriptors that hold the device open.
//!
//! Thread: any; the open count is atomic, the counters are per core (see
//! [`DeviceStats`]).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use super::device::Bdev;
use super::stats::DeviceStats;

/// What the registry keeps per device.
pub(super) struct Entry {
    pub(super) bdev: Arc<dyn Bdev>,
    /// Open descriptors ([`BdevDesc`](super::BdevDesc)s).
    pub(super) open: AtomicUsize,
    pub(super) stats: DeviceStats,
}

impl Entry {
    /// A closed device with zeroed counters.
    pub(super) fn new(bdev: Arc<dyn Bdev>) -> Self {
        Entry {
            bdev,
            open: AtomicUsize::new(0),
            stats: DeviceStats::new(),
        }
    }
}
