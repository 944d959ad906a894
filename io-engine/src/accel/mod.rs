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
//!   program's back, and the submitter's `u64` tag. Every task is built in
//!   a reused staging list (one per module a submission addresses; a
//!   single task is a batch of one) and handed to its module in one call.
//!   The module answers how it took them ([`Submission`]): executed in the
//!   call (software), or submitted, held until its poll reports them
//!   (I/OAT). The channel's pool size bounds the tasks taken and not yet
//!   reaped.
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

mod assignment;
mod bump;
mod channel;
mod completion;
#[cfg(test)]
pub(crate) mod conformance;
mod drain;
pub mod dsa;
mod error;
mod hardware_channel;
mod hardware_pool;
mod io_vec;
pub mod ioat;
mod model_count;
mod module;
mod module_channel;
mod module_info;
mod opcode;
mod placement;
mod pooled_channel;
mod registry;
pub mod software;
mod stats;
mod status;
mod submission;
mod task;

#[cfg(test)]
mod tests;

pub use assignment::Assignment;
pub(crate) use bump::bump;
pub use channel::{AccelChannel, Batch, Queue, Reaped};
pub use completion::Completion;
pub use drain::{OFFLOAD_DRAIN_TIMEOUT, poll_until};
pub use error::AccelError;
pub use hardware_channel::{HardwareChannel, human_bytes};
pub use hardware_pool::HardwarePool;
pub use io_vec::IoVec;
pub(crate) use model_count::model_count;
pub use module::Module;
pub use module_channel::ModuleChannel;
pub use module_info::ModuleInfo;
pub use opcode::Opcode;
pub use placement::Placement;
pub use pooled_channel::PooledChannel;
pub use registry::Accel;
pub use stats::{ModuleStats, OpStats};
pub use status::Status;
pub use submission::Submission;
pub use task::{Sources, Task, TaskId};
