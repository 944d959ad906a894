//! [`IoatChannel`]: one reactor's I/OAT channel, the module's
//! [`ModuleChannel`].
//!
//! Thread: the reactor that took it (`create_channel`); when it is dropped
//! its channel goes back to the pool for the next thread.

use std::sync::{Arc, PoisonError};

use super::channel_pool::ChannelPool;
use super::driver::Channel;
use crate::accel::{Completion, ModuleChannel, Submission, Task, TaskId};

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
}

impl Drop for IoatChannel {
    fn drop(&mut self) {
        let Some(ch) = self.ch.take() else { return };
        if ch.in_flight() > 0 {
            // The framework drops a channel only with nothing in flight;
            // should it not, the device must stop (dropping the channel
            // resets it) before the buffers go, and the channel is lost.
            tracing::warn!(
                "ioat {}: channel released with {} requests in flight; resetting it, it is \
                 not used again",
                ch.name(),
                ch.in_flight()
            );
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
