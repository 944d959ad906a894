//! Fixed-capacity object pools with per-core caches, as DPDK's mempool and
//! SPDK's bdev_io pool are: the data path never calls the allocator.
//!
//! Thread: any. A get or put on a thread that holds a core slot
//! ([`crate::env::core_slot`]) works on that slot's cache (LIFO, so the
//! objects it hands out are hot in that core's cache) and touches shared state
//! only to refill or flush in bulk. Threads without a slot, and every thread
//! when the cache size is 0, go to the global store directly. An object put
//! back on another core goes to *that* core's cache.
//!
//! The global store is crossbeam's lock-free `ArrayQueue` of slot indices; it
//! has no bulk operation, so a refill or flush moves half a cache one index
//! at a time (one CAS each, amortised over the cache size).
//!
//! A core that finds the pool empty raises a *starving* flag; while it is up,
//! every put goes to the global store so that objects freed on other cores
//! reach the starving one instead of sitting in their caches.

mod buf;
mod stats;

pub use buf::{BufPool, BufPoolError, DmaChunk, IoBuf};
pub use stats::{CoreStats, PoolStats};

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;

use crate::env::core_slot::{self, MAX_SLOTS};
use stats::SlotCounters;

/// Default per-core cache size, as Mayastor sizes its IO object pool cache.
pub const DEFAULT_CACHE_SIZE: usize = 512;

/// Pools dropped while objects were still out. Each such pool is leaked (its
/// objects stay valid) and counted here; see [`ObjectPool`]'s `Drop`.
static LEAKED_POOLS: AtomicU64 = AtomicU64::new(0);

/// How many pools were dropped with objects outstanding, process-wide.
pub fn leaked_pools() -> u64 {
    LEAKED_POOLS.load(Ordering::Relaxed)
}

/// Errors creating a pool.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PoolError {
    /// Zero objects requested.
    #[error("pool {0}: capacity must be at least 1")]
    ZeroCapacity(String),
    /// More objects than an index can name.
    #[error("pool {name}: capacity {capacity} exceeds the maximum {max}")]
    TooLarge {
        /// Pool name.
        name: String,
        /// Requested capacity.
        capacity: usize,
        /// Largest capacity supported.
        max: usize,
    },
    /// Caches could hold every object, starving the cores that need them.
    #[error(
        "pool {name}: capacity {capacity} is too small for a per-core cache of {cache_size} on \
         {cores} cores (needs at least cache size x (cores + 1) = {needed}); raise the pool size \
         or lower the cache size"
    )]
    CacheTooLarge {
        /// Pool name.
        name: String,
        /// Requested capacity.
        capacity: usize,
        /// Requested per-core cache size.
        cache_size: usize,
        /// Cores the pool will serve.
        cores: usize,
        /// The least capacity that works.
        needed: usize,
    },
}

/// Pool shape, fixed at creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// Name shown in stats.
    pub name: String,
    /// Number of objects.
    pub capacity: usize,
    /// Objects each core may keep in its cache; 0 disables caching.
    pub cache_size: usize,
    /// Cores expected to use the pool (for the cache-size sanity check).
    pub cores: usize,
}

impl PoolConfig {
    /// A pool of `capacity` objects with the default cache size, for `cores` cores.
    pub fn new(name: impl Into<String>, capacity: usize, cores: usize) -> Self {
        PoolConfig {
            name: name.into(),
            capacity,
            cache_size: DEFAULT_CACHE_SIZE,
            cores,
        }
    }

    /// Sets the per-core cache size.
    pub fn cache_size(mut self, cache_size: usize) -> Self {
        self.cache_size = cache_size;
        self
    }
}

/// A per-core cache: a LIFO stack of object indices.
struct Cache {
    items: Vec<u32>,
}

struct Inner<T> {
    name: String,
    cache_size: usize,
    /// Objects; slot `i` is reachable only by whoever holds index `i`.
    /// Each on cache lines of its own, as DPDK aligns mempool objects: two
    /// cores working on neighbouring objects must not share a line.
    objects: Box<[CachePadded<UnsafeCell<T>>]>,
    global: ArrayQueue<u32>,
    /// Per-slot caches: entry `s` is touched only by the thread holding core slot `s`.
    caches: Box<[CachePadded<UnsafeCell<Cache>>]>,
    /// Per-slot counters (written by the slot's thread), then one shared
    /// entry for threads without a slot.
    counters: Box<[CachePadded<SlotCounters>]>,
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
    unsafe fn cache(&self, slot: u32) -> &mut Cache {
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
    fn get(&self, count_exhaustion: bool) -> Option<u32> {
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

    fn put(&self, index: u32) {
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
    fn flush(&self, cache: &mut Cache, n: usize) {
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

    fn in_use(&self) -> u64 {
        self.counters
            .iter()
            .map(|c| c.in_use())
            .fold(0u64, |a, b| a.wrapping_add(b))
    }
}

/// A pool of `T` objects: fixed capacity, global store, per-core caches.
///
/// Objects are created once, at pool creation, and reused: a [`Pooled`]
/// handle returns its object on drop without dropping it, so the next get
/// sees the old value (callers reset what they use).
pub struct ObjectPool<T> {
    inner: NonNull<Inner<T>>,
    _owns: PhantomData<Inner<T>>,
}

// SAFETY: the pool shares `Inner`, which is Send + Sync for `T: Send`.
unsafe impl<T: Send> Send for ObjectPool<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for ObjectPool<T> {}

impl<T: Send> ObjectPool<T> {
    /// Creates a pool whose objects are `init(i)` for `i` in `0..capacity`.
    pub fn new(config: PoolConfig, mut init: impl FnMut(usize) -> T) -> Result<Self, PoolError> {
        let PoolConfig {
            name,
            capacity,
            cache_size,
            cores,
        } = config;
        if capacity == 0 {
            return Err(PoolError::ZeroCapacity(name));
        }
        if capacity > u32::MAX as usize {
            return Err(PoolError::TooLarge {
                name,
                capacity,
                max: u32::MAX as usize,
            });
        }
        let needed = cache_size.saturating_mul(cores.saturating_add(1));
        if cache_size > 0 && capacity < needed {
            return Err(PoolError::CacheTooLarge {
                name,
                capacity,
                cache_size,
                cores,
                needed,
            });
        }
        let global = ArrayQueue::new(capacity);
        for i in 0..capacity {
            let _ = global.push(i as u32);
        }
        let inner = Box::new(Inner {
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
        });
        Ok(ObjectPool {
            inner: NonNull::from(Box::leak(inner)),
            _owns: PhantomData,
        })
    }

    #[inline]
    fn inner(&self) -> &Inner<T> {
        // SAFETY: `inner` came from `Box::leak` and is freed only in `drop`,
        // when no handle is outstanding.
        unsafe { self.inner.as_ref() }
    }

    /// Takes an object, or `None` when the pool is exhausted (counted as an
    /// exhaustion event; the caller queues its request and retries).
    #[inline]
    pub fn get(&self) -> Option<Pooled<T>> {
        self.take(true)
    }

    /// As [`Self::get`], for a caller retrying a request that already met
    /// an empty pool: not counted as another exhaustion event.
    #[inline]
    pub fn retry_get(&self) -> Option<Pooled<T>> {
        self.take(false)
    }

    #[inline(always)]
    fn take(&self, count_exhaustion: bool) -> Option<Pooled<T>> {
        let inner = self.inner();
        inner.get(count_exhaustion).map(|index| Pooled {
            inner: self.inner,
            obj: NonNull::from(&*inner.objects[index as usize]),
            index,
            _owns: PhantomData,
        })
    }

    /// Moves the calling core's cached objects to the global store, where
    /// every core can reach them; for a core that stops using the pool.
    pub fn flush_local(&self) {
        let inner = self.inner();
        if let Some(s) = core_slot::current()
            && inner.cache_size > 0
        {
            // SAFETY: `s` is this thread's slot; no reentrancy below.
            let cache = unsafe { inner.cache(s) };
            inner.flush(cache, cache.items.len());
        }
    }

    /// Pool name.
    pub fn name(&self) -> &str {
        &self.inner().name
    }

    /// Number of objects.
    pub fn capacity(&self) -> usize {
        self.inner().objects.len()
    }

    /// Per-core cache size (0: caching off).
    pub fn cache_size(&self) -> usize {
        self.inner().cache_size
    }

    /// Objects currently handed out.
    pub fn in_use(&self) -> u64 {
        self.inner().in_use()
    }

    /// A snapshot of the counters; consistent per counter, not across them.
    pub fn stats(&self) -> PoolStats {
        let inner = self.inner();
        let mut per_core = Vec::new();
        for (slot, c) in inner.counters.iter().enumerate() {
            let s = c.snapshot();
            if s.gets != 0 || s.puts != 0 || s.exhausted != 0 {
                per_core.push(CoreStats {
                    slot: (slot < MAX_SLOTS).then_some(slot as u32),
                    ..s
                });
            }
        }
        let in_use = inner.in_use();
        PoolStats {
            name: inner.name.clone(),
            capacity: inner.objects.len() as u64,
            cache_size: inner.cache_size as u64,
            in_use,
            available: (inner.objects.len() as u64).saturating_sub(in_use),
            per_core,
        }
    }
}

impl<T> Drop for ObjectPool<T> {
    fn drop(&mut self) {
        // SAFETY: still valid; see `inner()`.
        let inner = unsafe { self.inner.as_ref() };
        let outstanding = inner.in_use();
        if outstanding == 0 {
            // No handle exists (every get has a matching, finished put), and
            // no get can start: we own the pool. Free it.
            // SAFETY: `inner` came from `Box::leak`; nothing else refers to it.
            drop(unsafe { Box::from_raw(self.inner.as_ptr()) });
        } else {
            // Handles still point into the pool: keep it alive forever
            // rather than free memory they will touch. Count and report.
            LEAKED_POOLS.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                pool = %inner.name,
                outstanding,
                "object pool dropped with objects outstanding; leaking it"
            );
            debug_assert!(
                outstanding == 0,
                "pool {} dropped with {outstanding} objects outstanding",
                inner.name
            );
        }
    }
}

/// An object taken from an [`ObjectPool`]; returns to the pool on drop, to
/// the cache of the core that drops it.
pub struct Pooled<T> {
    inner: NonNull<Inner<T>>,
    obj: NonNull<UnsafeCell<T>>,
    index: u32,
    _owns: PhantomData<T>,
}

// SAFETY: the handle is the only path to its object; moving it moves the
// object's ownership, which `T: Send` allows. The pool itself is Sync.
unsafe impl<T: Send> Send for Pooled<T> {}
// SAFETY: `&Pooled<T>` only gives `&T`.
unsafe impl<T: Send + Sync> Sync for Pooled<T> {}

impl<T> Pooled<T> {
    /// The object's index in its pool (stable for the pool's lifetime).
    pub fn index(&self) -> u32 {
        self.index
    }

    #[inline]
    fn inner(&self) -> &Inner<T> {
        // SAFETY: a pool with handles outstanding is never freed.
        unsafe { self.inner.as_ref() }
    }
}

impl<T> Deref for Pooled<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this handle holds `index`, so no one else reaches the
        // object, and the pool (hence `obj`) outlives every handle.
        unsafe { &*self.obj.as_ref().get() }
    }
}

impl<T> DerefMut for Pooled<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` makes the borrow unique.
        unsafe { &mut *self.obj.as_ref().get() }
    }
}

impl<T> Drop for Pooled<T> {
    #[inline]
    fn drop(&mut self) {
        self.inner().put(self.index);
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Pooled<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pooled")
            .field("index", &self.index)
            .field("object", &**self)
            .finish()
    }
}

#[cfg(test)]
mod tests;
