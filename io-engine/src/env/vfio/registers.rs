//! [`Registers`]: the seam through which a driver reaches a device's
//! registers (a BAR window mapped through VFIO, a device model's register
//! file): I/OAT's channel registers, a DSA function's BAR0.
//!
//! Thread: the thread holding the device (for I/OAT, the reactor that
//! owns the channel).

/// Volatile access to a device's registers at BAR offsets.
///
/// Reads may have side effects on a device; every call is one access of
/// that width, in program order. Reads are safe: at worst they change the
/// device's state (a CHANSTS read), never memory. Writes are `unsafe`:
/// a write (DMACOUNT, CHANCMD, CHAINADDR, ...) may start the device's DMA.
///
/// # Safety (of every write)
///
/// A write may start the device's DMA. The caller guarantees that every
/// descriptor the device can reach after the write (for I/OAT: from
/// CHAINADDR, the `next` links, up to DMACOUNT) names only memory the
/// caller owns (source, destination, the next descriptor, the completion
/// word at CHANCMP), and
/// that this memory stays valid, and is reached by the caller only through
/// raw pointers (volatile, atomic), until the device is proven stopped
/// (halted, suspended or reset, as read back from the device).
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
    ///
    /// # Safety
    ///
    /// See the trait: the device may start DMA.
    unsafe fn write8(&self, off: usize, v: u8);
    /// 16-bit write at `off`.
    ///
    /// # Safety
    ///
    /// See the trait: the device may start DMA.
    unsafe fn write16(&self, off: usize, v: u16);
    /// 32-bit write at `off`.
    ///
    /// # Safety
    ///
    /// See the trait: the device may start DMA.
    unsafe fn write32(&self, off: usize, v: u32);
    /// 64-bit write at `off`.
    ///
    /// # Safety
    ///
    /// See the trait: the device may start DMA.
    unsafe fn write64(&self, off: usize, v: u64);
}
