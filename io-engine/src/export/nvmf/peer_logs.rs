//! The rate limits of the log lines hosts cause: one [`RefusalLog`] per
//! [`PeerEvent`], so a host that repeats an event logs one line per
//! interval with the count left out since, never a line each. The
//! listeners' accept loops flush the counts of events that stopped, so the
//! end of a burst is logged too.
//!
//! Thread: any (atomics); noted by the queue pairs on their reactors,
//! flushed on the control-plane runtime.

use std::time::Instant;

use super::peer_event::PeerEvent;
use crate::export::{REFUSAL_LOG_INTERVAL, RefusalLog};

/// One rate limit per kind of event.
#[derive(Debug)]
pub struct PeerLogs {
    logs: [RefusalLog; PeerEvent::ALL.len()],
}

impl Default for PeerLogs {
    fn default() -> Self {
        PeerLogs {
            logs: PeerEvent::ALL.map(|_| RefusalLog::new(REFUSAL_LOG_INTERVAL)),
        }
    }
}

impl PeerLogs {
    /// One more `event`: `Some(n)` when a line is due now (saying `n`
    /// more went unlogged since the last), `None` when it only counts.
    pub fn note(&self, event: PeerEvent) -> Option<u64> {
        self.logs
            .get(event.index())
            .and_then(|l| l.note(Instant::now()))
    }

    /// The events whose unlogged count is due a line at `now`: (event,
    /// count), each count above 0.
    pub fn flush(&self, now: Instant) -> Vec<(PeerEvent, u64)> {
        PeerEvent::ALL
            .iter()
            .zip(&self.logs)
            .filter_map(|(e, l)| Some((*e, l.flush(now)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_has_its_own_limit() {
        let logs = PeerLogs::default();
        assert_eq!(logs.note(PeerEvent::Terminated), Some(0));
        assert_eq!(logs.note(PeerEvent::Terminated), None);
        assert_eq!(logs.note(PeerEvent::Terminated), None);
        assert_eq!(logs.note(PeerEvent::AuthFailed), Some(0), "its own limit");
        let later = Instant::now() + REFUSAL_LOG_INTERVAL * 2;
        assert_eq!(logs.flush(later), vec![(PeerEvent::Terminated, 2)]);
        assert!(logs.flush(later + REFUSAL_LOG_INTERVAL * 2).is_empty());
    }
}
