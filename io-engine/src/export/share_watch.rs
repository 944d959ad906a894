//! A share's closing flag, watched by a connection that serves the share
//! without holding its device (an NVMe/TCP admin queue): it sees an
//! unshare at once, without counting as a connection the unshare waits
//! for.
//!
//! Thread: any (an atomic); read on the watching connection's reactor.

use std::sync::Arc;

use super::share_state::ShareState;

/// A watch on one share's closing flag.
pub struct ShareWatch(Arc<ShareState>);

impl ShareWatch {
    pub(super) fn new(state: &Arc<ShareState>) -> ShareWatch {
        ShareWatch(state.clone())
    }

    /// Whether the share is going away (or gone).
    #[inline]
    pub fn closing(&self) -> bool {
        self.0.is_closing()
    }
}
