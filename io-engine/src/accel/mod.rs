//! The accel framework: one API for copy, fill, compare, dualcast, crc32c
//! and copy+crc32c, executed by whichever module (engine) each opcode is
//! assigned to: the SIMD software module, or an offload engine such as
//! I/OAT.
//!
//! Thread: [`Accel`] (the module registry, the opcode assignment, the stats)
//! is shared by every thread. An [`AccelChannel`] belongs to one thread,
//! normally a reactor: it is `!Send`, owns that core's task pool and one
//! channel of each module it routes to. Each submitter on that thread owns
//! a [`Queue`] on it and reaps its completions there ([`Queue::reap`]).
//!
//! The model follows SPDK's accel framework (`lib/accel/accel.c`):
//!
//! - A request is a [`Task`] (one cache line, no allocation per
//!   operation); it carries raw buffer addresses, because the buffers are
//!   device-visible memory that an engine reads and writes behind the
//!   program's back, and the submitter's `u64` tag. A module that finishes
//!   later (I/OAT) holds tasks of the channel's fixed pool; for one that
//!   finishes inside the submission (software), a single task is built in
//!   the channel's scratch task and a batch's in the batch's own reused
//!   staging area. Either way the pool's size bounds the tasks taken and
//!   not yet reaped.
//! - A task completes as a `(tag, completion)` record in its submitter's
//!   [`Queue`], which the submitter drains in bulk when it chooses (as
//!   io_uring CQEs carry `user_data`), never inside a submission; there is
//!   no callback per task. SPDK calls a function per task instead; records
//!   drained in bulk cost less per task, and a submitter that keeps its
//!   own objects in a slab (malloc: its IOs) needs no second lookup: the
//!   tag is the slot.
//! - Requests are checked at submission: zero length, overlapping copy
//!   buffers, dualcast destinations that are not 4 KiB aligned and lengths
//!   above the module's limit are refused there with an [`AccelError`],
//!   and nothing is queued.
//! - A [`Batch`] gathers any mix of operations and hands each module its
//!   share in one call (one doorbell for I/OAT). Each task still completes
//!   on its own.
//! - A miscompare is its own outcome ([`Status::Miscompare`], SPDK's
//!   `-EILSEQ`), not an engine failure.
//!
//! CRC-32C convention: a task's `seed` is a CRC-32C value as a caller sees
//! it (0 to start), and the result is the standard CRC-32C of the data
//! appended to it: seed 0 over "123456789" gives 0xE3069283, and chaining
//! (the result of one part as the seed of the next) gives the CRC of the
//! whole. SPDK's accel instead passes `~seed` into an update without the
//! final inversion, so its result for a seed `s` is `!ours(s)`; see
//! [`software::kernels`].

mod channel;
pub mod conformance;
pub mod ioat;
mod module;
mod registry;
pub mod software;
mod stats;
mod task;

#[cfg(test)]
mod tests;

pub use channel::{AccelChannel, Batch, Queue, Reaped};
pub use module::{Module, ModuleChannel};
pub use registry::{Accel, Assignment, ModuleInfo};
pub use stats::{ModuleStats, OpStats};
pub use task::{IoVec, Placement, Sources, Task, TaskId};

use std::fmt;
use std::str::FromStr;

/// An accel operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Opcode {
    /// Copy `len` bytes from `src` to `dst` (non-overlapping).
    Copy = 0,
    /// Fill `len` bytes of `dst` with one byte.
    Fill = 1,
    /// Compare `len` bytes of `src` and `src2`.
    Compare = 2,
    /// Copy `src` to both `dst` and `dst2` (4 KiB aligned destinations).
    Dualcast = 3,
    /// CRC-32C of the source vectors.
    Crc32c = 4,
    /// Copy the source vectors to `dst` and compute their CRC-32C.
    CopyCrc32c = 5,
}

impl Opcode {
    /// Every opcode, in wire order.
    pub const ALL: [Opcode; 6] = [
        Opcode::Copy,
        Opcode::Fill,
        Opcode::Compare,
        Opcode::Dualcast,
        Opcode::Crc32c,
        Opcode::CopyCrc32c,
    ];
    /// Number of opcodes.
    pub const COUNT: usize = 6;

    /// The name used by flags, the API and metrics: `copy`, `fill`,
    /// `compare`, `dualcast`, `crc32c`, `copy_crc32c`.
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Copy => "copy",
            Opcode::Fill => "fill",
            Opcode::Compare => "compare",
            Opcode::Dualcast => "dualcast",
            Opcode::Crc32c => "crc32c",
            Opcode::CopyCrc32c => "copy_crc32c",
        }
    }

    /// Index into per-opcode tables.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }
}

impl serde::Serialize for Opcode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Opcode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Opcode::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown accel opcode {s:?}: expected one of copy, fill, compare, dualcast, crc32c, copy_crc32c"
                )
            })
    }
}

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Done as asked.
    Success,
    /// A compare found the buffers different (SPDK: `-EILSEQ`).
    Miscompare,
    /// The engine found the request invalid after submission.
    InvalidArgument,
    /// The engine failed the task (a device error, a channel reset).
    EngineError,
}

impl Status {
    /// `success`, `miscompare`, `invalid_argument`, `engine_error`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Miscompare => "miscompare",
            Status::InvalidArgument => "invalid_argument",
            Status::EngineError => "engine_error",
        }
    }
}

/// How a finished task ended, as its [`Queue`] record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The outcome.
    pub status: Status,
    /// The CRC-32C, for crc32c and copy_crc32c tasks that succeeded.
    pub crc: u32,
}

impl Completion {
    /// A successful completion with no value.
    pub const SUCCESS: Completion = Completion {
        status: Status::Success,
        crc: 0,
    };

    /// A completion with `status` and no value.
    pub const fn with(status: Status) -> Completion {
        Completion { status, crc: 0 }
    }
}

/// Errors of the accel framework, at submission or configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccelError {
    /// The request is malformed; nothing was queued.
    #[error("invalid {op} request: {reason}")]
    Invalid {
        /// The operation asked for.
        op: Opcode,
        /// What is wrong with it.
        reason: String,
    },
    /// Every task of the channel is in flight or unreaped; retry after a
    /// reap.
    #[error("all {capacity} accel tasks of this channel are in flight")]
    NoTask {
        /// Tasks per channel.
        capacity: usize,
    },
    /// A batch already holds as many tasks for a module as it takes.
    #[error("batch full: module {module} takes at most {max} tasks per batch")]
    BatchFull {
        /// The module.
        module: &'static str,
        /// Its batch limit.
        max: usize,
    },
    /// No module of that name is registered.
    #[error("unknown accel module {0:?}")]
    UnknownModule(String),
    /// The module cannot run that opcode.
    #[error("accel module {module} does not support {op}")]
    Unsupported {
        /// The module.
        module: String,
        /// The opcode.
        op: Opcode,
    },
    /// An assignment that is not `OPCODE=MODULE`.
    #[error("bad accel assignment {0:?}: expected OPCODE=MODULE, e.g. copy=software")]
    BadAssignment(String),
}
