//! A submitter's completion queue: where its tasks' records wait until it
//! reaps them, and its door for single tasks.
//!
//! Thread: the channel's; `!Send`.

use std::rc::Rc;

use super::accel_channel::AccelChannel;
use super::queue_state::Reaped;
use super::submissions::submissions;
use crate::accel::{AccelError, IoVec, Opcode, Placement, Task};

/// A submitter's completion queue on its thread's [`AccelChannel`]
/// ([`AccelChannel::queue`]): tasks submitted through it (alone, or in a
/// [`Batch`](super::Batch)) end as `(tag, completion)` records that only
/// [`Queue::reap`] hands back, in bulk. Dropping the queue forgets its
/// unreaped records; tasks still in a module then finish unreported.
///
/// The submission calls are `unsafe`, with the contract given at
/// [`Batch`](super::Batch).
pub struct Queue {
    ch: Rc<AccelChannel>,
    id: u16,
}

impl AccelChannel {
    /// A new completion queue on this channel, for one submitter.
    pub fn queue(self: &Rc<Self>) -> Queue {
        Queue {
            ch: self.clone(),
            id: self.open_queue(),
        }
    }
}

impl Queue {
    /// The channel the queue submits to (its modules, limits and pool).
    pub fn channel(&self) -> &Rc<AccelChannel> {
        &self.ch
    }

    /// Its number on the channel.
    pub(super) fn id(&self) -> u16 {
        self.id
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
