//! [`Inner`]: the state every handle of one pool shares: the objects, the
//! global store, the per-core caches and the counters; and how a get or a
//! put moves an index between them.
//!
//! Thread: any. A cache is touched only by the thread holding its core slot;
//! the global store is lock-free; the counters are per slot.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;

use super::stats::SlotCounters;
use crate::env::core_slot::{self, MAX_SLOTS};

/// A per-core cache: a LIFO stack of object indices.
pub(super) struct Cache {
    pub(super) items: Vec<u32>,
}

/// What a pool's handles share: the objects, the global store of free
/// indices, the per-core caches and the counters.
pub(super) struct Inner<T> {
    pub(super) name: String,
    pub(super) cache_size: usize,
    /// Objects; slot `i` is reachable only by whoever holds index `i`.
    /// Each on cache lines of its own, as DPDK aligns mempool objects: two
    /// cores working on neighbouring objects must not share a line.
    pub(super) objects: Box<[CachePadded<UnsafeCell<T>>]>,
    global: ArrayQueue<u32>,
    /// Per-slot caches: entry `s` is touched only by the thread holding core slot `s`.
    caches: Box<[CachePadded<UnsafeCell<Cache>>]>,
    /// Per-slot counters (written by the slot's thread), then one shared
    /// entry for threads without a slot.
    pub(super) counters: Box<[CachePadded<SlotCounters>]>,
    starving: AtomicBool,
}

// SAFETY: an object index lives in exactly one place at a time (the global
// store, one cache, or one `Pooled` handle), so each object is reached by one
// thread at a time and moves between threads only as `T: Send` allows. Cache
// `s` is touched only by the thread holding core slot `s`, and slot claims are
// unique (`core_slot`). Everything else is atomic or immutable.
unsafe impl<T: Send> Sync for Inner<T> {}
// SAFETY: as for `Sync`; the objects themselves are `Send`.
unsafe impl<T: Send> Send for Inner<T> {}

impl<T> Inner<T> {
    /// The state of a pool named `name` whose `capacity` objects are
    /// `init(i)`, all free in the global store. The caller checked the
    /// shape (`capacity` fits a `u32`).
    pub(super) fn new(
        name: String,
        capacity: usize,
        cache_size: usize,
        mut init: impl FnMut(usize) -> T,
    ) -> Self {
        let global = ArrayQueue::new(capacity);
        for i in 0..capacity {
            let _ = global.push(i as u32);
        }
        Inner {
            name,
            cache_size,
            objects: (0..capacity)
                .map(|i| CachePadded::new(UnsafeCell::new(init(i))))
                .collect(),
            global,
            caches: (0..MAX_SLOTS)
                .map(|_| CachePadded::new(UnsafeCell::new(Cache { items: Vec::new() })))
                .collect(),
            counters: (0..=MAX_SLOTS)
                .map(|_| CachePadded::new(SlotCounters::default()))
                .collect(),
            starving: AtomicBool::new(false),
        }
    }

    #[inline]
    fn counters(&self, slot: Option<u32>) -> &SlotCounters {
        match slot {
            Some(s) => &self.counters[s as usize],
            None => &self.counters[MAX_SLOTS],
        }
    }

    /// The calling thread's cache, if it holds a slot and caching is on.
    ///
    /// # Safety
    /// `slot` must be the calling thread's own core slot, and the returned
    /// reference must be dropped before anything else can reach this cache
    /// (no reentrant get/put while it lives).
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn cache(&self, slot: u32) -> &mut Cache {
        let cell = &self.caches[slot as usize];
        // SAFETY: the caller holds `slot`, and only the slot's holder touches
        // this cache; the caller keeps the borrow short and non-reentrant.
        let cache = unsafe { &mut *cell.get() };
        if cache.items.capacity() == 0 {
            // First use by this slot: one allocation, off the steady state.
            cache.items.reserve_exact(self.cache_size);
        }
        cache
    }

    /// `count_exhaustion`: a first attempt counts an empty pool as an
    /// exhaustion event; retries of a request already waiting do not.
    #[inline(always)]
    pub(super) fn get(&self, count_exhaustion: bool) -> Option<u32> {
        let slot = core_slot::current();
        let counters = self.counters(slot);
        let got = match slot {
            Some(s) if self.cache_size > 0 => {
                // SAFETY: `s` is this thread's slot; no reentrancy below.
                let cache = unsafe { self.cache(s) };
                match cache.items.pop() {
                    Some(i) => {
                        counters.hit();
                        Some(i)
                    }
                    None => {
                        counters.miss(true);
                        self.refill(cache)
                    }
                }
            }
            _ => {
                counters.miss(slot.is_some());
                self.pop_global()
            }
        };
        match got {
            Some(i) => {
                counters.get(slot.is_some());
                Some(i)
            }
            None => {
                if count_exhaustion {
                    counters.exhausted(slot.is_some());
                }
                self.starving.store(true, Ordering::Relaxed);
                None
            }
        }
    }

    /// Moves up to half a cache from the global store into `cache` and
    /// returns one object from it.
    #[cold]
    fn refill(&self, cache: &mut Cache) -> Option<u32> {
        let want = (self.cache_size / 2).max(1);
        let first = self.pop_global()?;
        for _ in 1..want {
            match self.global.pop() {
                Some(i) => cache.items.push(i),
                None => break,
            }
        }
        Some(first)
    }

    pub(super) fn put(&self, index: u32) {
        let slot = core_slot::current();
        match slot {
            Some(s) if self.cache_size > 0 => {
                // SAFETY: `s` is this thread's slot; no reentrancy below.
                let cache = unsafe { self.cache(s) };
                if self.starving.load(Ordering::Relaxed) {
                    self.flush(cache, cache.items.len());
                    self.push_global(index);
                } else {
                    if cache.items.len() == self.cache_size {
                        self.flush(cache, (self.cache_size / 2).max(1));
                    }
                    cache.items.push(index);
                }
            }
            _ => self.push_global(index),
        }
        // Last: a `put` count that matches the `get` count proves no handle
        // is still touching the pool (see `ObjectPool::drop`).
        self.counters(slot).put(slot.is_some());
    }

    /// Moves the `n` oldest (coldest) entries of `cache` to the global store.
    #[cold]
    pub(super) fn flush(&self, cache: &mut Cache, n: usize) {
        let n = n.min(cache.items.len());
        for i in cache.items.drain(..n) {
            self.push_global(i);
        }
    }

    /// Takes one index from the global store; success there means the
    /// pool is no longer starved.
    #[inline]
    fn pop_global(&self) -> Option<u32> {
        let i = self.global.pop()?;
        if self.starving.load(Ordering::Relaxed) {
            self.starving.store(false, Ordering::Relaxed);
        }
        Some(i)
    }

    #[inline]
    fn push_global(&self, index: u32) {
        // Every index fits: the store's capacity is the pool's capacity and
        // an index is in at most one place.
        if self.global.push(index).is_err() {
            unreachable!("pool {}: global store overflow", self.name);
        }
    }

    pub(super) fn in_use(&self) -> u64 {
        self.counters
            .iter()
            .map(|c| c.in_use())
            .fold(0u64, |a, b| a.wrapping_add(b))
    }
}
