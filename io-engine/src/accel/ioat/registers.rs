//! [`Registers`]: the seam through which the channel driver reaches a
//! device's registers (the VFIO backend's mapped BAR0, the model's register
//! file).
//!
//! Thread: the reactor that owns the channel.

/// Volatile access to a device's registers at BAR0 offsets.
///
/// Reads may have side effects on a device; every call is one access of
/// that width, in program order.
pub trait Registers: Send {
    /// 8-bit read at `off`.
    fn read8(&self, off: usize) -> u8;
    /// 16-bit read at `off`.
    fn read16(&self, off: usize) -> u16;
    /// 32-bit read at `off`.
    fn read32(&self, off: usize) -> u32;
    /// 64-bit read at `off`.
    fn read64(&self, off: usize) -> u64;
    /// 8-bit write at `off`.
    fn write8(&self, off: usize, v: u8);
    /// 16-bit write at `off`.
    fn write16(&self, off: usize, v: u16);
    /// 32-bit write at `off`.
    fn write32(&self, off: usize, v: u32);
    /// 64-bit write at `off`.
    fn write64(&self, off: usize, v: u64);
}
