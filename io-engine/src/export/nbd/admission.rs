//! An NBD connection's bounds while it is in the handshake (from accept
//! until its transmission phase, a TLS negotiation included): its place
//! among the connections in the handshake, which a newcomer takes when
//! they are `--nbd-max-handshakes` and this one made the least progress,
//! and its deadline, `--nbd-handshake-timeout` after accept.
//!
//! Thread: the connection's reactor.

use std::time::Duration;

use super::Refusal;
use crate::env::tsc;
use crate::export::HandshakeSlot;
use crate::reactor;

/// A connection's handshake bounds.
pub(super) struct Admission {
    /// Its place among the connections in the handshake; `None` once
    /// established (or closed).
    slot: Option<HandshakeSlot>,
    /// When the handshake must be over (TSC; `u64::MAX`: never).
    deadline: u64,
    established: bool,
}

impl Admission {
    /// Bounds from now: `slot`, and `timeout` (zero: no deadline).
    pub fn new(slot: HandshakeSlot, timeout: Duration) -> Admission {
        let deadline = if timeout.is_zero() {
            u64::MAX
        } else {
            tsc::now().saturating_add(tsc::ns_to_ticks(timeout.as_nanos() as u64))
        };
        Admission {
            slot: Some(slot),
            deadline,
            established: false,
        }
    }

    /// Why a connection still in the handshake must close at `now` (TSC),
    /// if it must (once: it leaves the handshakes then); otherwise its
    /// reactor is asked to be awake by the deadline. `None` once
    /// established.
    pub fn cut_short(&mut self, now: u64) -> Option<Refusal> {
        let slot = self.slot.as_ref()?;
        let why = if slot.evicted() {
            Refusal::Handshakes
        } else if now >= self.deadline {
            Refusal::HandshakeTimeout
        } else {
            if self.deadline != u64::MAX {
                reactor::wake_by(self.deadline);
            }
            return None;
        };
        self.slot = None;
        Some(why)
    }

    /// A whole handshake message arrived: the connection is not silent.
    pub fn progressed(&self) {
        if let Some(s) = &self.slot {
            s.progressed();
        }
    }

    /// The connection entered transmission: it leaves the handshakes.
    pub fn establish(&mut self) {
        self.slot = None;
        self.established = true;
    }

    /// The connection closes: it leaves the handshakes if still there.
    /// Returns whether it was established.
    pub fn close(&mut self) -> bool {
        self.slot = None;
        self.established
    }
}
