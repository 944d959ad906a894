//! [`InFlight`]: the IOs a file channel has handed to the kernel, by slot
//! (the slot travels with the kernel request and comes back with its
//! completion), and how a completion's result becomes an IO's status.
//!
//! Thread: the reactor of the channel that owns it.

use std::time::{Duration, Instant};

use crate::bdev::{BdevIo, IoError, IoType};

/// The IOs a channel has handed to the kernel, by slot.
#[derive(Default)]
pub(super) struct InFlight {
    ios: Vec<Option<BdevIo>>,
    free: Vec<u32>,
    len: usize,
}

impl InFlight {
    /// Keeps `io` until its completion; returns its slot.
    pub(super) fn insert(&mut self, io: BdevIo) -> u32 {
        self.len += 1;
        match self.free.pop() {
            Some(slot) => {
                if let Some(entry) = self.ios.get_mut(slot as usize) {
                    *entry = Some(io);
                }
                slot
            }
            None => {
                self.ios.push(Some(io));
                (self.ios.len() - 1) as u32
            }
        }
    }

    /// The IO in `slot`, if any.
    pub(super) fn get(&self, slot: u32) -> Option<&BdevIo> {
        self.ios.get(slot as usize).and_then(Option::as_ref)
    }

    /// Takes the IO in `slot` out (its completion came).
    pub(super) fn take(&mut self, slot: u32) -> Option<BdevIo> {
        let io = self.ios.get_mut(slot as usize)?.take()?;
        self.free.push(slot);
        self.len -= 1;
        Some(io)
    }

    /// Completes the IO in `slot` with the kernel's result `res` (bytes or
    /// a negated errno) into `done`; a failure is logged through `errors`.
    pub(super) fn finish(
        &mut self,
        slot: u32,
        res: i64,
        errors: &mut ErrorLog,
        done: &mut Vec<BdevIo>,
    ) {
        let Some(mut io) = self.take(slot) else {
            return;
        };
        let status = status_of(&io, res);
        if let Err(e) = status {
            errors.failed(&io, e);
        }
        io.set_status(status);
        done.push(io);
    }

    /// Leaks every IO held: the kernel may still write their buffers, so
    /// they are never returned to their pools (a channel dropped with IO
    /// the kernel never finished).
    pub(super) fn leak(&mut self) -> usize {
        let ios = std::mem::take(&mut self.ios);
        let n = self.len;
        self.len = 0;
        std::mem::forget(ios);
        n
    }
}

/// The status of `io` from a kernel result: the bytes moved (reads and
/// writes must move all of them) or a negated errno.
/// EOPNOTSUPP (a backing that cannot zero or deallocate that range) is
/// the operation unsupported.
pub(super) fn status_of(io: &BdevIo, res: i64) -> Result<(), IoError> {
    if res < 0 {
        return Err(match i32::try_from(-res).unwrap_or(libc::EIO) {
            libc::EOPNOTSUPP => IoError::Unsupported(io.op()),
            errno => IoError::Device(errno),
        });
    }
    if io.op().has_data() && res as u64 != io.len() {
        // A short transfer: past the end of a file that shrank, or a full
        // file system. The IO failed; the bytes it did move are not
        // reported as done.
        return Err(IoError::Device(if io.op() == IoType::Write {
            libc::ENOSPC
        } else {
            libc::EIO
        }));
    }
    Ok(())
}

/// Logs failed IOs of one channel: the first at once, then at most one
/// line a second with the count of those in between (a failing disk under
/// load fails thousands a second; each is counted in the device's stats).
pub(super) struct ErrorLog {
    device: String,
    next: Instant,
    quiet: u64,
}

impl ErrorLog {
    pub(super) fn new(device: &str) -> Self {
        ErrorLog {
            device: device.to_owned(),
            next: Instant::now(),
            quiet: 0,
        }
    }

    /// `io` failed with `e`.
    pub(super) fn failed(&mut self, io: &BdevIo, e: IoError) {
        let now = Instant::now();
        if now < self.next {
            self.quiet += 1;
            return;
        }
        let errno = match e {
            IoError::Device(n) => std::io::Error::from_raw_os_error(n).to_string(),
            other => other.to_string(),
        };
        tracing::warn!(
            device = %self.device,
            "{} of {} bytes at {} failed: {errno}{}",
            io.op(),
            io.len(),
            io.offset(),
            if self.quiet > 0 {
                format!(" ({} more failed IOs since the last line)", self.quiet)
            } else {
                String::new()
            }
        );
        self.quiet = 0;
        self.next = now + Duration::from_secs(1);
    }
}
