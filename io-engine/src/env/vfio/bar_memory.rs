//! [`BarMemory`]: a window of a device BAR mapped into the process as
//! plain memory, for stores the [`Registers`](super::Registers) seam
//! cannot express (a DSA work queue's portal takes 64-byte MOVDIR64B or
//! ENQCMD writes, `accel::dsa::vfio`).
//!
//! Thread: mapped on the thread that opens the device; its address is
//! then written to by whichever thread submits (the reactor holding the
//! work queue).

/// A mapped window of a BAR, unmapped when dropped.
pub trait BarMemory: Send + Sync {
    /// The address of the window's first byte: device memory, valid for
    /// [`BarMemory::len`] bytes while the value lives; reach it only with
    /// volatile or device-specific stores.
    fn addr(&self) -> *mut u8;
    /// The window's length in bytes.
    fn len(&self) -> usize;
    /// Whether the window is empty (never, for a mapping).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
