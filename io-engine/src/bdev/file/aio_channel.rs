//! [`AioChannel`]: an `aio` device's channel on one reactor, with its own
//! AIO context. Reads and writes (FUA as `RWF_DSYNC`) and flushes
//! (`IOCB_CMD_FDSYNC`) go through the context, submitted together once a
//! poll; write zeroes, unmaps (`fallocate`) and copies (`copy_file_range`),
//! which AIO cannot do, through the blocking threads.
//!
//! Thread: the reactor that opened it.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use rustix::fs::FallocateFlags;

use super::aio_context::{AioContext, CMD_FDSYNC, CMD_PREAD, CMD_PWRITE, IoEvent, Iocb};
use super::blocking::{self, Job, Results};
use super::error_log::ErrorLog;
use super::in_flight::InFlight;
use super::wake_fd::WakeFd;
use crate::bdev::device_channel::DeviceChannel;
use crate::bdev::io::{BdevIo, IoType};

/// IOs one context holds in flight; more wait in the channel.
const DEPTH: u32 = 512;

/// An `aio` device's channel.
pub(super) struct AioChannel {
    ctx: AioContext,
    file: Arc<File>,
    fd: u32,
    ios: InFlight,
    /// IOs to submit at the next poll, as iocbs.
    queued: Vec<Iocb>,
    /// IOs the context holds.
    in_kernel: usize,
    events: Vec<IoEvent>,
    results: Arc<Results>,
    errors: ErrorLog,
    /// Kept alive with the channel (the context signals it).
    wake: Option<WakeFd>,
}

impl AioChannel {
    /// The channel of device `name` on `file`, with an AIO context of its
    /// own.
    pub(super) fn new(file: &Arc<File>, name: &str) -> std::io::Result<AioChannel> {
        let wake = WakeFd::new();
        let eventfd = wake.as_ref().map(|w| w.fd().clone());
        Ok(AioChannel {
            ctx: AioContext::new(DEPTH, eventfd.clone())?,
            fd: file.as_raw_fd() as u32,
            file: file.clone(),
            ios: InFlight::default(),
            queued: Vec::with_capacity(DEPTH as usize),
            in_kernel: 0,
            events: Vec::with_capacity(64),
            results: Results::new(eventfd),
            errors: ErrorLog::new(name),
            wake,
        })
    }

    fn finish(&mut self, slot: u32, res: i64, done: &mut Vec<BdevIo>) {
        self.ios.finish(slot, res, &mut self.errors, done);
    }

    /// Submits queued iocbs while the context has room.
    fn submit_queued(&mut self, done: &mut Vec<BdevIo>) {
        let mut sent = 0;
        while sent < self.queued.len() && self.in_kernel < DEPTH as usize {
            let room = (DEPTH as usize - self.in_kernel).min(self.queued.len() - sent);
            let batch = self.queued.get(sent..sent + room).unwrap_or(&[]);
            // SAFETY: each iocb names the buffer of an IO held in `ios`
            // until its completion is reaped; the channel's drop destroys
            // the context first, which waits for every IO in it, before
            // the IOs and their buffers go.
            match unsafe { self.ctx.submit(batch) } {
                Ok(0) => break,
                Ok(n) => {
                    sent += n;
                    self.in_kernel += n;
                }
                Err(e) => {
                    // The first iocb was refused (EINVAL, EBADF...): fail it
                    // and go on with the rest.
                    let slot = batch.first().map_or(u32::MAX, |i| i.data as u32);
                    let errno = e.raw_os_error().unwrap_or(libc::EIO);
                    self.finish(slot, -i64::from(errno), done);
                    sent += 1;
                }
            }
        }
        self.queued.drain(..sent);
    }
}

impl DeviceChannel for AioChannel {
    fn submit(&mut self, io: BdevIo) {
        let (op, offset, len, src, fua) = (io.op(), io.offset(), io.len(), io.src(), io.fua());
        let buf = io.buf().map_or(0, |b| b.as_ptr() as u64);
        let slot = self.ios.insert(io);
        let job = match op {
            IoType::Read | IoType::Write | IoType::Flush => {
                let mut iocb = Iocb {
                    data: u64::from(slot),
                    fildes: self.fd,
                    ..Iocb::default()
                };
                match op {
                    IoType::Read | IoType::Write => {
                        iocb.opcode = if op == IoType::Read {
                            CMD_PREAD
                        } else {
                            CMD_PWRITE
                        };
                        iocb.buf = buf;
                        iocb.nbytes = len;
                        iocb.offset = offset as i64;
                        if fua {
                            iocb.rw_flags = libc::RWF_DSYNC;
                        }
                    }
                    _ => iocb.opcode = CMD_FDSYNC,
                }
                self.ctx.signal(&mut iocb);
                self.queued.push(iocb);
                return;
            }
            IoType::WriteZeroes => Job::Fallocate {
                mode: FallocateFlags::ZERO_RANGE | FallocateFlags::KEEP_SIZE,
                offset,
                len,
            },
            IoType::Unmap => Job::Fallocate {
                mode: FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
                offset,
                len,
            },
            IoType::Copy => Job::Copy {
                src,
                dst: offset,
                len,
            },
        };
        if !blocking::submit(self.file.clone(), job, slot, self.results.clone()) {
            self.results.push(slot, -i64::from(libc::EIO));
        }
    }

    fn poll(&mut self, done: &mut Vec<BdevIo>) -> usize {
        let before = done.len();
        if !self.queued.is_empty() {
            self.submit_queued(done);
        }
        if self.in_kernel > 0 {
            let mut events = std::mem::take(&mut self.events);
            let n = self.ctx.reap(&mut events, DEPTH as usize);
            self.in_kernel = self.in_kernel.saturating_sub(n);
            for e in events.drain(..) {
                self.finish(e.data as u32, e.res, done);
            }
            self.events = events;
        }
        while let Some((slot, res)) = self.results.pop() {
            self.finish(slot, res, done);
        }
        done.len() - before
    }

    fn wakes_reactor(&self) -> bool {
        self.wake.is_some()
    }
}

impl Drop for AioChannel {
    /// The bdev layer drops a channel once its IOs are done, or when a
    /// drain gave up on them: those still held are leaked with their
    /// buffers (a blocking thread, or the kernel, may still write them).
    /// The context goes after, with the fields; `io_destroy` waits for
    /// the IOs in it.
    fn drop(&mut self) {
        let n = self.ios.leak();
        if n > 0 {
            tracing::error!("aio: channel dropped with {n} IOs unfinished; leaking their buffers");
        }
    }
}
