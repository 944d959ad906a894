//! An I/O queue whose Connect succeeded and that has not authenticated
//! yet: it holds no export slot, no buffers, no QID and no place in its
//! host's count until it proves its host's secret.
//!
//! Thread: the queue's reactor.

use std::sync::Arc;

use crate::export::nvmf::controller::Controller;

/// An I/O queue authenticating.
pub(crate) struct PendingIo {
    /// The controller it joins.
    pub ctrl: Arc<Controller>,
    /// The share (device) the controller exports.
    pub export: String,
}
