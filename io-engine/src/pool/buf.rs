//! IO buffers: fixed-size chunks of one DMA region, handed out by a pool.
//!
//! Thread: any; buffers move between threads with their owner. A buffer is
//! owned by one party at a time: the caller while it fills or reads it, the
//! device while an IO that carries it is in flight. That ownership is what
//! lets the owner view it as a slice: the device never writes a buffer it
//! does not hold.

use std::sync::Arc;

use super::config::PoolConfig;
use super::error::PoolError;
use super::object_pool::ObjectPool;
use super::pooled::Pooled;
use crate::env::dma::{DmaError, DmaRegion, DmaSlice, check_memory};

/// One buffer's place in its DMA region: a view of a [`DmaSlice`] for the
/// buffer's owner, who may borrow the bytes as slices (module doc). It is
/// `Send` and `Sync` as the slice is: a chunk is a unique range of its
/// region, and `&DmaChunk` gives only shared (read) access to the bytes.
pub struct DmaChunk(DmaSlice);

/// The slice's base, length and raw-pointer access; the chunk adds the
/// owner's slices below. (A chunk has no IOVA: an engine that hands it to
/// a device translates its address through its own mapper.)
impl std::ops::Deref for DmaChunk {
    type Target = DmaSlice;

    #[inline]
    fn deref(&self) -> &DmaSlice {
        &self.0
    }
}

impl DmaChunk {
    /// The bytes, for the owner.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the range is inside a live mapping, owned by this chunk; no
        // device writes it while the caller holds the chunk (module doc).
        unsafe { std::slice::from_raw_parts(self.0.as_ptr(), self.0.len()) }
    }

    /// The bytes, mutable, for the owner.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as for `as_slice`; `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_ptr(), self.0.len()) }
    }
}

impl std::fmt::Debug for DmaChunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaChunk")
            .field("addr", &self.as_ptr())
            .field("len", &self.len())
            .finish()
    }
}

/// An IO buffer: a pooled DMA chunk, returned to its pool on drop.
pub type IoBuf = Pooled<DmaChunk>;

/// Errors creating a buffer pool.
#[derive(Debug, thiserror::Error)]
pub enum BufPoolError {
    /// The DMA memory could not be had.
    #[error(transparent)]
    Dma(#[from] DmaError),
    /// The pool shape is wrong.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// Buffer size 0, or too large to lay out.
    #[error(
        "buffer pool {name}: buffer size {size} must be non-zero and fit the address space \
             when rounded up to {align}"
    )]
    BadSize {
        /// Pool name.
        name: String,
        /// Requested size.
        size: usize,
        /// Required alignment.
        align: usize,
    },
}

/// A pool of `count` buffers of `size` bytes carved from one DMA region.
pub struct BufPool {
    pool: ObjectPool<DmaChunk>,
    size: usize,
}

/// Buffers are aligned to this (a page: what DMA engines and O_DIRECT like).
pub const BUF_ALIGN: usize = 4096;

impl BufPool {
    /// Carves `config.capacity` buffers of `size` bytes from fresh DMA memory;
    /// each starts on a [`BUF_ALIGN`] boundary.
    pub fn new(config: PoolConfig, size: usize) -> Result<BufPool, BufPoolError> {
        let stride = size.checked_next_multiple_of(BUF_ALIGN).unwrap_or(0);
        let total = stride.checked_mul(config.capacity.max(1)).unwrap_or(0);
        if size == 0 || total == 0 {
            return Err(BufPoolError::BadSize {
                name: config.name,
                size,
                align: BUF_ALIGN,
            });
        }
        check_memory(total)?;
        let region = Arc::new(DmaRegion::alloc(total)?);
        let pool = ObjectPool::new(config, |i| {
            // `offset + size <= total <= region.len()`.
            let offset = i * stride;
            DmaChunk(DmaSlice::new(region.clone(), offset, size))
        })?;
        Ok(BufPool { pool, size })
    }

    /// Takes a buffer, or `None` when all are out.
    #[inline]
    pub fn get(&self) -> Option<IoBuf> {
        self.pool.get()
    }

    /// Size of each buffer.
    pub fn buf_size(&self) -> usize {
        self.size
    }

    /// The underlying object pool (for stats).
    pub fn pool(&self) -> &ObjectPool<DmaChunk> {
        &self.pool
    }
}

// Not under Miri: DMA regions come from mmap, which Miri cannot run.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_distinct_aligned_and_writable() {
        let p = BufPool::new(PoolConfig::new("bufs", 8, 1).cache_size(0), 8192).unwrap();
        let mut bufs: Vec<_> = (0..8).map(|_| p.get().unwrap()).collect();
        assert!(p.get().is_none());
        for (i, b) in bufs.iter_mut().enumerate() {
            assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0);
            b.as_mut_slice().fill(i as u8);
        }
        for (i, b) in bufs.iter().enumerate() {
            assert!(
                b.as_slice().iter().all(|&x| x == i as u8),
                "buffers overlap"
            );
        }
    }

    #[test]
    fn odd_sizes_are_aligned_and_zero_is_refused() {
        let p = BufPool::new(PoolConfig::new("b", 2, 1).cache_size(0), 1000).unwrap();
        let (a, b) = (p.get().unwrap(), p.get().unwrap());
        assert_eq!((a.len(), b.len()), (1000, 1000));
        assert_eq!(a.as_ptr() as usize % BUF_ALIGN, 0);
        assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0);
        assert!(matches!(
            BufPool::new(PoolConfig::new("b", 1, 1).cache_size(0), 0),
            Err(BufPoolError::BadSize { .. })
        ));
    }
}
