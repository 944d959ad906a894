//! [`Poll`]: what a poller reports for its round.
//!
//! Thread: a reactor thread (pollers run there).

/// What a poller found to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// It did work: the reactor counts the round as busy.
    Busy,
    /// Nothing to do.
    Idle,
}
