//! Accel tasks: what one operation asks of a module, and the callback that
//! hears how it ended.
//!
//! Thread: tasks live in their channel's pool and never leave its thread;
//! modules read them during `submit` on that thread.

use std::rc::Rc;

use super::{Completion, Opcode};

/// Index of a task in its channel's pool.
pub type TaskId = u32;

/// One source (or destination) segment: `len` bytes at `base`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct IoVec {
    /// First byte.
    pub base: *const u8,
    /// Length in bytes.
    pub len: usize,
}

impl IoVec {
    /// A segment.
    pub const fn new(base: *const u8, len: usize) -> IoVec {
        IoVec { base, len }
    }
}

/// Hears about finished tasks, on the submitting thread. One implementor
/// usually serves many tasks and tells them apart by their tag.
pub trait Done {
    /// Task `tag` finished with `c`.
    fn done(&self, tag: u64, c: Completion);
}

/// One operation, as a module sees it.
///
/// The addresses are raw because they point at memory an engine may read
/// and write while the task is in flight; the submitter promised (in the
/// `unsafe` submission call) that they stay valid and untouched until the
/// task completes.
pub struct Task {
    /// The operation.
    pub op: Opcode,
    /// Destination (copy, fill, dualcast, copy_crc32c).
    pub dst: *mut u8,
    /// Second destination (dualcast).
    pub dst2: *mut u8,
    /// Source (copy, dualcast) or first buffer (compare).
    pub src: *const u8,
    /// Second buffer (compare).
    pub src2: *const u8,
    /// Total length in bytes.
    pub len: usize,
    /// Fill byte (fill).
    pub fill: u8,
    /// CRC-32C to continue from (crc32c, copy_crc32c; 0 to start).
    pub seed: u32,
    /// Scatter-gather sources (crc32c, copy_crc32c): `iovcnt` entries at
    /// `iovs`, or the single segment `src`/`len` when `iovcnt` is 0.
    iovs: *const IoVec,
    iovcnt: usize,
    single: IoVec,
    pub(super) tag: u64,
    pub(super) done: Option<Rc<dyn Done>>,
    pub(super) route: u8,
}

impl Task {
    pub(super) fn empty() -> Task {
        Task {
            op: Opcode::Copy,
            dst: std::ptr::null_mut(),
            dst2: std::ptr::null_mut(),
            src: std::ptr::null(),
            src2: std::ptr::null(),
            len: 0,
            fill: 0,
            seed: 0,
            iovs: std::ptr::null(),
            iovcnt: 0,
            single: IoVec::new(std::ptr::null(), 0),
            tag: 0,
            done: None,
            route: 0,
        }
    }

    /// Resets the request fields for a new operation.
    #[inline]
    pub(super) fn set(&mut self, op: Opcode, len: usize) {
        self.op = op;
        self.len = len;
        self.dst = std::ptr::null_mut();
        self.dst2 = std::ptr::null_mut();
        self.src = std::ptr::null();
        self.src2 = std::ptr::null();
        self.iovs = std::ptr::null();
        self.iovcnt = 0;
        self.fill = 0;
        self.seed = 0;
    }

    /// Makes `iovs` (or, when empty, `src`/`len`) the task's sources.
    #[inline]
    pub(super) fn set_sources(&mut self, iovs: &[IoVec]) {
        if let [one] = iovs {
            // Kept in the task: the caller's one-entry array may be gone
            // before the task runs.
            self.src = one.base;
        } else {
            self.iovs = iovs.as_ptr();
            self.iovcnt = iovs.len();
        }
    }

    /// The source segments of a crc32c or copy_crc32c task (the single
    /// segment `src`/`len` when no vector was given).
    #[inline]
    pub fn sources(&self) -> &[IoVec] {
        if self.iovcnt == 0 {
            std::slice::from_ref(&self.single)
        } else {
            // SAFETY: the submitter of a vectored task promised (in the
            // unsafe submission call) that its `iovcnt` entries at `iovs`
            // stay valid and unchanged until the task completes, and a
            // module only reads a task while it is in flight.
            unsafe { std::slice::from_raw_parts(self.iovs, self.iovcnt) }
        }
    }

    /// Keeps `single` in step with `src`/`len` for tasks without a vector
    /// of several entries.
    #[inline]
    pub(super) fn seal(&mut self) {
        self.single = IoVec::new(self.src, self.len);
    }
}
