//! An admin queue's state: its controller, keep alive, the Asynchronous
//! Event Requests it holds, and what Identify says of its namespace.
//!
//! Thread: the admin queue's reactor (the controller's state lives there).

use std::sync::Arc;

use crate::export::ShareWatch;
use crate::export::nvmf::controller::Controller;
use crate::export::nvmf::identify::NamespaceFacts;

/// An admin queue.
pub(crate) struct AdminQueue {
    /// Its controller, made by its Connect.
    pub ctrl: Arc<Controller>,
    /// Keep-alive timeout in TSC ticks (0: none), and when the last
    /// command arrived.
    pub kato: u64,
    pub last: u64,
    /// Command IDs of the Asynchronous Event Requests held.
    pub aers: Vec<u16>,
    /// The namespace went away (the Changed Namespace List names it).
    pub ns_changed: bool,
    /// The share's closing flag (none on the discovery controller): an
    /// unshare is seen at the next round.
    pub watch: Option<ShareWatch>,
    /// The share's namespace, for Identify (none on the discovery
    /// controller).
    pub ns: Option<NamespaceFacts>,
    pub serial: String,
}

/// Asynchronous Event Requests a controller holds at most (AERL + 1).
pub(crate) const MAX_AERS: usize = 4;
