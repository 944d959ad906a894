//! One NVMe/TCP listener's limits: the connections it has open, and those
//! of them that have not finished ICReq and Connect, each bounded, so that
//! one address (a node's pod network, say) cannot take every slot of
//! another, and sockets that never connect cannot keep hosts that do out
//! of a listener with room for them: over the second limit, the oldest
//! silent connection is closed to make room for the newcomer
//! ([`Handshakes`]).
//!
//! Thread: any (atomics; the registry of connecting ones takes its lock
//! once per connection). Connections are admitted by the listener's
//! accept loop on the control-plane runtime (the only place that counts
//! up) and counted down by the connections on their reactors.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::export::{HandshakeSlot, Handshakes};

/// A listener's connection counts and limits.
#[derive(Debug)]
pub struct Listener {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Connections beyond which hosts are refused (0: no limit).
    max_connections: usize,
    open: AtomicUsize,
    /// Its connections still in ICReq or Connect, at most
    /// `--nvmf-max-connecting` (0: no limit): beyond, the one that made
    /// the least progress, the oldest of those, is closed to make room.
    connecting: Arc<Handshakes>,
}

/// Why a listener refused a connection, or closed one to make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It has its most connections open.
    Connections(usize),
    /// It has its most connections that have not connected yet: the
    /// oldest silent one made room.
    Connecting(usize),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Connections(n) => write!(f, "the listener has its {n} connections open"),
            Refusal::Connecting(n) => write!(
                f,
                "the listener has {n} connections that have not finished ICReq and Connect"
            ),
        }
    }
}

/// A connection the listener took: its place among those not connected
/// yet, and the reactor of the one it evicted to make room, if any.
pub type Admitted = (HandshakeSlot, Option<usize>);

impl Listener {
    /// A listener at `addr` with its limits (0: none).
    pub fn new(addr: SocketAddr, max_connections: usize, max_connecting: usize) -> Listener {
        Listener {
            addr,
            max_connections,
            open: AtomicUsize::new(0),
            connecting: Handshakes::new(max_connecting),
        }
    }

    /// Counts a new connection for reactor `core` in, or says why it is
    /// refused. Over `max_connecting`, the newcomer is not refused: the
    /// connecting one with the least progress, the oldest, is evicted
    /// (the reactor returned must be woken for it to close). Called by the
    /// accept loop only, so the check and the count cannot race another
    /// admission.
    pub fn admit(&self, core: usize) -> Result<Admitted, Refusal> {
        let max = self.max_connections;
        if max != 0 && self.open.load(Ordering::Acquire) >= max {
            return Err(Refusal::Connections(max));
        }
        self.open.fetch_add(1, Ordering::AcqRel);
        Ok(self.connecting.admit(core))
    }

    /// The limit on connections not connected yet (0: none).
    pub fn max_connecting(&self) -> usize {
        self.connecting.limit()
    }

    /// A connection closed (its slot, if it still had one, goes with it).
    pub fn closed(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }

    /// Connections open, and of them those not connected yet.
    pub fn counts(&self) -> (usize, usize) {
        (self.open.load(Ordering::Acquire), self.connecting.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_limit_refuses_the_connecting_limit_evicts() {
        let l = Listener::new("127.0.0.1:4420".parse().unwrap(), 3, 2);
        let (a, ea) = l.admit(0).unwrap();
        let (b, eb) = l.admit(1).unwrap();
        assert_eq!((ea, eb), (None, None));
        // a sent its ICReq: b, silent, makes room.
        a.progressed();
        let (c, ec) = l.admit(0).unwrap();
        assert_eq!(ec, Some(1));
        assert!(b.evicted() && !a.evicted() && !c.evicted());
        assert_eq!(l.counts(), (3, 2));
        // Three open: the fourth is refused, connected or not.
        assert_eq!(l.admit(1).map(|_| ()), Err(Refusal::Connections(3)));
        // b closes; a and c connect.
        drop(b);
        l.closed();
        drop((a, c));
        assert_eq!(l.counts(), (2, 0));
        let (d, ed) = l.admit(1).unwrap();
        assert_eq!(ed, None);
        assert_eq!(l.counts(), (3, 1));
        drop(d);
        let unlimited = Listener::new("127.0.0.1:4420".parse().unwrap(), 0, 0);
        let all: Vec<_> = (0..1000).map(|i| unlimited.admit(i)).collect();
        assert!(all.iter().all(|a| matches!(a, Ok((_, None)))));
    }
}
