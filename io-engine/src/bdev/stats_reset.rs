//! [`StatsReset`]: device counters to zero, one core at a time.
//!
//! Thread: built on the control path ([`BdevRegistry::stats_reset`]), then
//! handed to each reactor, which zeroes its own entries without touching
//! the registry's lock.
//!
//! [`BdevRegistry::stats_reset`]: super::BdevRegistry::stats_reset

use std::sync::Arc;

use super::entry::Entry;

/// Device counters to zero, one core at a time (see
/// [`BdevRegistry::stats_reset`](super::BdevRegistry::stats_reset)). Cheap
/// to clone.
#[derive(Clone)]
pub struct StatsReset {
    pub(super) entries: Vec<Arc<Entry>>,
}

impl StatsReset {
    /// Zeroes the calling thread's entries: a reactor's own, or, off the
    /// reactors, the one shared by threads without a core slot.
    pub fn reset_local(&self) {
        let slot = crate::env::core_slot::current();
        for e in &self.entries {
            e.stats.reset(slot);
        }
    }
}
