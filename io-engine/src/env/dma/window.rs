//! [`Window`]: a stretch of memory contiguous in both the virtual and the
//! device's (IOVA) address space.
//!
//! Thread: any (a plain value).

/// A stretch of memory that is contiguous both in the virtual address
/// space and in the device's (IOVA) address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First virtual address.
    pub va: usize,
    /// Length in bytes.
    pub len: usize,
    /// IOVA of `va`.
    pub iova: u64,
}

impl Window {
    /// Whether `addr` lies in the window.
    #[inline]
    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.va && addr - self.va < self.len
    }
}
