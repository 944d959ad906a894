//! The bound on the queues one host may hold: established queues (admin
//! and I/O, past their Connect and authentication) are counted by host
//! NQN across the target, and a Connect beyond the limit is refused, so
//! that one host (or several claiming its name) cannot take every
//! connection of a listener or every slot of an export from the others.
//!
//! Thread: any. One short lock when a queue is established and when it
//! closes; nothing on the data path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Established queues by host NQN.
#[derive(Debug)]
pub struct HostQueues {
    /// Most queues per host (0: no limit).
    limit: usize,
    counts: Mutex<HashMap<String, usize>>,
}

/// A queue's place in its host's count: dropping it gives the place back.
#[derive(Debug)]
pub struct HostSlot {
    queues: Arc<HostQueues>,
    host: String,
}

impl HostQueues {
    /// At most `limit` queues per host NQN (0: no limit).
    pub fn new(limit: usize) -> Arc<HostQueues> {
        Arc::new(HostQueues {
            limit,
            counts: Mutex::new(HashMap::new()),
        })
    }

    fn counts(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The limit (0: none).
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Whether host `host` may establish one more queue now.
    pub fn has_room(&self, host: &str) -> bool {
        self.limit == 0 || self.counts().get(host).copied().unwrap_or(0) < self.limit
    }

    /// Counts one more queue of `host`, unless it has its limit.
    pub fn admit(self: &Arc<Self>, host: &str) -> Option<HostSlot> {
        let mut counts = self.counts();
        let n = counts.entry(host.to_string()).or_insert(0);
        if self.limit != 0 && *n >= self.limit {
            return None;
        }
        *n += 1;
        Some(HostSlot {
            queues: self.clone(),
            host: host.to_string(),
        })
    }

    /// Queues `host` holds now.
    pub fn count(&self, host: &str) -> usize {
        self.counts().get(host).copied().unwrap_or(0)
    }

    /// Hosts holding a queue now.
    pub fn hosts(&self) -> usize {
        self.counts().len()
    }
}

impl Drop for HostSlot {
    fn drop(&mut self) {
        let mut counts = self.queues.counts();
        if let Some(n) = counts.get_mut(&self.host) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.host);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_host_holds_at_most_the_limit_and_leaving_frees_a_place() {
        let q = HostQueues::new(2);
        let a1 = q.admit("a").unwrap();
        let _a2 = q.admit("a").unwrap();
        assert!(q.admit("a").is_none() && !q.has_room("a"));
        let _b = q.admit("b").expect("another host has its own count");
        drop(a1);
        assert!(q.has_room("a"));
        let _a3 = q.admit("a").unwrap();
        assert_eq!((q.count("a"), q.count("b")), (2, 1));
        drop((_a2, _a3, _b));
        assert_eq!(q.hosts(), 0, "hosts with no queue are forgotten");
        let unlimited = HostQueues::new(0);
        let all: Vec<_> = (0..1000).map(|_| unlimited.admit("a")).collect();
        assert!(all.iter().all(Option::is_some));
    }
}
