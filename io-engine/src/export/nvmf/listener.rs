//! One NVMe/TCP listener's limits: the connections it has open, and those
//! of them that have not finished ICReq and Connect, each bounded, so that
//! one address (a node's pod network, say) cannot take every slot of
//! another, and sockets that never connect cannot keep hosts that do out
//! of a listener with room for them.
//!
//! Thread: any (atomics). Connections are admitted by the listener's
//! accept loop on the control-plane runtime (the only place that counts
//! up) and counted down by the connections on their reactors.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A listener's connection counts and limits.
#[derive(Debug)]
pub struct Listener {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Connections beyond which hosts are refused (0: no limit).
    max_connections: usize,
    /// Connections still in ICReq or Connect beyond which hosts are
    /// refused (0: no limit).
    max_connecting: usize,
    open: AtomicUsize,
    connecting: AtomicUsize,
}

/// Why a listener refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It has its most connections open.
    Connections(usize),
    /// It has its most connections that have not connected yet.
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

impl Listener {
    /// A listener at `addr` with its limits (0: none).
    pub fn new(addr: SocketAddr, max_connections: usize, max_connecting: usize) -> Listener {
        Listener {
            addr,
            max_connections,
            max_connecting,
            open: AtomicUsize::new(0),
            connecting: AtomicUsize::new(0),
        }
    }

    /// Counts a new connection in, or says why it is refused. Called by the
    /// accept loop only, so the check and the count cannot race another
    /// admission.
    pub fn admit(&self) -> Result<(), Refusal> {
        let over = |limit: usize, n: &AtomicUsize| limit != 0 && n.load(Ordering::Acquire) >= limit;
        if over(self.max_connections, &self.open) {
            return Err(Refusal::Connections(self.max_connections));
        }
        if over(self.max_connecting, &self.connecting) {
            return Err(Refusal::Connecting(self.max_connecting));
        }
        self.open.fetch_add(1, Ordering::AcqRel);
        self.connecting.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// A connection finished its Connect.
    pub fn connected(&self) {
        self.connecting.fetch_sub(1, Ordering::AcqRel);
    }

    /// A connection closed (`connected`: it had finished its Connect).
    pub fn closed(&self, connected: bool) {
        if !connected {
            self.connecting.fetch_sub(1, Ordering::AcqRel);
        }
        self.open.fetch_sub(1, Ordering::AcqRel);
    }

    /// Connections open, and of them those not connected yet.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.open.load(Ordering::Acquire),
            self.connecting.load(Ordering::Acquire),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_refuses_on_its_own_and_frees_on_close() {
        let l = Listener::new("127.0.0.1:4420".parse().unwrap(), 3, 2);
        assert_eq!((l.admit(), l.admit()), (Ok(()), Ok(())));
        assert_eq!(l.admit(), Err(Refusal::Connecting(2)));
        l.connected();
        l.connected();
        assert_eq!(l.admit(), Ok(()));
        assert_eq!(l.counts(), (3, 1));
        assert_eq!(l.admit(), Err(Refusal::Connections(3)));
        l.closed(false);
        l.closed(true);
        assert_eq!(l.counts(), (1, 0));
        assert_eq!(l.admit(), Ok(()));
        let unlimited = Listener::new("127.0.0.1:4420".parse().unwrap(), 0, 0);
        assert!((0..1000).all(|_| unlimited.admit().is_ok()));
    }
}
