//! Connections accepted and not yet established (an NBD connection before
//! its transmission phase, an NVMe/TCP one before its Connect), bounded
//! apart from the established ones so that sockets that never finish a
//! handshake cannot lock clients that do out. When the bound is reached,
//! a newcomer is not refused: the connection that made the least progress
//! (the silent ones first: nothing whole received since accept), the
//! oldest of those, is told to close and the newcomer takes its place.
//!
//! Thread: any. The accept loop admits (on the control-plane runtime); the
//! connections, on their reactors, report progress (an atomic) and leave
//! the registry once, when established or closed (one short lock; never
//! on the data path after that). An evicted connection sees its flag at
//! its reactor's next round: the accept loop wakes that reactor.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::handshake_slot::{HandshakeSlot, Open, SlotState};

/// The connections in their handshake, in accept order.
#[derive(Debug)]
pub struct Handshakes {
    /// Most connections in the handshake (0: no limit).
    limit: usize,
    open: Arc<Open>,
}

impl Handshakes {
    /// A registry of at most `limit` connections (0: no limit).
    pub fn new(limit: usize) -> Arc<Handshakes> {
        Arc::new(Handshakes {
            limit,
            open: Arc::default(),
        })
    }

    /// The limit (0: none).
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Connections in the handshake now (evicted ones no longer count).
    pub fn len(&self) -> usize {
        self.open.len.load(Ordering::Relaxed)
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts in a connection accepted for reactor `core`. When the
    /// registry is full, the connection with the least progress, the
    /// oldest of those, is evicted to make room: its flag is set and the
    /// reactor it lives on is returned, to be woken so that it closes.
    pub fn admit(&self, core: usize) -> (HandshakeSlot, Option<usize>) {
        let state = Arc::new(SlotState::new(core));
        let mut open = self.open.list.lock().unwrap_or_else(|e| e.into_inner());
        let evicted = if self.limit != 0 && open.len() >= self.limit {
            // `min_by_key` keeps the first of equals: the oldest.
            let victim = open
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.progress())
                .map(|(i, _)| i);
            victim.map(|i| {
                let s = open.remove(i);
                s.evict();
                s.core
            })
        } else {
            None
        };
        open.push(state.clone());
        self.open.len.store(open.len(), Ordering::Relaxed);
        drop(open);
        (HandshakeSlot::new(self.open.clone(), state), evicted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_registry_evicts_the_oldest_silent_connection() {
        let h = Handshakes::new(3);
        let (a, ea) = h.admit(0);
        let (b, eb) = h.admit(1);
        let (c, ec) = h.admit(2);
        assert_eq!((ea, eb, ec, h.len()), (None, None, None, 3));
        // `a` made progress: `b` is the oldest silent one.
        a.progressed();
        let (d, ed) = h.admit(0);
        assert_eq!(ed, Some(1), "b's reactor is woken");
        assert!(b.evicted() && !a.evicted() && !c.evicted() && !d.evicted());
        assert_eq!(h.len(), 3);
        // Dropping the evicted slot frees nothing more.
        drop(b);
        assert_eq!(h.len(), 3);
        // Next silent: c, then d, then the one that made progress.
        let (_e, ee) = h.admit(1);
        assert_eq!(ee, Some(2));
        assert!(c.evicted());
        // d is silent, then e; a made progress.
        let (_f, ef) = h.admit(1);
        assert_eq!(ef, Some(0));
        assert!(d.evicted() && !a.evicted());
        d.progressed(); // too late: it is out
        assert_eq!(h.len(), 3);
    }

    #[test]
    fn least_progress_goes_first_and_leaving_frees_the_place() {
        let h = Handshakes::new(2);
        let (a, _) = h.admit(0);
        let (b, _) = h.admit(1);
        a.progressed();
        a.progressed();
        b.progressed();
        let (c, e) = h.admit(2);
        assert_eq!(e, Some(1), "b made less progress than a");
        assert!(b.evicted() && !a.evicted());
        // An established connection leaves: room for one more, no eviction.
        drop(a);
        assert_eq!(h.len(), 1);
        let (_d, e) = h.admit(0);
        assert_eq!(e, None);
        assert!(!c.evicted());
        drop(c);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn no_limit_never_evicts() {
        let h = Handshakes::new(0);
        let slots: Vec<_> = (0..1000).map(|i| h.admit(i % 4)).collect();
        assert!(slots.iter().all(|(s, e)| e.is_none() && !s.evicted()));
        assert_eq!(h.len(), 1000);
        drop(slots);
        assert!(h.is_empty());
    }
}
