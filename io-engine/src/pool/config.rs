//! [`PoolConfig`]: a pool's shape, fixed at creation, and the default
//! per-core cache size.
//!
//! Thread: any (plain data).

/// Default per-core cache size, as Mayastor sizes its IO object pool cache.
pub const DEFAULT_CACHE_SIZE: usize = 512;

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
