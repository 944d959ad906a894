//! [`Poller`]: a function the reactor runs every round, and the
//! [`PollerHandle`] that keeps it registered.
//!
//! Thread: a reactor thread only; both are `!Send`.

use std::cell::Cell;
use std::rc::Rc;

use super::poll::Poll;

/// A registered poller, as the loop keeps it.
pub(super) struct Poller {
    pub(super) name: &'static str,
    /// Cleared when the handle drops or the poller panics.
    pub(super) live: Rc<Cell<bool>>,
    pub(super) f: Box<dyn FnMut() -> Poll>,
}

impl Poller {
    /// A live poller named `name` running `f`, and its handle.
    pub(super) fn new(
        name: &'static str,
        f: impl FnMut() -> Poll + 'static,
    ) -> (Poller, PollerHandle) {
        let live = Rc::new(Cell::new(true));
        let poller = Poller {
            name,
            live: live.clone(),
            f: Box::new(f),
        };
        (poller, PollerHandle { live, name })
    }
}

/// Keeps a poller registered; dropping it unregisters the poller (it stops
/// running from the next round on).
#[must_use = "dropping the handle unregisters the poller"]
pub struct PollerHandle {
    live: Rc<Cell<bool>>,
    name: &'static str,
}

impl PollerHandle {
    /// The poller's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl Drop for PollerHandle {
    fn drop(&mut self) {
        self.live.set(false);
    }
}
