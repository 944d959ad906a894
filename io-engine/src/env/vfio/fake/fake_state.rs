//! [`FakeState`]: what the fake VFIO ([`FakeVfio`](super::FakeVfio)) did,
//! for the tests to look at, and the IOMMU the functions behind it see.
//!
//! Thread: shared by the test and whichever thread maps DMA regions.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use crate::env::dma::IovaMap;

/// What the fake kernel did, and the IOMMU its functions see.
#[derive(Default)]
pub struct FakeState {
    /// The fake IOMMU: every window mapped, which a device model behind
    /// the fake translates its IOVAs through.
    pub iommu: Arc<IovaMap>,
    /// IOMMU mappings made.
    pub maps: AtomicUsize,
    /// IOMMU mappings removed.
    pub unmaps: AtomicUsize,
    /// Device resets.
    pub resets: AtomicUsize,
    /// Writes of a command register.
    pub config_writes: AtomicUsize,
    /// The command register of each function opened, by address.
    pub command: Mutex<HashMap<String, u16>>,
    /// The functions opened, in order.
    pub opened: Mutex<Vec<String>>,
    /// (BAR, window) of every mapping as registers, in order.
    pub bar_maps: Mutex<Vec<(u32, Range<u64>)>>,
    /// (BAR, window) of every mapping as memory, in order.
    pub memory_maps: Mutex<Vec<(u32, Range<u64>)>>,
    /// IOMMU mappings in place: IOVA -> (VA, length).
    pub mapped: Mutex<HashMap<u64, (usize, usize)>>,
    /// Every IOVA mapped so far.
    pub iovas: Mutex<Vec<u64>>,
}
