//! What a connection holds once it is attached to a share: the device, and
//! its place in the share's connection count, which the unshare waits on.
//!
//! Thread: made on the connection's reactor (under the registry's lock),
//! dropped there when the connection lets the device go; the count it
//! releases is read from the control plane.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::bdev::BdevDesc;

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

/// A connection attached to a share. The device goes first when it is
/// dropped, then the count, so whoever waits on the count finds the
/// device released.
pub struct Attachment {
    /// The device, open.
    pub desc: BdevDesc,
    /// Declared after `desc`: dropped after it.
    guard: CountGuard,
}

impl Attachment {
    /// Takes a place in `state`'s count, refused (`None`) past `max`
    /// connections (0: no limit).
    pub(super) fn take(desc: BdevDesc, state: &Arc<ShareState>, max: usize) -> Option<Attachment> {
        let mut n = state.count();
        if max != 0 && *n >= max {
            return None;
        }
        *n += 1;
        Some(Attachment {
            desc,
            guard: CountGuard(state.clone()),
        })
    }

    /// Whether the share is going away: the connection finishes the IO it
    /// took and lets the device go.
    #[inline]
    pub fn closing(&self) -> bool {
        self.guard.0.closing.load(Ordering::Acquire)
    }
}

struct CountGuard(Arc<ShareState>);

impl Drop for CountGuard {
    fn drop(&mut self) {
        let mut n = self.0.count();
        *n -= 1;
        if *n == 0 {
            self.0.released.notify_all();
        }
    }
}
