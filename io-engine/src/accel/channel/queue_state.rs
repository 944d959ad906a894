//! What the channel keeps of each submitter's completion queue: the
//! records waiting to be reaped and the count of tasks in flight.
//!
//! Thread: the channel's.

use crate::accel::Completion;

/// A finished task as its submitter reaps it: the tag it was submitted
/// with, and how it ended.
pub type Reaped = (u64, Completion);

/// What the channel keeps of one queue.
pub(super) struct QueueState {
    pub(super) records: Vec<Reaped>,
    /// Tasks submitted through it and not yet reaped.
    pub(super) in_flight: usize,
    pub(super) open: bool,
}
