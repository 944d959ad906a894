//! [`FdHandler`]: the receiver of a registered fd's readiness.
//!
//! Thread: the reactor that registered the fd.

use super::readiness::Readiness;

/// Receives readiness events on the reactor that registered the fd.
pub trait FdHandler {
    /// The fd is ready for something it was registered for.
    fn on_ready(&self, ready: Readiness);
}
