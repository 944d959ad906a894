//! A connection's place in [`Handshakes`](super::Handshakes) while its
//! handshake lasts: its progress and whether it was evicted. Dropping it
//! (the connection is established, or closed) takes it out.
//!
//! Thread: made by the accept loop (control-plane runtime), then held by
//! the connection on its reactor; the flags are atomics the accept loop
//! reads and sets.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The connections in the handshake, in accept order: what
/// [`Handshakes`](super::Handshakes) keeps and a slot leaves on drop.
#[derive(Debug, Default)]
pub(super) struct Open {
    pub list: Mutex<Vec<Arc<SlotState>>>,
    /// `list.len()`, for readers that take no lock.
    pub len: AtomicUsize,
}

impl Open {
    /// `state` leaves (unless evicted: then it is gone already).
    fn remove(&self, state: &Arc<SlotState>) {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = list.iter().position(|s| Arc::ptr_eq(s, state)) {
            list.remove(i);
            self.len.store(list.len(), Ordering::Relaxed);
        }
    }
}

/// What the registry and the connection share.
#[derive(Debug)]
pub(super) struct SlotState {
    /// The reactor the connection lives on.
    pub core: usize,
    /// Whole handshake messages received (0: silent since accept).
    progress: AtomicU32,
    evicted: AtomicBool,
}

impl SlotState {
    pub fn new(core: usize) -> SlotState {
        SlotState {
            core,
            progress: AtomicU32::new(0),
            evicted: AtomicBool::new(false),
        }
    }

    pub fn progress(&self) -> u32 {
        self.progress.load(Ordering::Relaxed)
    }

    pub fn evict(&self) {
        self.evicted.store(true, Ordering::Release);
    }
}

/// A connection's place in the registry of handshakes.
#[derive(Debug)]
pub struct HandshakeSlot {
    open: Arc<Open>,
    state: Arc<SlotState>,
}

impl HandshakeSlot {
    pub(super) fn new(open: Arc<Open>, state: Arc<SlotState>) -> HandshakeSlot {
        HandshakeSlot { open, state }
    }

    /// The connection received one more whole handshake message: it is
    /// no longer silent, and is evicted after those that made less
    /// progress.
    pub fn progressed(&self) {
        self.state.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the registry evicted it to make room for a newcomer: the
    /// connection must close.
    pub fn evicted(&self) -> bool {
        self.state.evicted.load(Ordering::Acquire)
    }
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        self.open.remove(&self.state);
    }
}
