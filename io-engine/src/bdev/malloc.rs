//! The malloc device: RAM-backed, in DMA memory (2 MiB hugepages when the host
//! has them reserved, normal pages otherwise). Its data moves through the
//! accel framework: reads and writes are accel copies, write_zeroes and
//! unmap accel fills, so an offload engine (I/OAT) moves malloc data with no
//! change here. Flush has nothing to do.
//!
//! Thread: the device (its memory) is shared by every core; each channel
//! lives on one reactor and uses that reactor's accel channel. Submission
//! only queues an IO; the channel's poll hands every queued IO to accel as
//! one batch, polls accel, and completes what finished, on that same core.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use super::io::{BdevIo, IoError, IoType};
use super::uri::BdevSpec;
use super::{Bdev, DeviceChannel, Identity};
use crate::accel::{Accel, AccelChannel, AccelError, Completion, Done, Status};
use crate::env::dma::{DmaError, DmaRegion, check_memory};

/// A malloc device.
pub struct Malloc {
    id: Identity,
    mem: Arc<DmaRegion>,
    accel: Arc<Accel>,
}

impl Malloc {
    /// Allocates the device's memory (zeroed), after checking that it can
    /// be had: a request for more memory than there is gets an error, not
    /// the process OOM-killed.
    pub fn new(spec: BdevSpec, accel: Arc<Accel>) -> Result<Self, DmaError> {
        let len = usize::try_from(spec.size_bytes())
            .map_err(|_| DmaError::TooLarge { len: usize::MAX })?;
        check_memory(len)?;
        let mem = Arc::new(DmaRegion::alloc(len)?);
        Ok(Malloc {
            id: Identity::new(spec),
            mem,
            accel,
        })
    }
}

impl Bdev for Malloc {
    fn identity(&self) -> &Identity {
        &self.id
    }
    fn product(&self) -> &'static str {
        "malloc"
    }
    fn supports(&self, _op: IoType) -> bool {
        true
    }
    fn stores_data(&self) -> bool {
        true
    }
    fn create_channel(&self) -> Box<dyn DeviceChannel> {
        let finished = Rc::new(Finished {
            list: RefCell::new(Vec::with_capacity(PREALLOC)),
        });
        Box::new(MallocChannel {
            mem: self.mem.clone(),
            accel: self.accel.channel(),
            done: finished.clone(),
            finished,
            pending: Vec::with_capacity(PREALLOC),
            spare: Vec::with_capacity(PREALLOC),
            in_accel: Vec::with_capacity(PREALLOC),
            free_tags: Vec::with_capacity(PREALLOC),
        })
    }
}

/// IOs a channel's lists hold without growing: the steady state of a busy
/// channel allocates nothing, even when a slow round lets many IOs gather
/// (tests/no_alloc.rs).
const PREALLOC: usize = 1024;

/// Collects accel completions for the channel's next poll.
struct Finished {
    list: RefCell<Vec<(u64, Completion)>>,
}

impl Done for Finished {
    fn done(&self, tag: u64, c: Completion) {
        self.list.borrow_mut().push((tag, c));
    }
}

struct MallocChannel {
    mem: Arc<DmaRegion>,
    accel: Rc<AccelChannel>,
    finished: Rc<Finished>,
    done: Rc<dyn Done>,
    /// IOs submitted, not yet handed to accel.
    pending: Vec<BdevIo>,
    /// `pending`'s other buffer, swapped in while a poll hands IOs over.
    spare: Vec<BdevIo>,
    /// IOs in accel, by tag.
    in_accel: Vec<Option<BdevIo>>,
    free_tags: Vec<u64>,
}

impl MallocChannel {
    /// Adds an IO's data movement to `batch`, under `tag`. The bdev channel
    /// validated the range: offset + len <= device size <= region length,
    /// and data IOs carry a buffer of at least len bytes.
    #[inline]
    fn add(
        &self,
        batch: &mut crate::accel::Batch<'_>,
        io: &mut BdevIo,
        tag: u64,
    ) -> Result<(), AccelError> {
        let (offset, len) = (io.offset() as usize, io.len() as usize);
        // SAFETY: offset + len is inside the mapping (validated above).
        let dev = unsafe { self.mem.as_ptr().add(offset) };
        // SAFETY: for each submission below, the device range is inside its
        // live mapping, which the channel keeps alive (`mem`) past the IO;
        // the IO buffer is owned by the IO, which the channel holds in
        // `in_accel` until accel reports the task done. They are distinct
        // (a buffer is not device memory). Concurrent IOs to the same
        // blocks race on content only, as on any block device.
        unsafe {
            match io.op() {
                IoType::Read => {
                    let buf = io.buf_mut().expect("validated: read has a buffer");
                    batch.copy(buf.as_ptr(), dev, len, tag, &self.done)
                }
                IoType::Write => {
                    let buf = io.buf().expect("validated: write has a buffer");
                    batch.copy(dev, buf.as_ptr(), len, tag, &self.done)
                }
                IoType::WriteZeroes | IoType::Unmap => batch.fill(dev, 0, len, tag, &self.done),
                IoType::Flush => unreachable!("flush is completed without accel"),
            }
        }
    }

    fn park(&mut self, io: BdevIo) -> u64 {
        match self.free_tags.pop() {
            Some(t) => {
                self.in_accel[t as usize] = Some(io);
                t
            }
            None => {
                self.in_accel.push(Some(io));
                (self.in_accel.len() - 1) as u64
            }
        }
    }
}

impl DeviceChannel for MallocChannel {
    #[inline]
    fn submit(&mut self, io: BdevIo) {
        self.pending.push(io);
    }

    /// Hands every queued IO to accel in one batch, polls accel, and
    /// reports the IOs whose data has moved.
    #[inline]
    fn poll(&mut self, done: &mut Vec<BdevIo>) -> usize {
        let before = done.len();
        if !self.pending.is_empty() {
            let accel = self.accel.clone();
            let mut batch = accel.batch();
            let mut pending = std::mem::replace(&mut self.pending, std::mem::take(&mut self.spare));
            for mut io in pending.drain(..) {
                if io.op() == IoType::Flush {
                    io.set_status(Ok(()));
                    done.push(io);
                    continue;
                }
                let tag = match self.free_tags.last() {
                    Some(&t) => t,
                    None => self.in_accel.len() as u64,
                };
                match self.add(&mut batch, &mut io, tag) {
                    Ok(()) => {
                        let t = self.park(io);
                        debug_assert_eq!(t, tag);
                    }
                    // No task or batch room left: the rest waits for the
                    // next poll, after completions free tasks.
                    Err(AccelError::NoTask { .. }) | Err(AccelError::BatchFull { .. }) => {
                        self.pending.push(io)
                    }
                    Err(e) => {
                        tracing::error!("malloc: accel refused an IO: {e}");
                        io.set_status(Err(IoError::Device(libc::EIO)));
                        done.push(io);
                    }
                }
            }
            self.spare = pending;
            batch.submit();
        }
        self.accel.poll();
        for (tag, c) in self.finished.list.borrow_mut().drain(..) {
            let Some(mut io) = self.in_accel[tag as usize].take() else {
                continue;
            };
            self.free_tags.push(tag);
            io.set_status(match c.status {
                Status::Success => Ok(()),
                other => {
                    tracing::warn!("malloc: accel task ended {}", other.name());
                    Err(IoError::Device(libc::EIO))
                }
            });
            done.push(io);
        }
        done.len() - before
    }
}
