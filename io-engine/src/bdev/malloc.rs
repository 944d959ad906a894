//! The malloc device: RAM-backed, in DMA memory (2 MiB hugepages when the host
//! has them reserved, normal pages otherwise). Its data moves through the
//! accel framework: reads and writes are accel copies, write_zeroes and
//! unmap accel fills, so an offload engine (I/OAT) moves malloc data with no
//! change here. Flush has nothing to do.
//!
//! A device larger than the CPU's last-level cache places its writes in
//! memory ([`Placement::Memory`]): a random block of it is rarely cached,
//! and streamed stores neither read its lines first nor evict the core's
//! working set. Measured on Zen 5 (32 MiB L3; bdev-perf, 4 KiB, one
//! core, docs/performance.md): random writes 1 GiB 4.4 to 10.6 M IOPS, 64
//! MiB 5.2 to 11.6 M; random read/write 1 GiB 4.8 to 5.9 M, 64 MiB 5.3 to
//! 6.5 M; but a device the cache holds (8 MiB) lost random read/write (8.9
//! to 6.6 M, its reads then miss), so a smaller device keeps its writes in
//! the cache.
//!
//! Thread: the device (its memory) is shared by every core; each channel
//! lives on one reactor and uses that reactor's accel channel. Submission
//! only queues an IO; the channel's poll hands every queued IO to accel as
//! one batch, reaps the channel's accel queue, and completes what
//! finished, on that same core.

use std::sync::Arc;
use std::time::Instant;

use super::device::Bdev;
use super::device_channel::DeviceChannel;
use super::identity::Identity;
use super::io::{BdevIo, IoError, IoType};
use super::uri::BdevSpec;
use crate::accel::{
    Accel, AccelError, Batch, OFFLOAD_DRAIN_TIMEOUT, Placement, Queue, Reaped, Status,
};
use crate::env::cache;
use crate::env::dma::{DmaError, DmaRegion, check_memory};

/// A malloc device.
pub struct Malloc {
    id: Identity,
    mem: Arc<DmaRegion>,
    accel: Arc<Accel>,
    /// Where writes and zeroing land (see the module doc).
    placement: Placement,
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
            placement: write_placement(len, cache::last_level_bytes()),
        })
    }
}

/// Where a device of `len` bytes places its writes, given a last-level
/// cache of `llc` bytes.
fn write_placement(len: usize, llc: usize) -> Placement {
    if len > llc {
        Placement::Memory
    } else {
        Placement::Cache
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
        Box::new(MallocChannel {
            q: self.accel.channel().queue(),
            ios: Vec::with_capacity(PREALLOC),
            pending: Vec::with_capacity(PREALLOC),
            spare: Vec::with_capacity(PREALLOC),
            free: Vec::with_capacity(PREALLOC),
            reaped: Vec::with_capacity(PREALLOC),
            placement: self.placement,
            mem: self.mem.clone(),
        })
    }
}

/// IOs a channel's lists hold without growing: the steady state of a busy
/// channel allocates nothing, even when a slow round lets many IOs gather
/// (tests/no_alloc.rs).
const PREALLOC: usize = 1024;

/// A malloc channel. Its fields drop in order: the queue (whose engines
/// are done with every task by then, see `Drop`), then the IOs whose
/// buffers the tasks named, and the device memory last.
struct MallocChannel {
    /// This channel's completion queue on the core's accel channel.
    q: Queue,
    /// Every IO the channel holds, by slot, from submission to
    /// completion; an IO's slot is its accel task's tag, so a reaped
    /// record leads straight to its IO.
    ios: Vec<Option<BdevIo>>,
    /// Slots of IOs submitted and not yet handed to accel, in order.
    pending: Vec<u32>,
    /// `pending`'s other buffer, swapped in while a poll hands IOs over.
    spare: Vec<u32>,
    free: Vec<u32>,
    reaped: Vec<Reaped>,
    placement: Placement,
    mem: Arc<DmaRegion>,
}

/// Adds an IO's data movement to `batch`, under `tag`. The bdev channel
/// validated the range: offset + len <= device size <= region length (and
/// src + len for a copy, whose two ranges do not overlap), and data IOs
/// carry a buffer of at least len bytes. A copy moves device memory to
/// device memory: the copies of one command's ranges go out in the same
/// batch as everything else queued (one doorbell for I/OAT).
#[inline]
fn add(
    batch: &mut Batch<'_>,
    mem: &DmaRegion,
    placement: Placement,
    io: &mut BdevIo,
    tag: u64,
) -> Result<(), AccelError> {
    let (offset, len) = (io.offset() as usize, io.len() as usize);
    // SAFETY: offset + len is inside the mapping (validated above).
    let dev = unsafe { mem.as_ptr().add(offset) };
    // SAFETY: for each submission below, the device range is inside its
    // live mapping, which the channel keeps alive (`mem`) past the IO;
    // the IO buffer is owned by the IO, which the channel holds in `ios`
    // until its task's record is reaped, and a channel dropped before that
    // waits until accel reports every task of its queue, or leaks the IOs
    // and the mapping if that does not happen by the drain's deadline
    // (`Drop for MallocChannel`). They are distinct (a buffer is not
    // device memory). A copy's source is inside the mapping too and does
    // not overlap its destination (validated). Not covered: IOs from
    // different cores to the same blocks may run at once, and engines
    // access device memory with plain (non-atomic) loads and stores, which
    // is a data race in Rust's memory model, not only a race on content.
    // It is tolerated because no reference to device memory is ever made
    // (engines get raw pointers), so no compiler assumption rests on those
    // bytes, and a block device promises nothing for overlapping IOs in
    // flight.
    unsafe {
        match io.op() {
            IoType::Read => {
                let buf = io.buf_mut().expect("validated: read has a buffer");
                batch.copy(buf.as_ptr(), dev, len, tag)
            }
            IoType::Write => {
                let buf = io.buf().expect("validated: write has a buffer");
                batch.copy_placed(dev, buf.as_ptr(), len, placement, tag)
            }
            IoType::WriteZeroes | IoType::Unmap => batch.fill_placed(dev, 0, len, placement, tag),
            IoType::Copy => {
                let src = mem.as_ptr().add(io.src() as usize);
                batch.copy_placed(dev, src, len, placement, tag)
            }
            IoType::Flush => unreachable!("flush is completed without accel"),
        }
    }
}

impl DeviceChannel for MallocChannel {
    #[inline]
    fn submit(&mut self, io: BdevIo) {
        let slot = match self.free.pop() {
            Some(s) => {
                self.ios[s as usize] = Some(io);
                s
            }
            None => {
                self.ios.push(Some(io));
                (self.ios.len() - 1) as u32
            }
        };
        self.pending.push(slot);
    }

    /// Hands every queued IO to accel in one batch, reaps this channel's
    /// accel queue, and reports the IOs whose data has moved.
    #[inline]
    fn poll(&mut self, done: &mut Vec<BdevIo>) -> usize {
        let before = done.len();
        if !self.pending.is_empty() {
            let mut batch = self.q.batch();
            let mut pending = std::mem::replace(&mut self.pending, std::mem::take(&mut self.spare));
            for &slot in &pending {
                let entry = &mut self.ios[slot as usize];
                let io = entry.as_mut().expect("a pending slot holds its IO");
                if io.op() == IoType::Flush {
                    let mut io = entry.take().expect("checked");
                    self.free.push(slot);
                    io.set_status(Ok(()));
                    done.push(io);
                    continue;
                }
                match add(&mut batch, &self.mem, self.placement, io, slot as u64) {
                    Ok(()) => {}
                    // No task or batch room left: the rest waits for the
                    // next poll, after completions free tasks.
                    Err(AccelError::NoTask { .. }) | Err(AccelError::BatchFull { .. }) => {
                        self.pending.push(slot)
                    }
                    Err(e) => {
                        tracing::error!("malloc: accel refused an IO: {e}");
                        let mut io = entry.take().expect("checked");
                        self.free.push(slot);
                        io.set_status(Err(IoError::Device(libc::EIO)));
                        done.push(io);
                    }
                }
            }
            pending.clear();
            self.spare = pending;
            batch.submit();
        }
        self.q.reap(&mut self.reaped);
        for &(tag, c) in &self.reaped {
            let entry = &mut self.ios[tag as usize];
            let Some(io) = entry.as_mut() else {
                continue;
            };
            io.set_status(match c.status {
                Status::Success => Ok(()),
                other => {
                    tracing::warn!("malloc: accel task ended {}", other.name());
                    Err(IoError::Device(libc::EIO))
                }
            });
            done.reserve(1);
            // SAFETY: `entry` holds an IO (checked above); its bits are
            // copied once into `done`'s reserved room, which `set_len`
            // then owns, and `entry` is overwritten with `None` without
            // dropping the moved IO. A plain `take` + `push` went through a
            // stack temporary whose reload missed store forwarding (an 8-byte
            // offset against the 16-byte stores), about 4 ns per IO.
            unsafe {
                let len = done.len();
                std::ptr::copy_nonoverlapping(io as *const BdevIo, done.as_mut_ptr().add(len), 1);
                std::ptr::write(entry, None);
                done.set_len(len + 1);
            }
            self.free.push(tag as u32);
        }
        self.reaped.clear();
        done.len() - before
    }
}

impl Drop for MallocChannel {
    /// Waits (up to [`OFFLOAD_DRAIN_TIMEOUT`]) until accel holds none of this
    /// channel's IOs, so that their buffers and the device memory outlive
    /// every engine access. What an engine still holds past the deadline
    /// it may still write: the IOs (their IO objects and buffers) and the
    /// device memory are then leaked, never returned to their pools nor
    /// freed.
    fn drop(&mut self) {
        let left = self.q.drain(Instant::now() + OFFLOAD_DRAIN_TIMEOUT);
        if left == 0 {
            return;
        }
        let ios = std::mem::take(&mut self.ios);
        let bytes: u64 = ios.iter().flatten().map(|io| io.len()).sum();
        tracing::error!(
            "malloc: channel dropped while accel still holds {left} of its tasks after \
             {OFFLOAD_DRAIN_TIMEOUT:?}; leaking its {} IOs ({bytes} bytes of buffers) and the \
             device's {} bytes of memory, which the engine may still write",
            ios.iter().flatten().count(),
            self.mem.len()
        );
        std::mem::forget(ios);
        std::mem::forget(self.mem.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_larger_than_the_cache_write_to_memory() {
        let llc = 32 << 20;
        assert_eq!(write_placement(8 << 20, llc), Placement::Cache);
        assert_eq!(write_placement(llc, llc), Placement::Cache);
        assert_eq!(write_placement(llc + 4096, llc), Placement::Memory);
        assert_eq!(write_placement(1 << 30, llc), Placement::Memory);
    }
}
