//! A thread's accel channel: its channel to each module it routes to, the
//! submitters' completion queues, submission (single tasks and batches,
//! one path) and completion.
//!
//! Thread: the one that made it ([`Accel::channel`](super::Accel::channel));
//! [`AccelChannel`], [`Queue`] and [`Batch`] are `!Send`. A submitter owns
//! a [`Queue`] on its thread's channel, submits through it with a `u64` tag
//! per task, and drains `(tag, completion)` records from it with
//! [`Queue::reap`], as io_uring's CQEs carry `user_data`: no callback per
//! task. A submission only appends records (the software module finishes
//! at once); they are handed to the submitter at its next reap, never
//! inside the submission.
//!
//! One path: every task is built and validated in a staging list
//! (`stage.rs`: one per module a submission addresses; a single task is a
//! stage of one), handed to its module in one call, and filed from what the
//! module reports, counted in one `Tally`. The module's answer
//! ([`Submission`](super::Submission)) says whether it finished the tasks
//! in the call or holds them until its poll reports them; a stage stays
//! parked until its module has reported every task.

mod accel_channel;
mod batch;
mod queue;
mod queue_state;
mod room;
mod stage;
mod submissions;
mod tally;
mod validate;

pub use accel_channel::AccelChannel;
pub use batch::Batch;
pub use queue::Queue;
pub use queue_state::Reaped;
