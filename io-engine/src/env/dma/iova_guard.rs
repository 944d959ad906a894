//! [`IovaGuard`]: a read lock on an [`IovaMap`](super::IovaMap), held by
//! whoever must keep the windows it resolved from being removed while it
//! uses them: the device model holds one across each descriptor's
//! execution, so an unmap (the `DmaMapper` contract: "the device must no
//! longer use it") waits for the descriptor in progress.
//!
//! Thread: whichever thread takes it (the model's device thread); it is
//! not `Send` and is released on that thread.

use std::sync::RwLockReadGuard;

use super::iova_windows::IovaWindows;

/// A read lock on an IOVA map; see the module doc.
pub struct IovaGuard<'a>(pub(super) RwLockReadGuard<'a, IovaWindows>);

impl IovaGuard<'_> {
    /// The virtual address of `len` bytes at `iova`, when they lie in one
    /// window. The window stays in the map while this guard lives.
    pub fn resolve(&self, iova: u64, len: u64) -> Option<*mut u8> {
        let (_, w) = self.0.by_iova.range(..=iova).next_back()?;
        let off = iova - w.iova;
        let end = off.checked_add(len)?;
        (end <= w.len as u64).then(|| (w.va + off as usize) as *mut u8)
    }
}
