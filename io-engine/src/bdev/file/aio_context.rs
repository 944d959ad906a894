//! [`AioContext`]: a Linux native AIO context (`io_setup`), its
//! submission (`io_submit`) and its completions, reaped from the ring the
//! kernel maps into the process without a system call (as SPDK's
//! `bdev_aio` does), or with `io_getevents` when the ring's layout is not
//! the one known here.
//!
//! Written by hand: the kernel ABI is four system calls and two structs
//! (`linux/aio_abi.h`), and no maintained crate wraps them without
//! libaio's C library or a runtime of its own.
//!
//! Thread: the reactor whose channel owns it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering, fence};

/// `IOCB_CMD_PREAD`.
pub(super) const CMD_PREAD: u16 = 0;
/// `IOCB_CMD_PWRITE`.
pub(super) const CMD_PWRITE: u16 = 1;
/// `IOCB_CMD_FDSYNC`.
pub(super) const CMD_FDSYNC: u16 = 3;
/// `IOCB_FLAG_RESFD`: signal `aio_resfd` (an eventfd) on completion.
const FLAG_RESFD: u32 = 1;

/// `struct iocb` (linux/aio_abi.h), little-endian layout.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Iocb {
    pub(super) data: u64,
    pub(super) key: u32,
    pub(super) rw_flags: i32,
    pub(super) opcode: u16,
    pub(super) reqprio: i16,
    pub(super) fildes: u32,
    pub(super) buf: u64,
    pub(super) nbytes: u64,
    pub(super) offset: i64,
    pub(super) reserved2: u64,
    pub(super) flags: u32,
    pub(super) resfd: u32,
}

/// `struct io_event`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct IoEvent {
    pub(super) data: u64,
    pub(super) obj: u64,
    pub(super) res: i64,
    pub(super) res2: i64,
}

/// The header of the completion ring the kernel maps at the context's
/// address (`struct aio_ring`, fs/aio.c).
#[repr(C)]
struct AioRing {
    id: u32,
    nr: u32,
    head: AtomicU32,
    tail: AtomicU32,
    magic: u32,
    compat_features: u32,
    incompat_features: u32,
    header_length: u32,
}

/// `AIO_RING_MAGIC`.
const AIO_RING_MAGIC: u32 = 0xa10a_10a1;

/// An AIO context.
pub(super) struct AioContext {
    ctx: u64,
    /// Signalled by each completion; `None` when nothing sleeps on it.
    eventfd: Option<std::sync::Arc<OwnedFd>>,
}

impl AioContext {
    /// A context for up to `depth` IOs in flight.
    pub(super) fn new(
        depth: u32,
        eventfd: Option<std::sync::Arc<OwnedFd>>,
    ) -> std::io::Result<AioContext> {
        let mut ctx: u64 = 0;
        // SAFETY: io_setup writes the new context id to `ctx`, a valid u64.
        let r = unsafe { libc::syscall(libc::SYS_io_setup, depth as libc::c_long, &mut ctx) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(AioContext { ctx, eventfd })
    }

    /// Fills `iocb`'s completion signalling (the eventfd, if any).
    pub(super) fn signal(&self, iocb: &mut Iocb) {
        if let Some(fd) = &self.eventfd {
            iocb.flags |= FLAG_RESFD;
            iocb.resfd = fd.as_raw_fd() as u32;
        }
    }

    /// Submits `iocbs`; returns how many the kernel took (0 when its
    /// queue is full), or the error of the first.
    ///
    /// # Safety
    /// Every buffer an iocb names stays valid, and is not otherwise used,
    /// until its completion is reaped (or forever, if it never is).
    pub(super) unsafe fn submit(&self, iocbs: &[Iocb]) -> std::io::Result<usize> {
        if iocbs.is_empty() {
            return Ok(0);
        }
        let mut ptrs: [*const Iocb; 64] = [std::ptr::null(); 64];
        let n = iocbs.len().min(ptrs.len());
        for (p, iocb) in ptrs.iter_mut().zip(iocbs) {
            *p = iocb;
        }
        // SAFETY: `ptrs[..n]` point at live iocbs, which the kernel copies
        // during the call; their buffers stay valid (this function's
        // contract).
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_submit,
                self.ctx as libc::c_ulong,
                n as libc::c_long,
                ptrs.as_ptr(),
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EAGAIN) {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(r as usize)
    }

    /// Moves up to `max` completions into `out`; returns how many.
    pub(super) fn reap(&self, out: &mut Vec<IoEvent>, max: usize) -> usize {
        let ring = self.ctx as *const AioRing;
        // SAFETY: the context id is the address of the ring the kernel
        // mapped for it, alive until io_destroy (in `Drop`); its header is
        // read only after its magic says it has the layout above.
        let known = unsafe { (*ring).magic == AIO_RING_MAGIC && (*ring).incompat_features == 0 };
        if !known {
            return self.getevents(out, max);
        }
        // SAFETY: as above; head and tail are read and written atomically,
        // the kernel writes tail (after the events) and reads head.
        unsafe {
            let nr = (*ring).nr;
            let header = (*ring).header_length as usize;
            let mut head = (*ring).head.load(Ordering::Acquire);
            let tail = (*ring).tail.load(Ordering::Acquire);
            if nr == 0 || head >= nr || tail >= nr {
                return self.getevents(out, max);
            }
            let events = (ring as *const u8).add(header) as *const IoEvent;
            let mut n = 0;
            while head != tail && n < max {
                out.push(std::ptr::read_volatile(events.add(head as usize)));
                head = (head + 1) % nr;
                n += 1;
            }
            if n > 0 {
                fence(Ordering::Release);
                (*ring).head.store(head, Ordering::Release);
            }
            n
        }
    }

    /// Completions through the system call.
    fn getevents(&self, out: &mut Vec<IoEvent>, max: usize) -> usize {
        let mut events = [IoEvent::default(); 64];
        let max = max.min(events.len());
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `events` has room for `max` events; `zero` is a valid
        // timespec (do not wait).
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_getevents,
                self.ctx as libc::c_ulong,
                0 as libc::c_long,
                max as libc::c_long,
                events.as_mut_ptr(),
                &zero,
            )
        };
        if r <= 0 {
            return 0;
        }
        let n = (r as usize).min(max);
        out.extend_from_slice(events.get(..n).unwrap_or(&[]));
        n
    }
}

impl Drop for AioContext {
    fn drop(&mut self) {
        // SAFETY: the context is ours and used no more; io_destroy waits
        // for the IOs still in it.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.ctx as libc::c_ulong) };
    }
}
