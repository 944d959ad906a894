//! [`Mmio`]: a window of a BAR mmapped from a VFIO device, as
//! [`Registers`] (bounded volatile accesses) or as [`BarMemory`].
//!
//! Thread: mapped on the thread that opens the device; then used by the
//! thread holding the registers or submitting through the memory.

use std::ptr::NonNull;
use std::sync::Arc;

use super::bar_memory::BarMemory;
use super::registers::Registers;

/// A window of a BAR mapped from a VFIO device: volatile accesses at BAR
/// offsets inside it only (as [`Registers`]), or its address (as
/// [`BarMemory`]); unmapped on drop.
pub(super) struct Mmio {
    pub(super) ptr: NonNull<u8>,
    /// Which BAR.
    pub(super) bar: u32,
    /// The BAR offset `ptr` maps.
    pub(super) start: usize,
    pub(super) len: usize,
    pub(super) _dev: Arc<vfio_ioctls::VfioDevice>,
}

// SAFETY: the mapping is device memory reached only through volatile
// accesses; it lives as long as the value and is not tied to a thread.
unsafe impl Send for Mmio {}
// SAFETY: as for `Send`: every access through `&self` is one volatile
// access of device memory (or, as `BarMemory`, the caller's device stores),
// which threads may make at once.
unsafe impl Sync for Mmio {}

impl Mmio {
    #[inline]
    fn at<T>(&self, off: usize) -> *mut T {
        let rel = off.wrapping_sub(self.start);
        assert!(
            off >= self.start
                && rel + size_of::<T>() <= self.len
                && off.is_multiple_of(align_of::<T>()),
            "BAR{} access of {} bytes at {off:#x} (mapped: {:#x}..{:#x})",
            self.bar,
            size_of::<T>(),
            self.start,
            self.start + self.len
        );
        // SAFETY: inside the mapped window (asserted).
        unsafe { self.ptr.as_ptr().add(rel).cast() }
    }
}

macro_rules! mmio_rw {
    ($read:ident, $write:ident, $t:ty) => {
        fn $read(&self, off: usize) -> $t {
            let p = self.at::<$t>(off);
            // SAFETY: an aligned register inside the mapped BAR (`at`).
            unsafe { p.read_volatile() }
        }
        unsafe fn $write(&self, off: usize, v: $t) {
            let p = self.at::<$t>(off);
            // SAFETY: an aligned register inside the mapped BAR (`at`);
            // what the device then does with memory is the caller's
            // contract (`Registers`).
            unsafe { p.write_volatile(v) }
        }
    };
}

impl Registers for Mmio {
    mmio_rw!(read8, write8, u8);
    mmio_rw!(read16, write16, u16);
    mmio_rw!(read32, write32, u32);
    mmio_rw!(read64, write64, u64);
}

impl BarMemory for Mmio {
    fn addr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmio {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `SystemDevice::mmap`; no
        // access follows.
        if let Err(e) = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) } {
            tracing::warn!("munmap of BAR{} failed: {e}", self.bar);
        }
    }
}
