//! A received data PDU's digest, as its data is put in its command's
//! buffer: checked inline (matched or not), or to check off the core.
//!
//! Thread: the queue's reactor.

/// A received data PDU's digest.
pub(crate) enum Digest {
    /// Matched (or data digests are off).
    Good,
    /// Did not match.
    Bad,
    /// To compute off the core over these bytes of the command's buffer,
    /// and compare with this.
    Check(std::ops::Range<usize>, u32),
}
