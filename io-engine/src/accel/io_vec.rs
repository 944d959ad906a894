//! A source segment of a vectored request (crc32c, copy_crc32c).
//!
//! Thread: any; a plain value. The memory it names is the submitter's
//! promise (see [`Batch`](super::Batch)).

/// One source (or destination) segment: `len` bytes at `base`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct IoVec {
    /// First byte.
    pub base: *const u8,
    /// Length in bytes.
    pub len: usize,
}

impl IoVec {
    /// A segment.
    pub const fn new(base: *const u8, len: usize) -> IoVec {
        IoVec { base, len }
    }
}
