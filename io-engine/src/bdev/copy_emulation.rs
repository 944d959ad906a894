//! Copy emulated by the bdev layer: a device without a native copy gets
//! one made of reads and writes. [`CopyEmulation`] sits between the
//! channel and the device's own [`DeviceChannel`]: other IOs pass through;
//! a copy takes an IO buffer from the channel's own small pool, then, in
//! chunks of at most a buffer, reads the source into it and writes it to
//! the destination, one chunk after the other, with the copy's own IO
//! object (its parameters kept in a [`CopyProgress`] meanwhile). It
//! completes once, as a copy of its full length, with the first error if
//! any: the channel counts it as one copy (stats, latency), never as the
//! reads and writes it was made of, and it holds one IO object, as a
//! native copy does. Copies that find every buffer out wait, in order,
//! for one to come back.
//!
//! Thread: the reactor of the channel it belongs to. Its reads and writes
//! are submitted from the channel's poll, never from a completion
//! handler, and complete by the device's poll like any IO.

use std::collections::VecDeque;

use super::copy_progress::CopyProgress;
use super::device_channel::DeviceChannel;
use super::io::{BdevIo, IoType};
use crate::pool::{BufPool, BufPoolError, IoBuf, PoolConfig};

/// Bytes an emulated copy moves per read and write (rounded down to the
/// block size, at least a block).
const CHUNK: u64 = 128 << 10;

/// Buffers per channel: emulated copies running at once.
const BUFFERS: usize = 4;

/// A device channel with copy emulated on top of the device's reads and
/// writes.
pub(super) struct CopyEmulation {
    dev: Box<dyn DeviceChannel>,
    bufs: BufPool,
    /// Bytes per read and write: the buffers' size.
    chunk: u64,
    /// Copies waiting for a buffer, in arrival order.
    waiting: VecDeque<BdevIo>,
    /// The device's completions; keeps its capacity.
    scratch: Vec<BdevIo>,
}

impl CopyEmulation {
    /// Whether a device that serves these operations needs copy emulated:
    /// it has no copy of its own, and reads and writes.
    pub(super) fn wanted(supported: &[bool; IoType::COUNT]) -> bool {
        !supported[IoType::Copy.index()]
            && supported[IoType::Read.index()]
            && supported[IoType::Write.index()]
    }

    /// Emulates copy over `dev`, a device of `block_size` bytes blocks;
    /// hands `dev` back if the buffers cannot be had.
    pub(super) fn new(
        dev: Box<dyn DeviceChannel>,
        block_size: u32,
    ) -> Result<CopyEmulation, (Box<dyn DeviceChannel>, BufPoolError)> {
        let bs = block_size as u64;
        let chunk = (CHUNK / bs).max(1) * bs;
        let bufs = match BufPool::new(
            PoolConfig::new("bdev_copy", BUFFERS, 1).cache_size(0),
            chunk as usize,
        ) {
            Ok(b) => b,
            Err(e) => return Err((dev, e)),
        };
        Ok(CopyEmulation {
            dev,
            bufs,
            chunk,
            waiting: VecDeque::new(),
            scratch: Vec::with_capacity(64),
        })
    }

    /// Starts copy `io` with `buf`: the read of its first chunk.
    fn begin(&mut self, mut io: BdevIo, buf: IoBuf) {
        let p = CopyProgress {
            src: io.src,
            dst: io.offset,
            len: io.len,
            done: 0,
        };
        io.slot.buf = Some(buf);
        self.read_next(io, p);
    }

    /// Submits the read of the chunk after `p.done`.
    fn read_next(&mut self, mut io: BdevIo, p: CopyProgress) {
        let s = &mut *io.slot;
        s.copy = Some(p);
        s.op = IoType::Read;
        s.offset = p.src + p.done;
        s.len = (p.len - p.done).min(self.chunk);
        s.src = 0;
        self.dev.submit(io);
    }

    /// Takes a copy's read or write that finished to the next step;
    /// returns the copy when it is over (done, or failed).
    fn advance(&mut self, mut io: BdevIo) -> Option<BdevIo> {
        let Some(mut p) = io.slot.copy.take() else {
            return Some(io);
        };
        let s = &mut *io.slot;
        if s.status.is_ok() {
            match s.op {
                IoType::Read => {
                    if std::mem::take(&mut s.zeroes)
                        && let Some(b) = s.buf.as_mut()
                    {
                        // A device that stores nothing read zeroes.
                        b.as_mut_slice()[..s.len as usize].fill(0);
                    }
                    s.copy = Some(p);
                    s.op = IoType::Write;
                    s.offset = p.dst + p.done;
                    self.dev.submit(io);
                    return None;
                }
                _ => {
                    p.done += s.len;
                    if p.done < p.len {
                        self.read_next(io, p);
                        return None;
                    }
                }
            }
        }
        // Over: the IO is the copy again, its buffer back in the pool.
        s.op = IoType::Copy;
        s.offset = p.dst;
        s.len = p.len;
        s.src = p.src;
        s.zeroes = false;
        s.buf = None;
        Some(io)
    }
}

impl DeviceChannel for CopyEmulation {
    #[inline]
    fn submit(&mut self, io: BdevIo) {
        if io.op() != IoType::Copy {
            return self.dev.submit(io);
        }
        match self.waiting.is_empty().then(|| self.bufs.get()).flatten() {
            Some(buf) => self.begin(io, buf),
            None => self.waiting.push_back(io),
        }
    }

    fn poll(&mut self, done: &mut Vec<BdevIo>) -> usize {
        let before = done.len();
        let mut scratch = std::mem::take(&mut self.scratch);
        self.dev.poll(&mut scratch);
        for io in scratch.drain(..) {
            if io.slot.copy.is_none() {
                done.push(io);
            } else if let Some(copy) = self.advance(io) {
                done.push(copy);
            }
        }
        self.scratch = scratch;
        while !self.waiting.is_empty()
            && let Some(buf) = self.bufs.pool().retry_get()
        {
            let io = self.waiting.pop_front().expect("checked above");
            self.begin(io, buf);
        }
        done.len() - before
    }

    fn wakes_reactor(&self) -> bool {
        self.dev.wakes_reactor()
    }
}
