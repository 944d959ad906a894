//! [`PooledChannel`]: one reactor's hold on a channel of an offload
//! module's [`HardwarePool`](super::HardwarePool), the module's
//! [`ModuleChannel`].
//!
//! Thread: the reactor that took it (the module's `create_channel`); when
//! it is dropped its channel goes back to the pool for the next reactor,
//! once nothing is in flight on it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::{
    Completion, HardwareChannel, ModuleChannel, OFFLOAD_DRAIN_TIMEOUT, Submission, Task, TaskId,
};

/// One reactor's channel of an offload module.
pub struct PooledChannel<T: HardwareChannel> {
    ch: Option<T>,
    /// The pool's free channels, where it goes back.
    free: Arc<Mutex<Vec<T>>>,
}

impl<T: HardwareChannel> PooledChannel<T> {
    /// `ch`, held by the calling reactor until dropped, then given back to
    /// its pool's `free` channels.
    pub(super) fn new(ch: T, free: Arc<Mutex<Vec<T>>>) -> PooledChannel<T> {
        PooledChannel { ch: Some(ch), free }
    }

    fn ch(&mut self) -> &mut T {
        self.ch.as_mut().expect("the channel is held until drop")
    }
}

impl<T: HardwareChannel> ModuleChannel for PooledChannel<T> {
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
        self.ch.as_ref().map_or(0, T::in_flight)
    }

    /// A broken channel never reports what it still holds (its device
    /// could not be proven stopped).
    fn stuck(&self) -> bool {
        self.ch
            .as_ref()
            .is_some_and(|c| c.broken() && c.in_flight() > 0)
    }
}

impl<T: HardwareChannel> Drop for PooledChannel<T> {
    /// Drains the channel first (its owner, the accel channel, drains it
    /// too; whoever else drops one may not have): a driver reports a
    /// request only once the device can no longer write its buffers, so a
    /// drained channel is safe to hand to the next reactor. One that still
    /// holds requests past the deadline is leaked whole (its driver
    /// memory, its device): nothing proves the device stopped, so nothing
    /// it may write is freed, and the channel is not used again; nor is a
    /// broken one.
    fn drop(&mut self) {
        let mut done = Vec::new();
        let left = self.drain(&mut done, Instant::now() + OFFLOAD_DRAIN_TIMEOUT);
        let Some(ch) = self.ch.take() else { return };
        if left > 0 {
            tracing::error!(
                "{} {}: channel released with {left} requests still in flight after \
                 {OFFLOAD_DRAIN_TIMEOUT:?}; it is leaked (with what its device may still \
                 write), not used again",
                T::MODULE,
                ch.name()
            );
            std::mem::forget(ch);
            return;
        }
        if ch.broken() {
            return;
        }
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(ch);
    }
}
