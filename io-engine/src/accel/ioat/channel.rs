//! [`IoatChannel`]: one reactor's I/OAT channel, the module's
//! [`ModuleChannel`].
//!
//! Thread: the reactor that took it (`create_channel`); when it is dropped
//! its channel goes back to the pool for the next thread, once nothing is
//! in flight on it.

use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::channel_pool::ChannelPool;
use super::driver::Channel;
use crate::accel::{Completion, ModuleChannel, OFFLOAD_DRAIN_TIMEOUT, Submission, Task, TaskId};

/// One reactor's I/OAT channel.
pub struct IoatChannel {
    ch: Option<Channel>,
    pool: Arc<ChannelPool>,
}

impl IoatChannel {
    /// `ch`, held by the calling reactor until dropped, then given back to
    /// `pool`.
    pub(super) fn new(ch: Channel, pool: Arc<ChannelPool>) -> IoatChannel {
        IoatChannel { ch: Some(ch), pool }
    }

    fn ch(&mut self) -> &mut Channel {
        self.ch.as_mut().expect("the channel is held until drop")
    }
}

impl ModuleChannel for IoatChannel {
    fn submit(
        &mut self,
        tasks: &[Task],
        first: TaskId,
        done: &mut Vec<(TaskId, Completion)>,
    ) -> Submission {
        self.ch().submit(tasks, first, done);
        Submission::Submitted
    }

    fn poll(&mut self, done: &mut Vec<(TaskId, Completion)>) -> usize {
        self.ch().poll(done)
    }

    fn in_flight(&self) -> usize {
        self.ch.as_ref().map_or(0, Channel::in_flight)
    }

    /// A broken channel never reports what it still holds (its device
    /// could not be proven stopped).
    fn stuck(&self) -> bool {
        self.ch
            .as_ref()
            .is_some_and(|c| c.broken().is_some() && c.in_flight() > 0)
    }
}

impl Drop for IoatChannel {
    /// Drains the channel first (its owner, the accel channel, drains it
    /// too; whoever else drops one may not have): the driver reports a
    /// request only once the device can no longer write its buffers, so a
    /// drained channel is safe to hand to the next thread. One that still
    /// has requests in its ring past the deadline is leaked whole (ring,
    /// registers, device): nothing proves the device stopped, so nothing it
    /// may write is freed, and the channel is not used again.
    fn drop(&mut self) {
        let mut done = Vec::new();
        let left = self.drain(&mut done, Instant::now() + OFFLOAD_DRAIN_TIMEOUT);
        let Some(ch) = self.ch.take() else { return };
        if left > 0 {
            tracing::error!(
                "ioat {}: channel released with {left} requests still in flight after \
                 {OFFLOAD_DRAIN_TIMEOUT:?}; its ring and device are leaked, not used again",
                ch.name()
            );
            std::mem::forget(ch);
            return;
        }
        if ch.broken().is_some() {
            return;
        }
        self.pool
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(ch);
    }
}
