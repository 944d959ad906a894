//! The module seam: what an accel engine (software, I/OAT) provides.
//!
//! Thread: a [`Module`] is shared by every thread and only describes the
//! engine and makes channels; a [`ModuleChannel`] is made on, and used only
//! by, the thread of the [`AccelChannel`](super::AccelChannel) that owns it.

use super::{Completion, Opcode, Task, TaskId};

/// An accel engine.
pub trait Module: Send + Sync {
    /// Short name, as in `--accel-assign copy=NAME` and metrics labels.
    fn name(&self) -> &'static str;

    /// Whether the module executes `op`.
    fn supports(&self, op: Opcode) -> bool;

    /// The longest task of `op` it takes, in bytes (it splits longer
    /// transfers internally up to this).
    fn max_transfer(&self, op: Opcode) -> usize;

    /// The most tasks it takes in one [`ModuleChannel::submit`].
    fn max_batch(&self) -> usize;

    /// What runs its tasks, in a few words, for ListModules: the software
    /// module's kernel ISA, the I/OAT module's channels.
    fn implementation(&self) -> String;

    /// A channel for the calling thread, or `None` when the module has no
    /// channel to give it (I/OAT: every hardware channel is taken); the
    /// framework then runs that thread's tasks on the software module.
    fn create_channel(&self) -> Option<Box<dyn ModuleChannel>>;

    /// What the module found when it was made (devices used or left out,
    /// and why), one line each, for GetInfo and the log.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Engine-specific counters (I/OAT: descriptors, doorbell writes), by
    /// name.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// One thread's channel to a module.
pub trait ModuleChannel {
    /// Takes the tasks `ids` of `tasks` (at most `max_batch`), in one
    /// hand-off to the engine. A module that finishes tasks at once (the
    /// software module) reports them in `done`; the framework files them
    /// in their submitters' queues, which hand them over only when reaped,
    /// never from inside a submission.
    fn submit(&mut self, tasks: &[Task], ids: &[TaskId], done: &mut Vec<(TaskId, Completion)>);

    /// Whether the module finishes every task inside [`ModuleChannel::submit`]
    /// and reports it there, reading no task after the call returns (the
    /// software module). The framework then builds a single task in a
    /// scratch slot instead of taking one from the pool.
    fn completes_at_submit(&self) -> bool {
        false
    }

    /// Reports tasks that finished since the last poll; returns how many.
    fn poll(&mut self, done: &mut Vec<(TaskId, Completion)>) -> usize;

    /// Tasks the engine holds (submitted, not yet reported).
    fn in_flight(&self) -> usize;
}

impl std::fmt::Debug for dyn Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
