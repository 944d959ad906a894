//! The block size constraints an NBD export advertises (`INFO_BLOCK_SIZE`).
//!
//! Thread: any (plain data).

/// Block size constraints as advertised in `INFO_BLOCK_SIZE`, sanitised to
/// what the spec allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockLimits {
    /// Power of two, 1..=64 KiB; offsets and lengths must be multiples.
    pub minimum: u32,
    /// Power of two, at least `max(minimum, 512)`, at most `maximum`.
    pub preferred: u32,
    /// Multiple of `minimum`, at most [`MAX_PAYLOAD`](super::proto::MAX_PAYLOAD): the longest READ or
    /// WRITE.
    pub maximum: u32,
}
