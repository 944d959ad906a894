//! [`IovaWindows`]: the windows of an [`IovaMap`](super::IovaMap), by
//! virtual address and by IOVA: what its lock guards, read through an
//! [`IovaGuard`](super::IovaGuard) or the map's own methods.
//!
//! Thread: whichever thread holds the map's lock.

use std::collections::BTreeMap;

use super::window::Window;

/// The windows of an IOVA map, by virtual address and by IOVA.
#[derive(Debug, Default)]
pub(super) struct IovaWindows {
    pub(super) by_va: BTreeMap<usize, Window>,
    pub(super) by_iova: BTreeMap<u64, Window>,
}
