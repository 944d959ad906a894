//! Accel tasks: what one operation asks of a module.
//!
//! Thread: tasks are built in their channel's staging lists and never
//! leave its thread; modules read them during `submit` on that thread
//! (and, for a module that holds them, until it reports them).

use super::{IoVec, Opcode, Placement};

/// How a module names a task it was handed, in what it reports: task `k`
/// of a submission is `first + k` ([`ModuleChannel::submit`](super::ModuleChannel::submit)).
pub type TaskId = u32;

/// One operation, as a module sees it: one cache line.
///
/// The addresses are raw because they point at memory an engine may read
/// and write while the task is in flight; the submitter promised (in the
/// `unsafe` submission call) that they stay valid and untouched until the
/// task completes.
#[repr(C, align(64))]
pub struct Task {
    /// The operation.
    pub op: Opcode,
    /// Fill byte (fill).
    pub fill: u8,
    /// Where the stores of copy and fill should land (a hint; modules
    /// may ignore it).
    pub placement: Placement,
    /// CRC-32C to continue from (crc32c, copy_crc32c; 0 to start).
    pub seed: u32,
    /// Total length in bytes.
    pub len: usize,
    /// Destination (copy, fill, dualcast, copy_crc32c).
    pub dst: *mut u8,
    /// Source (copy, dualcast, and a single-segment crc32c/copy_crc32c) or
    /// first buffer (compare).
    pub src: *const u8,
    /// Second destination (dualcast).
    pub dst2: *mut u8,
    /// Second buffer (compare).
    pub src2: *const u8,
    /// Scatter-gather sources (crc32c, copy_crc32c): `iovcnt` entries at
    /// `iovs`, or the single segment `src`/`len` when `iovcnt` is 0.
    iovs: *const IoVec,
    iovcnt: usize,
}

const _: () = assert!(std::mem::size_of::<Task>() == 64);

/// The source segments of a crc32c or copy_crc32c task.
#[derive(Debug, Clone, Copy)]
pub enum Sources<'a> {
    /// One segment (kept in the task).
    One(IoVec),
    /// The submitter's vector.
    Many(&'a [IoVec]),
}

impl Sources<'_> {
    /// The segments, in order.
    pub fn iter(&self) -> impl Iterator<Item = IoVec> + '_ {
        let (one, many) = match self {
            Sources::One(v) => (Some(*v), &[][..]),
            Sources::Many(m) => (None, *m),
        };
        one.into_iter().chain(many.iter().copied())
    }
}

impl Task {
    pub(super) fn empty() -> Task {
        Task {
            op: Opcode::Copy,
            fill: 0,
            placement: Placement::Cache,
            seed: 0,
            len: 0,
            dst: std::ptr::null_mut(),
            src: std::ptr::null(),
            dst2: std::ptr::null_mut(),
            src2: std::ptr::null(),
            iovs: std::ptr::null(),
            iovcnt: 0,
        }
    }

    /// Starts a new operation. Each submission then sets exactly the
    /// fields its opcode reads (validation and the modules read no others),
    /// so the rest keep whatever the task held before; the placement is
    /// reset to [`Placement::Cache`].
    #[inline]
    pub(super) fn set(&mut self, op: Opcode, len: usize) {
        self.op = op;
        self.len = len;
        self.placement = Placement::Cache;
        self.iovcnt = 0;
    }

    /// Makes `iovs` the task's sources.
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
    /// segment `src`/`len` when no vector of several was given).
    #[inline]
    pub fn sources(&self) -> Sources<'_> {
        if self.iovcnt == 0 {
            Sources::One(IoVec::new(self.src, self.len))
        } else {
            // SAFETY: the submitter of a vectored task promised (in the
            // unsafe submission call) that its `iovcnt` entries at `iovs`
            // stay valid and unchanged until the task completes, and a
            // module only reads a task while it is in flight.
            Sources::Many(unsafe { std::slice::from_raw_parts(self.iovs, self.iovcnt) })
        }
    }
}
