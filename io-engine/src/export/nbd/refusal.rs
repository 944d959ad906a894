//! Why the NBD server refused a client or closed a connection before its
//! transmission phase, as counted in
//! [`NbdCounters`](super::NbdCounters) and named in the metrics.
//!
//! Thread: any.

/// Why a client was refused or its handshake cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `GO`/`EXPORT_NAME` refused: `--nbd-max-connections` sessions are
    /// established.
    Connections,
    /// Closed in the handshake to make room for a newcomer:
    /// `--nbd-max-handshakes` connections were in it, and this was the
    /// oldest of those that made the least progress.
    Handshakes,
    /// Closed: not in transmission within `--nbd-handshake-timeout`.
    HandshakeTimeout,
}

impl Refusal {
    /// Every reason, in counter order.
    pub const ALL: [Refusal; 3] = [
        Refusal::Connections,
        Refusal::Handshakes,
        Refusal::HandshakeTimeout,
    ];

    /// Its name in the metrics' `reason` label.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Connections => "connections",
            Refusal::Handshakes => "handshakes",
            Refusal::HandshakeTimeout => "handshake_timeout",
        }
    }

    /// Its index in [`Refusal::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}
