//! [`DmaBuffer`]: device-visible memory a driver owns (I/OAT's descriptor
//! ring and completion word, DSA's descriptors and completion records), a
//! view of a [`DmaSlice`] reached only through atomic accessors, never
//! through `&`/`&mut` references, since the device may access it at any
//! time. Every access is atomic (relaxed, or
//! acquire/release where it orders other memory), so a `DmaBuffer` shared
//! between threads (it is `Sync`) races with nothing, in the language's
//! model as on the hardware.
//!
//! Thread: the reactor that owns the channel (and, for the model, its
//! device thread, through the IOVA).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::region::DmaRegion;
use super::slice::DmaSlice;

/// Device-visible memory the driver owns (a descriptor ring, a completion
/// word or record), reached only through atomic accessors.
///
/// It shares the region slice of a pool's `DmaChunk` (a range of a
/// `DmaRegion`, its IOVA, the bounds checks), but not its contract: a chunk
/// hands out `&[u8]`/`&mut [u8]` to memory only the CPU touches while it is
/// borrowed, while the device writes this memory at any time, so no
/// reference to it may exist. The two stay separate views of the slice so
/// that neither access can reach the other's memory.
///
/// Its IOVA is where the device sees its first byte, as the mapper that
/// made the region visible to the device said ([`DmaMemory::alloc`]):
/// made only inside the crate, and only through [`DmaBuffer::new`]'s
/// contract, so that safe code cannot hand the device an address it does
/// not own.
///
/// [`DmaMemory::alloc`]: super::DmaMemory::alloc
#[derive(Debug)]
pub struct DmaBuffer {
    slice: DmaSlice,
    iova: u64,
}

/// The slice's base, length and raw-pointer access; the buffer adds its
/// IOVA and the atomic accessors below.
impl std::ops::Deref for DmaBuffer {
    type Target = DmaSlice;

    #[inline]
    fn deref(&self) -> &DmaSlice {
        &self.slice
    }
}

impl DmaBuffer {
    /// The whole of `region`, whose first byte the device sees at `iova`.
    ///
    /// # Safety
    ///
    /// The device reaches `region`, all of it, at `iova..iova + len` (a
    /// mapper mapped it there), and it stays mapped there for as long as
    /// the buffer lives: the driver hands the device addresses computed
    /// from `iova` (ring slots, the completion word), so a wrong `iova`
    /// would point the device at memory the buffer does not own.
    pub(crate) unsafe fn new(region: Arc<DmaRegion>, iova: u64) -> DmaBuffer {
        let len = region.len();
        DmaBuffer {
            slice: DmaSlice::new(region, 0, len),
            iova,
        }
    }

    /// The IOVA of the first byte: where the device sees it.
    #[inline]
    pub fn iova(&self) -> u64 {
        self.iova
    }

    /// The 32-bit word at `off`, as an atomic.
    #[inline]
    fn word32(&self, off: usize) -> &AtomicU32 {
        let p = self.slice.at::<u32>(off);
        // SAFETY: in bounds and 4-aligned (checked by `at`); the memory is
        // mapped while `self` lives (the returned reference borrows it) and
        // is only ever accessed atomically (here, and by the device), never
        // through a non-atomic reference.
        unsafe { AtomicU32::from_ptr(p) }
    }

    /// The 64-bit word at `off`, as an atomic.
    #[inline]
    fn word64(&self, off: usize) -> &AtomicU64 {
        let p = self.slice.at::<u64>(off);
        // SAFETY: as for `word32`, 8-aligned (checked by `at`).
        unsafe { AtomicU64::from_ptr(p) }
    }

    /// 32-bit write at `off` (relaxed: the doorbell's release orders it
    /// before the device's reads).
    #[inline]
    pub fn write_u32(&self, off: usize, v: u32) {
        self.word32(off).store(v, Ordering::Relaxed)
    }

    /// 64-bit write at `off` (relaxed).
    #[inline]
    pub fn write_u64(&self, off: usize, v: u64) {
        self.word64(off).store(v, Ordering::Relaxed)
    }

    /// 32-bit read at `off` (relaxed).
    #[inline]
    pub fn read_u32(&self, off: usize) -> u32 {
        self.word32(off).load(Ordering::Relaxed)
    }

    /// 64-bit read at `off` (relaxed).
    #[inline]
    pub fn read_u64(&self, off: usize) -> u64 {
        self.word64(off).load(Ordering::Relaxed)
    }

    /// Atomic (acquire) 64-bit load at `off`: the completion word, which
    /// the device writes behind the program's back. Acquire orders the
    /// reads of task data after it.
    #[inline]
    pub fn load_u64(&self, off: usize) -> u64 {
        self.word64(off).load(Ordering::Acquire)
    }

    /// Atomic (release) 64-bit store at `off`.
    #[inline]
    pub fn store_u64(&self, off: usize, v: u64) {
        self.word64(off).store(v, Ordering::Release)
    }
}
