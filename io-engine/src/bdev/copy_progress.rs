//! [`CopyProgress`]: how far a copy emulated with reads and writes has
//! come, kept in its IO object while the copy runs.
//!
//! Thread: the IO's reactor (plain data inside the IO object).

/// A copy emulated by [`CopyEmulation`](super::copy_emulation::CopyEmulation):
/// the copy's own parameters, put back in the IO object when it
/// completes, and the bytes copied so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CopyProgress {
    /// Source byte offset.
    pub(super) src: u64,
    /// Destination byte offset.
    pub(super) dst: u64,
    /// Bytes to copy.
    pub(super) len: u64,
    /// Bytes copied (read and written back).
    pub(super) done: u64,
}
