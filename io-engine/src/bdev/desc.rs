//! [`BdevDesc`]: an open device. It keeps the device from being destroyed
//! and opens channels on reactors
//! ([`BdevDesc::open_channel`](super::BdevDesc::open_channel), defined
//! beside [`IoChannel`](super::IoChannel) in `channel.rs`, so that this
//! file does not depend on the channel that depends on it).
//!
//! Thread: any; `Send + Sync`, handed to the reactors that open channels.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::device::Bdev;
use super::entry::Entry;
use super::io::IoSlot;
use super::stats::{DeviceStats, IoStats};
use crate::pool::ObjectPool;

/// An open device. `Send + Sync`: hand it to the reactors that will open
/// channels on it. Dropping the last one closes the device.
pub struct BdevDesc {
    entry: Arc<Entry>,
    io_pool: Arc<ObjectPool<IoSlot>>,
}

impl BdevDesc {
    /// Opens `entry`'s device: counts one more descriptor.
    pub(super) fn new(entry: Arc<Entry>, io_pool: Arc<ObjectPool<IoSlot>>) -> BdevDesc {
        entry.open.fetch_add(1, Ordering::AcqRel);
        BdevDesc { entry, io_pool }
    }

    /// The device.
    pub fn bdev(&self) -> &Arc<dyn Bdev> {
        &self.entry.bdev
    }

    /// The device's IO counters.
    pub fn io_stats(&self) -> IoStats {
        self.entry.stats.snapshot()
    }

    pub(super) fn stats(&self) -> &DeviceStats {
        &self.entry.stats
    }

    pub(super) fn io_pool_arc(&self) -> Arc<ObjectPool<IoSlot>> {
        self.io_pool.clone()
    }
}

impl Clone for BdevDesc {
    fn clone(&self) -> Self {
        BdevDesc::new(self.entry.clone(), self.io_pool.clone())
    }
}

impl Drop for BdevDesc {
    fn drop(&mut self) {
        self.entry.open.fetch_sub(1, Ordering::AcqRel);
    }
}
