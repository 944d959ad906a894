//! [`UringChannel`]: a `uring` device's channel on one reactor. Reads,
//! writes (FUA as `RWF_DSYNC`), flushes (`fdatasync`), write zeroes
//! (`fallocate` ZERO_RANGE) and unmaps (`fallocate` PUNCH_HOLE) go
//! through the reactor's ring (reads and writes through its IOPOLL ring
//! with `iopoll=true`); copies through the blocking threads
//! (`copy_file_range`).
//!
//! Thread: the reactor that opened it.

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;

use io_uring::{opcode, squeue, types};
use rustix::fs::FallocateFlags;

use super::blocking::{self, Job, Results};
use super::error_log::ErrorLog;
use super::in_flight::InFlight;
use super::ring::{Completions, Ring};
use crate::bdev::device_channel::DeviceChannel;
use crate::bdev::io::{BdevIo, IoType};

/// Builds an entry for the backing: as a registered file on the interrupt
/// ring when it has a slot there, else by its fd (the opcodes take either,
/// through a trait the crate keeps sealed, hence a macro).
macro_rules! on_file {
    ($fixed:expr, $fd:expr, |$t:ident| $build:expr) => {
        match $fixed {
            Some($t) => $build,
            None => {
                let $t = $fd;
                $build
            }
        }
    };
}

/// A `uring` device's channel.
pub(super) struct UringChannel {
    ring: Rc<Ring>,
    id: u32,
    completions: Completions,
    /// The reactor's IOPOLL ring, for reads and writes (`iopoll=true`).
    polled: Option<(Rc<Ring>, u32, Completions)>,
    /// Scratch for the completions taken from the ring's list.
    scratch: Vec<(u32, i32)>,
    file: Arc<File>,
    fd: types::Fd,
    /// The backing's slot among the interrupt ring's registered files.
    fixed: Option<types::Fixed>,
    ios: InFlight,
    /// Slots whose entries did not fit the submission queue yet.
    backlog: VecDeque<u32>,
    /// Results of the blocking threads' jobs (copies).
    results: Arc<Results>,
    errors: ErrorLog,
}

impl UringChannel {
    /// The channel of device `name` on `file`, on the reactor's `ring`
    /// (and its IOPOLL ring `polled`, for `iopoll=true`).
    pub(super) fn new(
        ring: Rc<Ring>,
        polled: Option<Rc<Ring>>,
        file: &Arc<File>,
        name: &str,
    ) -> UringChannel {
        let (id, completions) = ring.attach();
        let polled = polled.map(|p| {
            let (id, done) = p.attach();
            (p, id, done)
        });
        let results = Results::new(ring.eventfd());
        let fixed = ring.register_file(file.as_raw_fd()).map(types::Fixed);
        UringChannel {
            fixed,
            id,
            completions,
            polled,
            scratch: Vec::with_capacity(256),
            fd: types::Fd(file.as_raw_fd()),
            file: file.clone(),
            ring,
            ios: InFlight::default(),
            backlog: VecDeque::new(),
            results,
            errors: ErrorLog::new(name),
        }
    }

    /// The ring for `op`: the polled one for reads and writes, if any.
    fn ring_for(&self, op: IoType) -> (&Rc<Ring>, u32) {
        match (&self.polled, op) {
            (Some((ring, id, _)), IoType::Read | IoType::Write) => (ring, *id),
            _ => (&self.ring, self.id),
        }
    }

    /// The ring entry of the IO in `slot`.
    fn entry(&self, slot: u32) -> Option<squeue::Entry> {
        let io = self.ios.get(slot)?;
        let (ring, _) = self.ring_for(io.op());
        let (offset, len) = (io.offset(), io.len());
        // The polled ring has no registered files: it takes the fd.
        let fixed = if std::ptr::eq(ring, &self.ring) {
            self.fixed
        } else {
            None
        };
        let fd = self.fd;
        Some(match io.op() {
            IoType::Read => {
                let buf = io.buf()?;
                let n = u32::try_from(len).ok()?;
                match ring.buffer_index(buf.as_ptr(), n as usize) {
                    Some(index) => on_file!(fixed, fd, |f| opcode::ReadFixed::new(
                        f,
                        buf.as_ptr(),
                        n,
                        index
                    )
                    .offset(offset)
                    .build()),
                    None => on_file!(fixed, fd, |f| opcode::Read::new(f, buf.as_ptr(), n)
                        .offset(offset)
                        .build()),
                }
            }
            IoType::Write => {
                let buf = io.buf()?;
                let n = u32::try_from(len).ok()?;
                let flags = if io.fua() { libc::RWF_DSYNC } else { 0 };
                match ring.buffer_index(buf.as_ptr(), n as usize) {
                    Some(index) => on_file!(fixed, fd, |f| opcode::WriteFixed::new(
                        f,
                        buf.as_ptr(),
                        n,
                        index
                    )
                    .offset(offset)
                    .rw_flags(flags)
                    .build()),
                    None => on_file!(fixed, fd, |f| opcode::Write::new(f, buf.as_ptr(), n)
                        .offset(offset)
                        .rw_flags(flags)
                        .build()),
                }
            }
            IoType::Flush => on_file!(fixed, fd, |f| opcode::Fsync::new(f)
                .flags(types::FsyncFlags::DATASYNC)
                .build()),
            IoType::WriteZeroes => on_file!(fixed, fd, |f| opcode::Fallocate::new(f, len)
                .offset(offset)
                .mode((FallocateFlags::ZERO_RANGE | FallocateFlags::KEEP_SIZE).bits() as i32)
                .build()),
            IoType::Unmap => on_file!(fixed, fd, |f| opcode::Fallocate::new(f, len)
                .offset(offset)
                .mode((FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE).bits() as i32)
                .build()),
            IoType::Copy => return None,
        })
    }

    /// Hands the IO in `slot` to the kernel; false if the ring is full.
    fn start(&mut self, slot: u32) -> bool {
        let Some(io) = self.ios.get(slot) else {
            return true;
        };
        if io.op() == IoType::Copy {
            let job = Job::Copy {
                src: io.src(),
                dst: io.offset(),
                len: io.len(),
            };
            if !blocking::submit(self.file.clone(), job, slot, self.results.clone()) {
                self.results.push(slot, -i64::from(libc::EIO));
            }
            return true;
        }
        let Some(entry) = self.entry(slot) else {
            // A read or write without its buffer, or longer than 4 GiB:
            // the bdev layer's checks make this unreachable.
            self.results.push(slot, -i64::from(libc::EINVAL));
            return true;
        };
        let op = self.ios.get(slot).map_or(IoType::Flush, |io| io.op());
        let (ring, id) = self.ring_for(op);
        // SAFETY: the entry names the IO's buffer (reads and writes), which
        // the IO owns; the IO stays in `ios` until its completion is
        // reaped, and a channel dropped before that leaks it (`Drop`), so
        // the buffer outlives the kernel's use of it. The fd stays open:
        // `file` is held as long as the channel, and the channel's drop
        // with IO in flight leaks nothing the kernel reads but buffers.
        unsafe { ring.push(entry, id, slot) }
    }

    fn finish(&mut self, slot: u32, res: i64, done: &mut Vec<BdevIo>) {
        self.ios.finish(slot, res, &mut self.errors, done);
    }
}

impl DeviceChannel for UringChannel {
    fn submit(&mut self, io: BdevIo) {
        let slot = self.ios.insert(io);
        if !self.backlog.is_empty() || !self.start(slot) {
            self.backlog.push_back(slot);
        }
    }

    fn poll(&mut self, done: &mut Vec<BdevIo>) -> usize {
        let before = done.len();
        while let Some(&slot) = self.backlog.front() {
            if !self.start(slot) {
                break;
            }
            self.backlog.pop_front();
        }
        let lists = [
            Some(self.completions.clone()),
            self.polled.as_ref().map(|(_, _, done)| done.clone()),
        ];
        for list in lists.into_iter().flatten() {
            std::mem::swap(&mut *list.borrow_mut(), &mut self.scratch);
            let mut scratch = std::mem::take(&mut self.scratch);
            for &(slot, res) in &scratch {
                self.finish(slot, i64::from(res), done);
            }
            scratch.clear();
            self.scratch = scratch;
        }
        while let Some((slot, res)) = self.results.pop() {
            self.finish(slot, res, done);
        }
        done.len() - before
    }

    fn wakes_reactor(&self) -> bool {
        // Polled IO signals nothing: the reactor must keep polling.
        self.polled.is_none() && self.ring.wakes_reactor()
    }
}

impl Drop for UringChannel {
    /// The bdev layer drops a channel once its IOs are done, or when a
    /// drain gave up on them: those the kernel still holds are leaked with
    /// their buffers, which it may still write.
    fn drop(&mut self) {
        self.ring.detach(self.id);
        if let Some(types::Fixed(slot)) = self.fixed {
            self.ring.unregister_file(slot);
        }
        if let Some((ring, id, _)) = &self.polled {
            ring.detach(*id);
        }
        let n = self.ios.leak();
        if n > 0 {
            tracing::error!(
                "uring: channel dropped with {n} IOs still in the kernel; leaking them and \
                 their buffers"
            );
        }
    }
}
