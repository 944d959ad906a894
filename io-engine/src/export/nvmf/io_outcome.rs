//! How a queue pair's IO ended, as its core ([`QueuePair`](super::QueuePair))
//! takes it back: the transport turns a device completion (or a request
//! the channel refused at once) into one; a test or fuzz harness makes them
//! itself.
//!
//! Thread: the queue pair's reactor (it carries an IO buffer of the
//! queue's pool).

use crate::bdev::{IoDone, IoError, IoRequest, SubmitError};
use crate::pool::IoBuf;

/// An IO the queue pair submitted, ended.
#[derive(Debug)]
pub struct IoOutcome {
    /// The request's tag, as the queue pair set it.
    pub tag: u64,
    /// Success, or why it failed.
    pub status: Result<(), IoError>,
    /// Its data buffer, if it had one (a read's data is in it).
    pub buf: Option<IoBuf>,
    /// Its length in bytes.
    pub len: u64,
    /// A read whose range reads as zeroes and whose buffer was left as it
    /// was (a device that stores nothing).
    pub zeroes: bool,
}

impl IoOutcome {
    /// The outcome of a completed IO (its buffer taken out).
    #[inline]
    pub fn done(io: &mut IoDone) -> IoOutcome {
        IoOutcome {
            tag: io.tag(),
            status: io.status(),
            len: io.len(),
            zeroes: io.reads_zeroes(),
            buf: io.take_buf(),
        }
    }

    /// The outcome of a request refused at submission (its buffer back).
    pub fn refused(e: SubmitError) -> IoOutcome {
        let SubmitError { error, request } = e;
        IoOutcome::failed(request, error)
    }

    /// `request`, failed with `error` without running.
    pub fn failed(request: IoRequest, error: IoError) -> IoOutcome {
        IoOutcome {
            tag: request.tag,
            status: Err(error),
            len: request.len,
            zeroes: false,
            buf: request.buf,
        }
    }
}
