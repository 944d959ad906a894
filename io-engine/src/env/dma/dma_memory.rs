//! [`DmaMemory`]: the seam through which a driver (I/OAT's channel, DSA's)
//! gets memory the device may access and the IOVA of any buffer.
//!
//! Thread: the reactor that owns the channel; implementations are shared
//! with the thread that maps DMA regions.

use super::dma_buffer::DmaBuffer;
use super::window::Window;

/// Memory the device may access.
///
/// # Safety
///
/// The driver hands the device every address this gives: an implementor
/// promises that each [`DmaBuffer`] from `alloc` and each [`Window`] from
/// `window` is memory the device may read and write, reached by the device
/// at the IOVA given, and that it stays mapped there while it is in use: a
/// buffer for as long as it lives, a window until `generation` changes
/// and, for the window holding a live DMA region, until that region is
/// dropped.
pub unsafe trait DmaMemory: Send + Sync {
    /// `len` bytes (at least 64-byte aligned, zeroed) that the device may
    /// read and write, with their IOVA.
    fn alloc(&self, len: usize) -> Result<DmaBuffer, String>;

    /// The window holding `addr`, or `None` when the device cannot reach
    /// it.
    fn window(&self, addr: usize) -> Option<Window>;

    /// A number that changes whenever a window appears or goes away, so a
    /// caller may cache windows while it stays the same.
    fn generation(&self) -> u64;
}
