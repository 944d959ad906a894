//! [`MappedBar`]: a fake function's registers seen through a mapped window
//! of a BAR: an access outside the window panics, as a real one would
//! fault.
//!
//! Thread: the thread holding the registers.

use std::ops::Range;

use crate::env::vfio::Registers;

/// A function's registers through a mapped window of BAR `index`.
pub struct MappedBar {
    /// The function's registers, at BAR offsets.
    pub regs: Box<dyn Registers>,
    /// Which BAR.
    pub index: u32,
    /// The window mapped.
    pub window: Range<u64>,
}

impl MappedBar {
    fn check(&self, off: usize, width: usize) -> usize {
        let (start, end) = (off as u64, (off + width) as u64);
        assert!(
            self.window.start <= start && end <= self.window.end,
            "BAR{} access at {off:#x} outside the mapped {:?}",
            self.index,
            self.window
        );
        off
    }
}

impl Registers for MappedBar {
    fn read8(&self, off: usize) -> u8 {
        self.regs.read8(self.check(off, 1))
    }
    fn read16(&self, off: usize) -> u16 {
        self.regs.read16(self.check(off, 2))
    }
    fn read32(&self, off: usize) -> u32 {
        self.regs.read32(self.check(off, 4))
    }
    fn read64(&self, off: usize) -> u64 {
        self.regs.read64(self.check(off, 8))
    }
    unsafe fn write8(&self, off: usize, v: u8) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.regs.write8(self.check(off, 1), v) }
    }
    unsafe fn write16(&self, off: usize, v: u16) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.regs.write16(self.check(off, 2), v) }
    }
    unsafe fn write32(&self, off: usize, v: u32) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.regs.write32(self.check(off, 4), v) }
    }
    unsafe fn write64(&self, off: usize, v: u64) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.regs.write64(self.check(off, 8), v) }
    }
}
