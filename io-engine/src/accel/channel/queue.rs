//! A submitter's completion queue: where its tasks' records wait until it
//! reaps them, and its door for single tasks.
//!
//! Thread: the channel's; `!Send`.

use std::rc::Rc;

use super::accel_channel::AccelChannel;
use super::batch::Batch;
use super::submissions::submissions;
use crate::accel::{AccelError, Completion, IoVec, Opcode, Placement, Task};

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

/// A submitter's completion queue on its thread's [`AccelChannel`]
/// ([`AccelChannel::queue`]): tasks submitted through it (alone, or in a
/// [`Batch`]) end as `(tag, completion)` records that only
/// [`Queue::reap`] hands back, in bulk. Dropping the queue forgets its
/// unreaped records; tasks still in a module then finish unreported.
///
/// The submission calls are `unsafe`, with the contract given at
/// [`Batch`].
pub struct Queue {
    ch: Rc<AccelChannel>,
    id: u16,
}

impl Queue {
    pub(super) fn new(ch: Rc<AccelChannel>, id: u16) -> Queue {
        Queue { ch, id }
    }

    /// The channel the queue submits to (its modules, limits and pool).
    pub fn channel(&self) -> &Rc<AccelChannel> {
        &self.ch
    }

    /// Its number on the channel.
    pub(super) fn id(&self) -> u16 {
        self.id
    }

    /// An empty batch whose tasks complete on this queue.
    pub fn batch(&self) -> Batch<'_> {
        Batch::new(self)
    }

    /// Polls the channel's modules, then moves every record of this queue
    /// to the end of `out` (when `out` is empty the two lists swap, so
    /// reuse one `out` and clear it after each reap). Returns how many.
    /// The tasks are then complete: their buffers are the caller's again.
    #[inline]
    pub fn reap(&self, out: &mut Vec<Reaped>) -> usize {
        self.ch.reap(self.id, out)
    }

    /// Tasks submitted through this queue (alone, or in batches that were
    /// submitted) and not yet reaped.
    pub fn in_flight(&self) -> usize {
        self.ch.queue_in_flight(self.id)
    }

    #[inline]
    fn single(
        &self,
        op: Opcode,
        len: usize,
        tag: u64,
        fill: impl FnOnce(&mut Task),
    ) -> Result<(), AccelError> {
        self.ch.single(self.id, op, len, tag, fill)
    }

    submissions!(single, "Submits (as a batch of one)");
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.ch.close(self.id);
    }
}
