//! NBD listeners: accept TCP and Unix-socket clients and hand each to a
//! reactor, round-robin, where it lives until it closes.
//!
//! Thread: the accept loops run on the control-plane runtime (tokio); each
//! accepted socket moves to its reactor in a message and never comes back.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::stats::NbdCounters;
use super::{Connection, TlsConfig};
use crate::export::{Dispatch, Exports, Stream};

/// What the accept loops share.
pub struct NbdServer {
    /// The exports.
    pub exports: Arc<Exports>,
    /// The counters.
    pub counters: Arc<NbdCounters>,
    /// Connections in total beyond which clients are refused (0: no limit).
    pub max_connections: usize,
    /// Longest a connection holds a ready reply back to send it with the
    /// others its client is waiting for (zero: never holds; see `conn`).
    pub reply_hold: Duration,
    /// TLS: whether `STARTTLS` is offered or required, and its setup.
    pub tls: TlsConfig,
    next: AtomicUsize,
}

/// An NBD listening socket.
pub enum Listener {
    /// TCP.
    Tcp(tokio::net::TcpListener),
    /// A Unix socket.
    Unix(tokio::net::UnixListener),
}

impl NbdServer {
    /// A server over `exports`.
    pub fn new(
        exports: Arc<Exports>,
        counters: Arc<NbdCounters>,
        max_connections: usize,
        reply_hold: Duration,
        tls: TlsConfig,
    ) -> Arc<Self> {
        Arc::new(NbdServer {
            exports,
            counters,
            max_connections,
            reply_hold,
            tls,
            next: AtomicUsize::new(0),
        })
    }

    /// Accepts clients on `listener` until `shutdown` completes.
    pub async fn serve(
        self: Arc<Self>,
        listener: Listener,
        dispatch: Arc<dyn Dispatch>,
        shutdown: impl Future<Output = ()> + Send,
    ) {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                _ = &mut shutdown => return,
                a = accept(&listener) => a,
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("NBD accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let open = self.counters.connections() as usize;
            // Past the limit the client still gets the handshake, so that
            // its GO fails with ERR_POLICY and this reason (the option
            // phase is cheap and the connection closes once it ends),
            // rather than a bare close. Past twice the limit it is closed
            // at once: a flood does not get a handshake each.
            let refuse = if self.max_connections != 0 && open >= self.max_connections {
                tracing::warn!(
                    %peer,
                    max = self.max_connections,
                    "NBD connection refused: the server is at its connection limit"
                );
                if open >= 2 * self.max_connections {
                    drop(stream);
                    continue;
                }
                Some(format!(
                    "the server is at its limit of {} NBD connections; try again later",
                    self.max_connections
                ))
            } else {
                None
            };
            let core = self.next.fetch_add(1, Ordering::Relaxed) % dispatch.cores().max(1);
            let (exports, counters) = (self.exports.clone(), self.counters.clone());
            let (hold, tls) = (self.reply_hold, self.tls.clone());
            dispatch.run_on(
                core,
                Box::new(move || {
                    Connection::start(stream, peer, exports, counters, refuse, hold, tls)
                }),
            );
        }
    }
}

async fn accept(l: &Listener) -> std::io::Result<(Stream, String)> {
    match l {
        Listener::Tcp(l) => {
            let (s, peer) = l.accept().await?;
            let _ = s.set_nodelay(true);
            Ok((Stream::Tcp(s.into_std()?), peer.to_string()))
        }
        Listener::Unix(l) => {
            let (s, _) = l.accept().await?;
            Ok((Stream::Unix(s.into_std()?), "unix".into()))
        }
    }
}
