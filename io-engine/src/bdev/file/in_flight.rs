//! [`InFlight`]: the IOs a file channel has handed to the kernel, by slot
//! (the slot travels with the kernel request and comes back with its
//! completion), and how a completion's result becomes an IO's status.
//!
//! Thread: the reactor of the channel that owns it.

use super::error_log::ErrorLog;
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
