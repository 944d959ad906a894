//! A connection's IO buffers.
//!
//! Thread: the connection's reactor (`!Send`: a `RefCell`).

use std::cell::RefCell;

use crate::pool::{BufPool, BufPoolError, IoBuf, PoolConfig};

/// Buffers per connection for IOs up to [`SMALL_BUF`]; larger IOs get one
/// of their own.
const SMALL_BUFS: usize = 32;
const SMALL_BUF: usize = 128 << 10;

/// Large buffers a connection may hold at once (each up to 32 MiB).
const MAX_LARGE_BUFS: usize = 8;

/// A connection's buffers: a pool of small ones for the common IO sizes,
/// and, for larger IOs, one-buffer pools by power-of-two size, made when
/// first needed and reused; all freed with the connection.
pub(in crate::export) struct Buffers {
    small: BufPool,
    large: RefCell<Vec<BufPool>>,
}

impl Buffers {
    pub(in crate::export) fn new() -> Result<Buffers, BufPoolError> {
        Ok(Buffers {
            small: BufPool::new(
                PoolConfig::new("conn", SMALL_BUFS, 1).cache_size(0),
                SMALL_BUF,
            )?,
            large: RefCell::new(Vec::new()),
        })
    }

    pub(in crate::export) fn take(&self, len: usize) -> Option<IoBuf> {
        if len <= SMALL_BUF {
            return self.small.get();
        }
        let size = len.next_power_of_two();
        let mut large = self.large.borrow_mut();
        if let Some(b) = large
            .iter()
            .filter(|p| p.buf_size() == size)
            .find_map(|p| p.get())
        {
            return Some(b);
        }
        if large.len() >= MAX_LARGE_BUFS {
            return None; // wait for one to come back
        }
        let pool = BufPool::new(PoolConfig::new("conn-large", 1, 1).cache_size(0), size).ok()?;
        let b = pool.get();
        large.push(pool);
        b
    }
}
