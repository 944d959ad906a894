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
mod config;
mod error;
mod inner;
mod object_pool;
mod pooled;
mod stats;

#[cfg(test)]
mod tests;

pub use buf::{BufPool, BufPoolError, DmaChunk, IoBuf};
pub use config::{DEFAULT_CACHE_SIZE, PoolConfig};
pub use error::PoolError;
pub use object_pool::{ObjectPool, leaked_pools};
pub use pooled::Pooled;
pub use stats::{CoreStats, PoolStats};
