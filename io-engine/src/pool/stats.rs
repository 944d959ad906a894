//! Pool counters: written by the core that owns them, read by anyone.
//!
//! Thread: each per-slot entry is written only by its slot's thread, with a
//! plain load and store (no locked instruction on the data path); the shared
//! entry for threads without a slot uses `fetch_add`. Readers (the control
//! plane) load them relaxed.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one core (or of the threads without a core) for one pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CoreStats {
    /// Core slot, or `None` for threads without one.
    pub slot: Option<u32>,
    /// Objects taken.
    pub gets: u64,
    /// Objects returned.
    pub puts: u64,
    /// Gets served by the core's cache.
    pub cache_hits: u64,
    /// Gets that had to go to the global store.
    pub cache_misses: u64,
    /// Gets that found the pool empty.
    pub exhausted: u64,
}

/// A pool's shape and counters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PoolStats {
    /// Pool name.
    pub name: String,
    /// Number of objects.
    pub capacity: u64,
    /// Per-core cache size.
    pub cache_size: u64,
    /// Objects handed out now.
    pub in_use: u64,
    /// Objects in the global store or a cache.
    pub available: u64,
    /// Counters of every core that used the pool.
    pub per_core: Vec<CoreStats>,
}

impl PoolStats {
    /// Sum of the per-core counters.
    pub fn total(&self) -> CoreStats {
        self.per_core
            .iter()
            .fold(CoreStats::default(), |a, c| CoreStats {
                slot: None,
                gets: a.gets + c.gets,
                puts: a.puts + c.puts,
                cache_hits: a.cache_hits + c.cache_hits,
                cache_misses: a.cache_misses + c.cache_misses,
                exhausted: a.exhausted + c.exhausted,
            })
    }
}

#[derive(Default)]
pub(super) struct SlotCounters {
    gets: AtomicU64,
    puts: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    exhausted: AtomicU64,
}

/// Adds one. `owned`: the caller is the counter's only writer, so a plain
/// load and store suffice; otherwise several threads share it.
#[inline(always)]
fn bump(c: &AtomicU64, owned: bool, order: Ordering) {
    if owned {
        c.store(c.load(Ordering::Relaxed) + 1, order);
    } else {
        c.fetch_add(1, order);
    }
}

impl SlotCounters {
    #[inline(always)]
    pub(super) fn get(&self, owned: bool) {
        bump(&self.gets, owned, Ordering::Relaxed);
    }
    /// Release: pairs with the Acquire in `in_use`, so a reader that counts
    /// every put sees all of that put's work finished.
    #[inline(always)]
    pub(super) fn put(&self, owned: bool) {
        bump(&self.puts, owned, Ordering::Release);
    }
    #[inline(always)]
    pub(super) fn hit(&self) {
        bump(&self.hits, true, Ordering::Relaxed);
    }
    #[inline(always)]
    pub(super) fn miss(&self, owned: bool) {
        bump(&self.misses, owned, Ordering::Relaxed);
    }
    #[inline(always)]
    pub(super) fn exhausted(&self, owned: bool) {
        bump(&self.exhausted, owned, Ordering::Relaxed);
    }
    pub(super) fn in_use(&self) -> u64 {
        let puts = self.puts.load(Ordering::Acquire);
        self.gets.load(Ordering::Relaxed).wrapping_sub(puts)
    }
    pub(super) fn snapshot(&self) -> CoreStats {
        CoreStats {
            slot: None,
            gets: self.gets.load(Ordering::Relaxed),
            puts: self.puts.load(Ordering::Relaxed),
            cache_hits: self.hits.load(Ordering::Relaxed),
            cache_misses: self.misses.load(Ordering::Relaxed),
            exhausted: self.exhausted.load(Ordering::Relaxed),
        }
    }
}
