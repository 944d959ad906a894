//! IO requests, IO objects and completion.
//!
//! Thread: an IO lives on the reactor that submitted it. Its pooled part
//! ([`IoSlot`]) is plain data and `Send`, so the shared pool may move it
//! between cores at rest; the in-flight [`BdevIo`] adds the submitter's
//! completion handler (an `Rc`), which makes it `!Send`: an IO cannot leave
//! its core by accident.

use std::rc::Rc;

use super::copy_progress::CopyProgress;
use crate::pool::{IoBuf, Pooled};

/// Block IO operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoType {
    /// Read `len` bytes at `offset` into the buffer.
    Read,
    /// Write `len` bytes of the buffer at `offset`.
    Write,
    /// Make completed writes durable.
    Flush,
    /// Discard a range; reading it afterwards returns zeroes (malloc).
    Unmap,
    /// Write zeroes to a range without a data buffer.
    WriteZeroes,
    /// Copy `len` bytes at `src` to `offset`, inside the device: no data
    /// buffer, nothing crosses to the submitter.
    Copy,
}

impl IoType {
    /// Every operation, in stats order.
    pub const ALL: [IoType; IoType::COUNT] = [
        IoType::Read,
        IoType::Write,
        IoType::Flush,
        IoType::Unmap,
        IoType::WriteZeroes,
        IoType::Copy,
    ];

    /// How many operations there are.
    pub const COUNT: usize = 6;

    /// Index into per-op arrays.
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Lower-case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            IoType::Read => "read",
            IoType::Write => "write",
            IoType::Flush => "flush",
            IoType::Unmap => "unmap",
            IoType::WriteZeroes => "write_zeroes",
            IoType::Copy => "copy",
        }
    }

    /// Whether the operation carries a data buffer.
    #[inline]
    pub const fn has_data(self) -> bool {
        matches!(self, IoType::Read | IoType::Write)
    }
}

impl std::fmt::Display for IoType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an IO was refused or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IoError {
    /// Offset or length not a multiple of the block size.
    #[error("offset {offset} or length {len} is not a multiple of the block size {block_size}")]
    Unaligned {
        /// Requested offset.
        offset: u64,
        /// Requested length.
        len: u64,
        /// Device block size.
        block_size: u32,
    },
    /// The range ends past the device.
    #[error("range {offset}+{len} ends past the end of the device ({size} bytes)")]
    OutOfRange {
        /// Requested offset.
        offset: u64,
        /// Requested length.
        len: u64,
        /// Device size.
        size: u64,
    },
    /// A data operation of length 0.
    #[error("a {0} of length 0")]
    Empty(IoType),
    /// The device does not serve this operation.
    #[error("the device does not support {0}")]
    Unsupported(IoType),
    /// A read or write without a buffer, or with one shorter than the length.
    #[error("{op} of {len} bytes needs a buffer of at least that size (got {have})")]
    Buffer {
        /// Operation.
        op: IoType,
        /// Requested length.
        len: u64,
        /// Buffer length (0 if none).
        have: u64,
    },
    /// The device failed the IO (with an errno-style code).
    #[error("device error {0}")]
    Device(i32),
}

/// What a submitter asks for.
#[derive(Debug)]
pub struct IoRequest {
    /// Operation.
    pub op: IoType,
    /// Byte offset, a multiple of the block size.
    pub offset: u64,
    /// Byte length, a multiple of the block size.
    pub len: u64,
    /// Data buffer for reads and writes; the device owns it while in flight.
    pub buf: Option<IoBuf>,
    /// Source byte offset of a copy (a multiple of the block size).
    pub src: u64,
    /// The submitter's own value, handed back at completion.
    pub tag: u64,
    /// Force unit access: a write completes only once durable.
    pub fua: bool,
}

impl IoRequest {
    /// A read of `len` bytes at `offset` into `buf`.
    pub fn read(buf: IoBuf, offset: u64, len: u64) -> Self {
        IoRequest {
            op: IoType::Read,
            offset,
            len,
            buf: Some(buf),
            src: 0,
            tag: 0,
            fua: false,
        }
    }

    /// A write of the first `len` bytes of `buf` at `offset`.
    pub fn write(buf: IoBuf, offset: u64, len: u64) -> Self {
        IoRequest {
            op: IoType::Write,
            offset,
            len,
            buf: Some(buf),
            src: 0,
            tag: 0,
            fua: false,
        }
    }

    /// A request without data (flush, unmap, write_zeroes).
    pub fn no_data(op: IoType, offset: u64, len: u64) -> Self {
        IoRequest {
            op,
            offset,
            len,
            buf: None,
            src: 0,
            tag: 0,
            fua: false,
        }
    }

    /// A copy of `len` bytes at `src` to `dst`, inside the device.
    pub fn copy(src: u64, dst: u64, len: u64) -> Self {
        IoRequest {
            op: IoType::Copy,
            offset: dst,
            len,
            buf: None,
            src,
            tag: 0,
            fua: false,
        }
    }

    /// Sets the tag.
    pub fn tag(mut self, tag: u64) -> Self {
        self.tag = tag;
        self
    }

    /// Sets force unit access (meaningful on writes).
    pub fn fua(mut self, fua: bool) -> Self {
        self.fua = fua;
        self
    }
}

/// A request refused at submission, handed back with its buffer.
#[derive(Debug)]
pub struct SubmitError {
    /// Why.
    pub error: IoError,
    /// The request as it was submitted.
    pub request: IoRequest,
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for SubmitError {}

/// The pooled part of an IO: its parameters, buffer and outcome. Devices
/// and completion handlers reach it through [`BdevIo`] and [`IoDone`].
#[derive(Debug)]
pub struct IoSlot {
    pub(super) op: IoType,
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) buf: Option<IoBuf>,
    pub(super) src: u64,
    pub(super) tag: u64,
    pub(super) fua: bool,
    pub(super) status: Result<(), IoError>,
    /// A completed read placed no data in the buffer: the range reads as
    /// zeroes (a device that stores nothing). Cleared when the IO is done.
    pub(super) zeroes: bool,
    /// A copy the bdev layer emulates, while it runs as reads and writes.
    pub(super) copy: Option<CopyProgress>,
    pub(super) submit_tsc: u64,
    pub(super) complete_tsc: u64,
}

impl Default for IoSlot {
    fn default() -> Self {
        IoSlot {
            op: IoType::Read,
            offset: 0,
            len: 0,
            buf: None,
            src: 0,
            tag: 0,
            fua: false,
            status: Ok(()),
            zeroes: false,
            copy: None,
            submit_tsc: 0,
            complete_tsc: 0,
        }
    }
}

impl IoSlot {
    /// Operation.
    #[inline]
    pub fn op(&self) -> IoType {
        self.op
    }
    /// Byte offset.
    #[inline]
    pub fn offset(&self) -> u64 {
        self.offset
    }
    /// Source byte offset of a copy.
    #[inline]
    pub fn src(&self) -> u64 {
        self.src
    }
    /// Byte length.
    #[inline]
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Whether the length is 0 (a whole-device flush).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The submitter's tag.
    #[inline]
    pub fn tag(&self) -> u64 {
        self.tag
    }
    /// Force unit access: the write is durable when it completes.
    #[inline]
    pub fn fua(&self) -> bool {
        self.fua
    }
    /// Outcome (meaningful once completed).
    #[inline]
    pub fn status(&self) -> Result<(), IoError> {
        self.status
    }
    /// Cycle-clock time of submission.
    #[inline]
    pub fn submit_tsc(&self) -> u64 {
        self.submit_tsc
    }
    /// Cycle-clock time the channel saw the IO complete.
    #[inline]
    pub fn complete_tsc(&self) -> u64 {
        self.complete_tsc
    }
    /// Submission to completion, in cycle-clock ticks.
    #[inline]
    pub fn latency_ticks(&self) -> u64 {
        self.complete_tsc.wrapping_sub(self.submit_tsc)
    }
    /// The data buffer.
    #[inline]
    pub fn buf(&self) -> Option<&IoBuf> {
        self.buf.as_ref()
    }
    /// The data buffer, mutable.
    #[inline]
    pub fn buf_mut(&mut self) -> Option<&mut IoBuf> {
        self.buf.as_mut()
    }
    /// Takes the buffer back (at completion).
    #[inline]
    pub fn take_buf(&mut self) -> Option<IoBuf> {
        self.buf.take()
    }
    /// Sets the outcome (devices, when they finish the IO).
    #[inline]
    pub fn set_status(&mut self, status: Result<(), IoError>) {
        self.status = status;
    }
    /// Whether the completed read's range is all zeroes and its buffer was
    /// left as it was (the device stores no data): the submitter sends or
    /// uses zeroes, not the buffer's contents.
    #[inline]
    pub fn reads_zeroes(&self) -> bool {
        self.zeroes
    }
    /// Completes a read without placing data: its range reads as zeroes
    /// (devices that store nothing).
    #[inline]
    pub fn set_reads_zeroes(&mut self) {
        self.zeroes = true;
    }
}

/// Receives completed IOs on the submitting core.
pub trait IoCompletion {
    /// `io` finished; its status, tag and buffer are in it. The handler gets
    /// its own `Rc` back, ready to pass to the next submit. Dropping `io`
    /// returns the IO object to the pool.
    fn complete(self: Rc<Self>, io: IoDone);
}

/// An IO in flight: what a [`DeviceChannel`](super::DeviceChannel) receives.
pub struct BdevIo {
    pub(super) slot: Pooled<IoSlot>,
    pub(super) cb: Rc<dyn IoCompletion>,
}

/// A completed IO, as its submitter's [`IoCompletion`] receives it.
pub struct IoDone {
    pub(super) slot: Pooled<IoSlot>,
}

macro_rules! deref_slot {
    ($t:ty) => {
        impl std::ops::Deref for $t {
            type Target = IoSlot;
            #[inline]
            fn deref(&self) -> &IoSlot {
                &self.slot
            }
        }
        impl std::ops::DerefMut for $t {
            #[inline]
            fn deref_mut(&mut self) -> &mut IoSlot {
                &mut self.slot
            }
        }
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t))
                    .field("op", &self.op)
                    .field("offset", &self.offset)
                    .field("len", &self.len)
                    .field("status", &self.status)
                    .finish()
            }
        }
    };
}

deref_slot!(BdevIo);
deref_slot!(IoDone);

impl Drop for IoDone {
    /// A buffer the handler did not take goes back to its own pool now, not
    /// with the IO object; the IO object goes back clean of this IO's
    /// outcome flags.
    #[inline]
    fn drop(&mut self) {
        self.slot.buf = None;
        self.slot.zeroes = false;
    }
}
