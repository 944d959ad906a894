//! [`Readiness`]: what a registered fd is ready for.
//!
//! Thread: any (plain data); handed to handlers on the fd's reactor.

/// What the fd is ready for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// Data (or end of file) can be read.
    pub readable: bool,
    /// Data can be written.
    pub writable: bool,
    /// The peer closed or the fd is in error.
    pub hangup: bool,
}
