//! Where a connection's [`Output`](super::Output) goes: the socket itself
//! ([`Stream`](super::Stream)), or a layer that takes the bytes and holds
//! some for the socket (an NBD connection's TLS session encrypts them
//! into records).
//!
//! Thread: the connection's reactor.

use std::io::{self, IoSlice};

/// A writer of a connection's output.
pub(in crate::export) trait Sink {
    /// One write of the bytes of `bufs`, in order, as far as it takes
    /// them; `WouldBlock` when the socket is full. With `bufs` empty it
    /// only writes what it holds.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;

    /// Whether it holds bytes it took that have not reached the socket
    /// yet (the output waits for them: write interest stays on).
    #[inline]
    fn holds(&self) -> bool {
        false
    }
}
