//! Holding ready replies back briefly so that a client with many requests
//! in flight gets them in one write.
//!
//! Thread: the connection's reactor (`!Send`: `Cell`s).

use std::cell::Cell;
use std::time::Duration;

use crate::env::tsc;

/// Replies held back so that a client with many requests in flight gets
/// them together.
///
/// A client with D requests in flight sends no more until it has a reply.
/// So once the connection has taken D requests and answered all of them,
/// nothing more is coming until the client hears back, and writing the
/// answers then, together, costs one `write` and one wake-up of the client
/// for all D instead of one each, on both sides. D is learned: the most
/// requests the client has had outstanding. A client that sends fewer than
/// that (its depth fell, it waits on one answer before sending the next)
/// gets its answers at the latest `max` (`--nbd-reply-hold`) after the
/// first was ready,
/// and D falls to what it had outstanding then. A client with one request
/// at a time (D = 1) gets each answer at once, as without holding.
pub(super) struct Hold {
    /// Requests taken whose replies have not been written to the socket.
    outstanding: Cell<u32>,
    /// Of those, the replies waiting in the output.
    queued: Cell<u32>,
    /// The client's learned depth.
    depth: Cell<u32>,
    /// When the held replies must go out (a TSC time; meaningful while
    /// `queued > 0`).
    pub(super) until: Cell<u64>,
    /// The longest hold, in TSC ticks (zero: replies go out at once).
    max: u64,
}

/// Output this large goes out at once.
pub(super) const HOLD_BYTES: usize = 1 << 20;

impl Hold {
    pub(super) fn new(max: Duration) -> Hold {
        Hold {
            outstanding: Cell::new(0),
            queued: Cell::new(0),
            depth: Cell::new(1),
            until: Cell::new(0),
            max: tsc::ns_to_ticks(max.as_nanos().min(u64::MAX as u128) as u64),
        }
    }

    /// A request was taken (every one but DISC gets a reply).
    pub(super) fn accepted(&self) {
        let n = self.outstanding.get() + 1;
        self.outstanding.set(n);
        self.depth.set(self.depth.get().max(n));
    }

    /// A reply went into the output at `now`.
    pub(super) fn replied(&self, now: u64) {
        if self.queued.get() == 0 {
            self.until.set(now + self.max);
        }
        self.queued.set(self.queued.get() + 1);
    }

    /// The whole output reached the socket.
    pub(super) fn written_all(&self) {
        self.outstanding
            .set(self.outstanding.get().saturating_sub(self.queued.get()));
        self.queued.set(0);
    }

    /// Whether every request the client is expected to have in flight has
    /// its reply queued: nothing more is coming until they go out.
    pub(super) fn all_answered(&self) -> bool {
        let queued = self.queued.get();
        queued >= self.outstanding.get() && queued >= self.depth.get()
    }

    /// Whether the queued replies should go out at `now`. Past the
    /// deadline it also lowers the learned depth to what the client has
    /// outstanding, so its next round goes out without waiting.
    pub(super) fn due(&self, now: u64) -> bool {
        let outstanding = self.outstanding.get();
        if self.max == 0 || self.all_answered() {
            return true;
        }
        if now >= self.until.get() {
            // The client sent fewer than it used to: expect that many.
            self.depth.set(outstanding.max(1));
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_micros(100);

    fn ticks(us: u64) -> u64 {
        tsc::ns_to_ticks(us * 1000)
    }

    /// `n` requests taken, then each answered at `now`.
    fn round(h: &Hold, n: u32, now: u64) {
        for _ in 0..n {
            h.accepted();
        }
        for _ in 0..n {
            h.replied(now);
        }
    }

    #[test]
    fn one_request_at_a_time_is_answered_at_once() {
        let h = Hold::new(MAX);
        for i in 0..3 {
            round(&h, 1, ticks(i * 10));
            assert!(h.due(ticks(i * 10)));
            h.written_all();
        }
    }

    #[test]
    fn replies_wait_for_all_the_requests_the_client_has_in_flight() {
        let h = Hold::new(MAX);
        round(&h, 4, 0); // first round: learns the depth, nothing held back
        assert!(h.due(0));
        h.written_all();
        assert_eq!(h.outstanding.get(), 0);
        for _ in 0..4 {
            h.accepted();
        }
        for i in 0..3 {
            h.replied(ticks(i));
            assert!(!h.due(ticks(i)), "held after {} of 4", i + 1);
        }
        h.replied(ticks(3));
        assert!(h.due(ticks(3)), "all 4 answered: out they go");
    }

    #[test]
    fn a_request_still_in_flight_holds_the_others() {
        let h = Hold::new(MAX);
        round(&h, 2, 0);
        h.written_all();
        h.accepted();
        h.accepted();
        h.accepted(); // the client now has 3 out
        h.replied(0);
        h.replied(0);
        assert!(!h.due(ticks(1)), "one of three still in the device");
    }

    #[test]
    fn a_client_sending_fewer_gets_its_replies_by_the_deadline_and_is_expected_to_go_on_so() {
        let h = Hold::new(MAX);
        round(&h, 8, 0);
        h.written_all();
        round(&h, 2, ticks(1000));
        assert!(!h.due(ticks(1050)));
        assert!(h.due(ticks(1101)), "past the hold: out they go");
        h.written_all();
        // It now expects 2: the next 2 go out at once.
        round(&h, 2, ticks(2000));
        assert!(h.due(ticks(2000)));
    }

    #[test]
    fn a_zero_hold_never_holds() {
        let h = Hold::new(Duration::ZERO);
        round(&h, 8, 0);
        h.written_all();
        h.accepted();
        h.accepted();
        h.replied(0);
        assert!(h.due(0));
    }
}
