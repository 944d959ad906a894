//! A share's state that outlives its place in the registry: the count of
//! attached connections that an unshare waits on, and the closing flag
//! they watch.
//!
//! Thread: any; the count is behind a mutex with a condvar (the control
//! path waits, a connection's reactor counts down), the flag an atomic.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A share's state that outlives its place in the registry: the
/// connections attached, and whether it is going away.
#[derive(Default)]
pub(super) struct ShareState {
    connections: Mutex<usize>,
    released: Condvar,
    closing: AtomicBool,
}

impl ShareState {
    fn count(&self) -> MutexGuard<'_, usize> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one more connection attached, unless `max` are (0: no
    /// limit); returns whether it did.
    pub(super) fn enter(&self, max: usize) -> bool {
        let mut n = self.count();
        if max != 0 && *n >= max {
            return false;
        }
        *n += 1;
        true
    }

    /// Counts one connection gone, waking the unshare waiting for the last.
    pub(super) fn leave(&self) {
        let mut n = self.count();
        *n -= 1;
        if *n == 0 {
            self.released.notify_all();
        }
    }

    /// Whether the share is going away.
    #[inline]
    pub(super) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Connections attached now.
    pub(super) fn connections(&self) -> usize {
        *self.count()
    }

    /// Marks the share as going away: attached connections see it through
    /// [`Attachment::closing`].
    pub(super) fn close(&self) {
        self.closing.store(true, Ordering::Release);
    }

    /// Waits until no connection is attached, or `bound` has passed;
    /// returns whether none is.
    pub(super) fn wait_released(&self, bound: Duration) -> bool {
        let end = Instant::now() + bound;
        let mut n = self.count();
        while *n > 0 {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            n = self
                .released
                .wait_timeout(n, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}
