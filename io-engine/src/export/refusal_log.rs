//! A rate-limited log line for one reason a connection is refused or
//! closed early (a connection limit, a handshake deadline): a flood of
//! such connections logs one line per interval, with the count of those
//! left unlogged since the line before, rather than a line each.
//!
//! Thread: any (atomics, no lock). The accept loops on the control-plane
//! runtime and the connections on their reactors note refusals; the
//! clock is passed in, so tests drive it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often each reason logs at most, by default.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The log state of one reason.
#[derive(Debug)]
pub struct RefusalLog {
    interval: u64,
    /// The clock's zero: times are kept as nanoseconds since.
    origin: Instant,
    /// When the next line may go out (ns since `origin`).
    next: AtomicU64,
    /// Refusals noted and not logged since the last line.
    suppressed: AtomicU64,
}

impl RefusalLog {
    /// One line per `interval` at most, the first at once.
    pub fn new(interval: Duration) -> RefusalLog {
        RefusalLog::since(Instant::now(), interval)
    }

    /// The same, with the clock's zero at `origin` (tests pass their own).
    pub fn since(origin: Instant, interval: Duration) -> RefusalLog {
        RefusalLog {
            interval: interval.as_nanos() as u64,
            origin,
            next: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// One more refusal at `now`. `Some(n)`: log a line for it now, saying
    /// that `n` more went unlogged since the last line; `None`: it is
    /// counted for that next line instead.
    pub fn note(&self, now: Instant) -> Option<u64> {
        if self.take_turn(now) {
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Refusals left unlogged whose interval is over: `Some(n)` (n > 0)
    /// when a line saying so is due at `now`, so that the end of a burst is
    /// logged too. Called once in a while (the accept loops do).
    pub fn flush(&self, now: Instant) -> Option<u64> {
        if self.suppressed.load(Ordering::Relaxed) == 0 || !self.take_turn(now) {
            return None;
        }
        Some(self.suppressed.swap(0, Ordering::Relaxed)).filter(|&n| n > 0)
    }

    /// Whether a line may go out at `now`; if so, the next one may not
    /// before an interval has passed.
    fn take_turn(&self, now: Instant) -> bool {
        let t = now.saturating_duration_since(self.origin).as_nanos() as u64;
        let next = self.next.load(Ordering::Relaxed);
        t >= next
            && self
                .next
                .compare_exchange(
                    next,
                    t.saturating_add(self.interval),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count_left_out() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let log = RefusalLog::since(t0, Duration::from_secs(10));
        assert_eq!(log.note(at(0)), Some(0), "the first logs at once");
        assert!((1..=500).all(|i| log.note(at(i)).is_none()));
        assert_eq!(log.flush(at(9_999)), None, "not before the interval");
        assert_eq!(log.note(at(10_000)), Some(500), "the next says how many");
        assert_eq!(log.note(at(10_001)), None);
        assert_eq!(log.note(at(10_002)), None);
        // The end of a burst: the flush says how many, once.
        assert_eq!(log.flush(at(20_000)), Some(2));
        assert_eq!(log.flush(at(40_000)), None, "nothing left out since");
        assert_eq!(
            log.note(at(40_000)),
            Some(0),
            "a quiet interval logs at once"
        );
    }

    #[test]
    fn concurrent_notes_log_once_per_interval_and_lose_no_count() {
        let t0 = Instant::now();
        let log = RefusalLog::since(t0, Duration::from_secs(3600));
        let logged: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..1000).filter(|_| log.note(t0).is_some()).count() as u64))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(logged, 1);
        assert_eq!(log.flush(t0 + Duration::from_secs(3600)), Some(3999));
    }
}
