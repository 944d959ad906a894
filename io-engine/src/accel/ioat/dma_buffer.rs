//! [`DmaBuffer`]: device-visible memory the I/OAT driver owns (the
//! descriptor ring, the completion word), a view of a
//! [`DmaSlice`](crate::env::dma::DmaSlice) reached only through volatile and
//! atomic accessors, never through `&`/`&mut` references, since the device
//! may access it at any time.
//!
//! Thread: the reactor that owns the channel (and, for the model, its
//! device thread, through the IOVA).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::env::dma::{DmaRegion, DmaSlice};

/// Device-visible memory the driver owns (the descriptor ring, the
/// completion word), reached only through volatile and atomic accessors.
///
/// It shares the region slice of a pool's `DmaChunk` (a range of a
/// `DmaRegion`, its IOVA, the bounds checks), but not its contract: a chunk
/// hands out `&[u8]`/`&mut [u8]` to memory only the CPU touches while it is
/// borrowed, while the device writes this memory at any time, so no
/// reference to it may exist. The two stay separate views of the slice so
/// that neither access can reach the other's memory.
#[derive(Debug)]
pub struct DmaBuffer(DmaSlice);

/// The slice's base, length, IOVA and raw-pointer access; the buffer adds
/// the volatile and atomic accessors below.
impl std::ops::Deref for DmaBuffer {
    type Target = DmaSlice;

    #[inline]
    fn deref(&self) -> &DmaSlice {
        &self.0
    }
}

impl DmaBuffer {
    /// The whole of `region`, whose first byte the device sees at `iova`.
    pub fn new(region: Arc<DmaRegion>, iova: u64) -> DmaBuffer {
        let len = region.len();
        DmaBuffer(DmaSlice::new(region, 0, len, iova))
    }

    /// Volatile 32-bit write at `off`.
    #[inline]
    pub fn write_u32(&self, off: usize, v: u32) {
        let p = self.0.at::<u32>(off);
        // SAFETY: in bounds and aligned (checked by `at`); the memory is
        // mapped while `self` lives and only accessed through raw pointers.
        unsafe { p.write_volatile(v) }
    }

    /// Volatile 64-bit write at `off`.
    #[inline]
    pub fn write_u64(&self, off: usize, v: u64) {
        let p = self.0.at::<u64>(off);
        // SAFETY: as for write_u32.
        unsafe { p.write_volatile(v) }
    }

    /// Volatile 32-bit read at `off`.
    #[inline]
    pub fn read_u32(&self, off: usize) -> u32 {
        let p = self.0.at::<u32>(off);
        // SAFETY: as for write_u32.
        unsafe { p.read_volatile() }
    }

    /// Volatile 64-bit read at `off`.
    #[inline]
    pub fn read_u64(&self, off: usize) -> u64 {
        let p = self.0.at::<u64>(off);
        // SAFETY: as for write_u32.
        unsafe { p.read_volatile() }
    }

    /// Atomic (acquire) 64-bit load at `off`: the completion word, which
    /// the device writes behind the program's back. Acquire orders the
    /// reads of task data after it.
    #[inline]
    pub fn load_u64(&self, off: usize) -> u64 {
        let p = self.0.at::<u64>(off);
        // SAFETY: in bounds and 8-aligned (checked by `at`); the memory is
        // only accessed atomically or volatilely, never by reference, and
        // lives as long as `self`.
        unsafe { AtomicU64::from_ptr(p) }.load(Ordering::Acquire)
    }

    /// Atomic (release) 64-bit store at `off`.
    #[inline]
    pub fn store_u64(&self, off: usize, v: u64) {
        let p = self.0.at::<u64>(off);
        // SAFETY: as for load_u64.
        unsafe { AtomicU64::from_ptr(p) }.store(v, Ordering::Release)
    }
}
