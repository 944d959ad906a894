//! An unshare under way: the share is gone from the registry, and its
//! connections are letting the device go.
//!
//! Thread: made on the control path; [`Release::wait`] blocks its caller
//! (the engine runs it on the blocking pool).

use std::sync::Arc;
use std::time::Duration;

use super::share_state::ShareState;

/// An unshare under way: the share is gone from the table and its
/// connections are letting the device go.
pub struct Release {
    pub(super) name: String,
    pub(super) state: Arc<ShareState>,
}

impl Release {
    /// Waits until every connection has let the device go, or `bound` has
    /// passed; returns whether they all have.
    pub fn wait(&self, bound: Duration) -> bool {
        let released = self.state.wait_released(bound);
        if !released {
            tracing::warn!(
                export = self.name,
                connections = self.state.connections(),
                "unshare: connections still hold the device"
            );
        }
        released
    }
}
