//! The module seam, second half: one thread's channel to an engine, which
//! takes tasks and reports them finished.
//!
//! Thread: a [`ModuleChannel`] is made on, and used only by, the thread of
//! the [`AccelChannel`](super::AccelChannel) that owns it.

use std::time::Instant;

use super::{Completion, Submission, Task, TaskId, poll_until};

/// One thread's channel to a module.
pub trait ModuleChannel {
    /// Takes `tasks` (at most `max_batch`, all routed to this module) in
    /// one hand-off to the engine. Task `k` of `tasks` is named
    /// `first + k` in what the module reports. The return value says how
    /// the submission went: [`Submission::Executed`] when every task
    /// finished inside the call and is in `done`, in task order (the
    /// software module),
    /// [`Submission::Submitted`] when the module holds the tasks it did
    /// not put in `done` and reports them from [`ModuleChannel::poll`]
    /// (I/OAT). `done` gets only tasks of this submission. The framework
    /// files what is reported in the submitters' queues, which hand it
    /// over only when reaped, never from inside a submission; it keeps
    /// `tasks` unchanged until the module has reported each of them.
    fn submit(
        &mut self,
        tasks: &[Task],
        first: TaskId,
        done: &mut Vec<(TaskId, Completion)>,
    ) -> Submission;

    /// Reports tasks that finished since the last poll; returns how many.
    fn poll(&mut self, done: &mut Vec<(TaskId, Completion)>) -> usize;

    /// Tasks the engine holds (submitted, not yet reported).
    fn in_flight(&self) -> usize;

    /// Polls until the engine holds no task or `deadline` passes, and
    /// returns how many tasks it still holds then (0: drained). What
    /// finishes meanwhile goes to `done`, as from [`ModuleChannel::poll`].
    ///
    /// A task still held at the deadline may still be read and written by
    /// the engine: whoever owns its memory must leak it (never free it nor
    /// hand it back to a pool), see `accel/drain.rs`. An engine reports a
    /// task only when it can no longer touch the task's buffers (I/OAT:
    /// after the device finished it, or was reset and proven stopped).
    ///
    /// It gives up at once on an engine that says it is
    /// [`stuck`](ModuleChannel::stuck).
    fn drain(&mut self, done: &mut Vec<(TaskId, Completion)>, deadline: Instant) -> usize {
        poll_until(deadline, || {
            if self.in_flight() > 0 {
                self.poll(done);
            }
            self.in_flight() == 0 || self.stuck()
        });
        self.in_flight()
    }

    /// Whether the engine holds tasks it will never report (an I/OAT
    /// channel whose device could not be proven stopped): a drain need not
    /// wait for them. None by default.
    fn stuck(&self) -> bool {
        false
    }
}
