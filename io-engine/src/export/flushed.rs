//! What one flush of a connection's output did (see
//! [`Output::flush`](super::Output::flush)).
//!
//! Thread: the connection's reactor (a plain value).

/// What one flush of an [`Output`](super::Output) did.
pub(in crate::export) struct Flushed {
    /// Some bytes went out.
    pub wrote: bool,
    /// A write failed: the client is gone and the output was dropped.
    pub gone: bool,
    /// The output held IO buffers and now holds none: a request waiting
    /// for one may go on.
    pub released: bool,
}
