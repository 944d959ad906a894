//! What a queue pair's input waits for, when it cannot handle the PDU at
//! its front yet: an IO buffer (they come back with completions and
//! flushes), or a token of the target's DH budget (due at a time).
//!
//! Thread: the queue's reactor.

/// What the input waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Nothing: PDUs are handled as they come.
    Nothing,
    /// An IO buffer for the command at the front.
    Buffer,
    /// A DH computation's token, due at this TSC time.
    Dh(u64),
}
