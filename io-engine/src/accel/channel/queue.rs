//! A submitter's completion queue: where its tasks' records wait until it
//! reaps them, and its door for single tasks.
//!
//! Thread: the channel's; `!Send`.

use std::rc::Rc;
use std::time::Instant;

use super::accel_channel::AccelChannel;
use super::queue_state::Reaped;
use super::submissions::submissions;
use crate::accel::{AccelError, IoVec, OFFLOAD_DRAIN_TIMEOUT, Opcode, Placement, Task};

/// A submitter's completion queue on its thread's [`AccelChannel`]
/// ([`AccelChannel::queue`]): tasks submitted through it (alone, or in a
/// [`Batch`](super::Batch)) end as `(tag, completion)` records that only
/// [`Queue::reap`] hands back, in bulk. Dropping the queue first waits
/// ([`Queue::drain`], up to [`OFFLOAD_DRAIN_TIMEOUT`]) until no module holds its
/// tasks, then forgets its unreaped records.
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

    /// Polls the channel's modules until none holds a task submitted
    /// through this queue, or until `deadline`; returns how many they still
    /// hold then (0: every task is reported, its record waits here). The
    /// buffers of tasks still held past the deadline may still be written
    /// by the engine: their submitter must leak them (`accel/drain.rs`).
    pub fn drain(&self, deadline: Instant) -> usize {
        self.ch.drain_queue(self.id, deadline)
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
        let left = self.drain(Instant::now() + OFFLOAD_DRAIN_TIMEOUT);
        if left > 0 {
            tracing::error!(
                "accel queue dropped while engines still hold {left} of its tasks after \
                 {OFFLOAD_DRAIN_TIMEOUT:?}; their submitter must leak their buffers"
            );
        }
        self.ch.close(self.id);
    }
}
