//! The target's budget of Diffie-Hellman computations for queues that
//! have not authenticated yet: each ffdhe2048 key pair or shared value
//! costs about half a millisecond of a reactor, and a host needs no secret
//! to ask for one (Negotiate and Reply come before any proof), so without
//! a bound hosts that never authenticate could keep every reactor busy
//! with them. A computation takes a token; tokens come back at `rate` per
//! second, at most `burst` saved up. A queue that finds none waits (its
//! AUTH_Send is handled later, when one is due): it is delayed, never
//! refused, and the reactors spend at most `rate` computations' time per
//! second on hosts that have not authenticated.
//!
//! Thread: any (one atomic, the generic cell rate algorithm: the time the
//! next token is due, moved forward by one interval per computation).

use std::sync::atomic::{AtomicU64, Ordering};

/// Computations per second by default.
pub const DH_RATE: u32 = 200;
/// Computations that may run back to back by default (in one reactor
/// round, at most this many: a few milliseconds).
pub const DH_BURST: u32 = 8;

/// The budget.
#[derive(Debug)]
pub struct DhBudget {
    /// Nanoseconds between tokens.
    interval: u64,
    /// How far ahead of now the next token's due time may run: `burst - 1`
    /// intervals (so `burst` computations may run back to back).
    slack: u64,
    /// When the next token is due, in nanoseconds of the caller's clock
    /// (0: a full bucket).
    due: AtomicU64,
}

impl DhBudget {
    /// `rate` computations per second (at least 1), `burst` back to back
    /// (at least 1).
    pub fn new(rate: u32, burst: u32) -> DhBudget {
        let interval = 1_000_000_000 / u64::from(rate.max(1));
        DhBudget {
            interval,
            slack: interval * u64::from(burst.max(1) - 1),
            due: AtomicU64::new(0),
        }
    }

    /// Takes a token at `now` (nanoseconds of a monotonic clock), or says
    /// when (in the same clock) one will be there.
    pub fn take(&self, now: u64) -> Result<(), u64> {
        let mut due = self.due.load(Ordering::Relaxed);
        loop {
            // The theoretical time of this computation: no earlier than now.
            let at = due.max(now);
            if at > now + self.slack {
                return Err(at - self.slack);
            }
            match self.due.compare_exchange_weak(
                due,
                at + self.interval,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(d) => due = d,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_burst_then_the_rate() {
        // 100 per second (one each 10 ms), 3 back to back.
        let b = DhBudget::new(100, 3);
        let t0 = 1_000 * MS;
        assert!((0..3).all(|_| b.take(t0).is_ok()), "the burst");
        let retry = b.take(t0).unwrap_err();
        assert!(
            retry > t0 && retry <= t0 + 10 * MS,
            "the next within an interval"
        );
        assert!(b.take(retry).is_ok());
        assert!(b.take(retry).is_err(), "one per interval after the burst");
        // A second's pause fills the bucket again, to the burst only.
        let t1 = t0 + 1_000 * MS;
        assert_eq!((0..10).filter(|_| b.take(t1).is_ok()).count(), 3);
    }

    #[test]
    fn over_a_second_no_more_than_the_rate_and_the_burst() {
        let b = DhBudget::new(200, 8);
        let t0 = 5_000 * MS;
        // Someone asks every 100 µs for a second.
        let taken = (0..10_000u64)
            .filter(|i| b.take(t0 + i * MS / 10).is_ok())
            .count();
        assert!((200..=208).contains(&taken), "{taken}");
    }
}
