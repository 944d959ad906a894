//! What a queue pair is: where it stands from ICReq to its Connect, and
//! then an admin queue, an I/O queue still authenticating, or an
//! established I/O queue with what it holds.
//!
//! Thread: the queue pair's reactor (plain state of its core).

use super::admin_queue::AdminQueue;
use super::io_queue::IoQueue;
use super::pending_io::PendingIo;

/// What a queue is doing.
pub(crate) enum Phase {
    /// Waiting for the host's ICReq.
    Init,
    /// Waiting for the Connect that says which queue this is.
    Connecting,
    /// The admin queue of its controller.
    Admin(Box<AdminQueue>),
    /// An I/O queue connected and authenticating: it holds nothing yet.
    IoPending(Box<PendingIo>),
    /// An established I/O queue.
    Io(Box<IoQueue>),
}

impl Phase {
    /// Whether it is an I/O queue (established or not).
    pub(super) fn is_io(&self) -> bool {
        matches!(self, Phase::IoPending(_) | Phase::Io(_))
    }

    /// Whether its Connect succeeded.
    pub(super) fn connected(&self) -> bool {
        matches!(self, Phase::Admin(_) | Phase::IoPending(_) | Phase::Io(_))
    }
}
