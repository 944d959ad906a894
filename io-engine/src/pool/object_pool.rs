//! [`ObjectPool`]: a fixed-capacity pool of objects with per-core caches,
//! and the count of pools leaked because objects were still out.
//!
//! Thread: any; see the module doc of `pool` for which cache a get or a put
//! uses.

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use super::config::PoolConfig;
use super::error::PoolError;
use super::inner::Inner;
use super::pooled::Pooled;
use super::stats::{CoreStats, PoolStats};
use crate::env::core_slot::{self, MAX_SLOTS};

/// Pools dropped while objects were still out. Each such pool is leaked (its
/// objects stay valid) and counted here; see [`ObjectPool`]'s `Drop`.
static LEAKED_POOLS: AtomicU64 = AtomicU64::new(0);

/// How many pools were dropped with objects outstanding, process-wide.
pub fn leaked_pools() -> u64 {
    LEAKED_POOLS.load(Ordering::Relaxed)
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
    pub fn new(config: PoolConfig, init: impl FnMut(usize) -> T) -> Result<Self, PoolError> {
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
        let inner = Box::new(Inner::new(name, capacity, cache_size, init));
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
        inner.get(count_exhaustion).map(|index| {
            let obj = NonNull::from(&*inner.objects[index as usize]);
            Pooled::new(self.inner, obj, index)
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
