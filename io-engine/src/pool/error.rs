//! [`PoolError`]: why a pool could not be created.
//!
//! Thread: any.

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
