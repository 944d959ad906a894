//! [`IoPoolConfig`]: the shape of the IO object pool every device shares.
//!
//! Thread: any; read once when the registry is built.

use crate::pool::DEFAULT_CACHE_SIZE;

/// Shape of the IO object pool shared by every device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoPoolConfig {
    /// IO objects in total (Mayastor: 65535).
    pub size: usize,
    /// Objects cached per core (Mayastor: 512); 0 disables the cache.
    pub cache: usize,
    /// Cores that will submit IO.
    pub cores: usize,
}

impl IoPoolConfig {
    /// Mayastor's sizes for `cores` cores.
    pub fn new(cores: usize) -> Self {
        IoPoolConfig {
            size: 65535,
            cache: DEFAULT_CACHE_SIZE,
            cores,
        }
    }
}
