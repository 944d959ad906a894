//! What a connection holds once it is attached to a share: the device, and
//! its place in the share's connection count, which the unshare waits on.
//!
//! Thread: made on the connection's reactor (under the registry's lock),
//! dropped there when the connection lets the device go; the count it
//! releases is read from the control plane.

use std::sync::Arc;

use super::share_state::ShareState;
use crate::bdev::BdevDesc;

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
        if !state.enter(max) {
            return None;
        }
        Some(Attachment {
            desc,
            guard: CountGuard(state.clone()),
        })
    }

    /// Whether the share is going away: the connection finishes the IO it
    /// took and lets the device go.
    #[inline]
    pub fn closing(&self) -> bool {
        self.guard.0.is_closing()
    }
}

struct CountGuard(Arc<ShareState>);

impl Drop for CountGuard {
    fn drop(&mut self) {
        self.0.leave();
    }
}
