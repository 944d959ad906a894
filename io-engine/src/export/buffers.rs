//! A connection's IO buffers, taken as its requests need them: the DMA
//! memory behind them is mapped a 2 MiB chunk at a time when the buffers
//! already mapped are all out, up to a bound, so a connection that moves
//! little data (an idle queue, an admin queue) holds little memory, and one
//! that moves a lot holds at most the bound.
//!
//! Thread: the connection's reactor (`!Send`: a `RefCell`).

use std::cell::RefCell;

use crate::pool::{BufPool, BufPoolError, IoBuf, PoolConfig};

/// Buffers per connection for IOs up to [`SMALL_BUF`] (larger IOs get one
/// of their own), in chunks of [`CHUNK_BUFS`]: one 2 MiB DMA region each.
const SMALL_BUFS: usize = 32;
const SMALL_BUF: usize = 128 << 10;
const CHUNK_BUFS: usize = 16;

/// Large buffers a connection may hold at once (each up to 32 MiB).
const MAX_LARGE_BUFS: usize = 8;

/// A connection's buffers: chunks of small ones for the common IO sizes,
/// and, for larger IOs, one-buffer pools by power-of-two size; each made
/// when first needed and reused; all freed with the connection.
pub(in crate::export) struct Buffers {
    small: RefCell<Vec<BufPool>>,
    large: RefCell<Vec<BufPool>>,
}

impl Buffers {
    /// No buffer yet: the first request maps the first chunk.
    pub(in crate::export) fn new() -> Buffers {
        Buffers {
            small: RefCell::new(Vec::new()),
            large: RefCell::new(Vec::new()),
        }
    }

    /// A buffer of at least `len` bytes; `Ok(None)` while the connection
    /// holds all it may of them (one comes back when a request ends or its
    /// reply is sent: the request waits); an error when no memory could be
    /// mapped for one and none is out to come back (the request fails).
    pub(in crate::export) fn take(&self, len: usize) -> Result<Option<IoBuf>, BufPoolError> {
        if len <= SMALL_BUF {
            let mut small = self.small.borrow_mut();
            if let Some(b) = small.iter().find_map(BufPool::get) {
                return Ok(Some(b));
            }
            if small.len() * CHUNK_BUFS >= SMALL_BUFS {
                return Ok(None);
            }
            let config = PoolConfig::new("conn", CHUNK_BUFS, 1).cache_size(0);
            return match BufPool::new(config, SMALL_BUF) {
                Ok(pool) => {
                    let b = pool.get();
                    small.push(pool);
                    Ok(b)
                }
                // Buffers out come back: wait for one.
                Err(_) if !small.is_empty() => Ok(None),
                Err(e) => Err(e),
            };
        }
        let size = len.next_power_of_two();
        let mut large = self.large.borrow_mut();
        if let Some(b) = large
            .iter()
            .filter(|p| p.buf_size() == size)
            .find_map(|p| p.get())
        {
            return Ok(Some(b));
        }
        if large.len() >= MAX_LARGE_BUFS {
            return Ok(None);
        }
        match BufPool::new(PoolConfig::new("conn-large", 1, 1).cache_size(0), size) {
            Ok(pool) => {
                let b = pool.get();
                large.push(pool);
                Ok(b)
            }
            Err(_) if !large.is_empty() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Bytes of DMA memory mapped for the buffers now.
    #[cfg(test)]
    pub(in crate::export) fn mapped(&self) -> usize {
        let sum =
            |pools: &[BufPool], n: usize| -> usize { pools.iter().map(|p| p.buf_size() * n).sum() };
        sum(&self.small.borrow(), CHUNK_BUFS) + sum(&self.large.borrow(), 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_mapped_as_buffers_are_needed_up_to_the_bound() {
        let b = Buffers::new();
        assert_eq!(b.mapped(), 0, "nothing until a request needs it");
        let take = |len| b.take(len).unwrap();
        let mut held: Vec<IoBuf> = (0..CHUNK_BUFS).map(|_| take(4096).unwrap()).collect();
        assert_eq!(b.mapped(), CHUNK_BUFS * SMALL_BUF, "one chunk");
        held.extend((CHUNK_BUFS..SMALL_BUFS).map(|_| take(SMALL_BUF).unwrap()));
        assert_eq!(b.mapped(), SMALL_BUFS * SMALL_BUF);
        assert!(take(512).is_none(), "all out: wait for one");
        held.pop();
        assert!(take(512).is_some(), "one came back");
        assert_eq!(b.mapped(), SMALL_BUFS * SMALL_BUF, "no more chunks");
        // A larger IO gets a buffer of its own.
        assert!(take(SMALL_BUF + 1).is_some());
        assert_eq!(b.mapped(), SMALL_BUFS * SMALL_BUF + 2 * SMALL_BUF);
    }
}
