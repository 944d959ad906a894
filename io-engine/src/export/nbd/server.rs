//! NBD listeners: accept TCP and Unix-socket clients and hand each to a
//! reactor, round-robin, where it lives until it closes.
//!
//! Two bounds keep clients from locking each other out. Connections in
//! the handshake (accept until transmission) are at most
//! `max_handshakes`: a newcomer beyond takes the place of the one that
//! made the least progress, the oldest of those ([`Handshakes`]); and
//! each has `handshake_timeout` to reach transmission. Established
//! sessions are at most `max_connections`: beyond, `GO` is refused with
//! `ERR_POLICY` and the reason ([`SessionLimit`], the count read when
//! `GO` arrives).
//!
//! Thread: the accept loops run on the control-plane runtime (tokio); each
//! accepted socket moves to its reactor in a message and never comes back.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::stats::NbdCounters;
use super::{Connection, SessionLimit, TlsConfig};
use crate::export::{Dispatch, Exports, Handshakes, REFUSAL_LOG_INTERVAL, Stream};

/// What the accept loops share.
pub struct NbdServer {
    /// The exports.
    pub exports: Arc<Exports>,
    /// The counters.
    pub counters: Arc<NbdCounters>,
    /// Established sessions beyond which `GO` is refused (0: no limit).
    pub max_connections: usize,
    /// Longest a connection holds a ready reply back to send it with the
    /// others its client is waiting for (zero: never holds; see `conn`).
    pub reply_hold: Duration,
    /// Longest a connection may take from accept to transmission (zero:
    /// no limit).
    pub handshake_timeout: Duration,
    /// The connections in the handshake, bounded.
    pub handshakes: Arc<Handshakes>,
    /// What the option phase sees: the exports and the session limit.
    sessions: Arc<SessionLimit>,
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
    /// A server over `exports`; `max_handshakes` bounds the connections in
    /// the handshake (0: no limit).
    pub fn new(
        exports: Arc<Exports>,
        counters: Arc<NbdCounters>,
        max_connections: usize,
        reply_hold: Duration,
        handshake_timeout: Duration,
        max_handshakes: usize,
        tls: TlsConfig,
    ) -> Arc<Self> {
        let sessions = Arc::new(SessionLimit {
            exports: exports.clone(),
            counters: counters.clone(),
            max_connections,
        });
        Arc::new(NbdServer {
            sessions,
            exports,
            counters,
            max_connections,
            reply_hold,
            handshake_timeout,
            handshakes: Handshakes::new(max_handshakes),
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
        let mut flush = tokio::time::interval(REFUSAL_LOG_INTERVAL);
        loop {
            let accepted = tokio::select! {
                _ = &mut shutdown => return,
                a = accept(&listener) => a,
                _ = flush.tick() => {
                    self.log_unlogged();
                    continue;
                }
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("NBD accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let core = self.next.fetch_add(1, Ordering::Relaxed) % dispatch.cores().max(1);
            let (slot, evicted) = self.handshakes.admit(core);
            if let Some(victim) = evicted {
                // Its connection sees the flag at its reactor's next round:
                // wake that reactor (an adaptive one may be asleep).
                dispatch.run_on(victim, Box::new(|| {}));
            }
            let sessions = self.sessions.clone();
            let (timeout, hold) = (self.handshake_timeout, self.reply_hold);
            let tls = self.tls.clone();
            dispatch.run_on(
                core,
                Box::new(move || {
                    Connection::start(stream, peer, sessions, slot, timeout, hold, tls)
                }),
            );
        }
    }

    /// Logs the refusals whose lines were held back and whose interval is
    /// over (the end of a burst).
    fn log_unlogged(&self) {
        for (why, n) in self.counters.unlogged(Instant::now()) {
            tracing::warn!(
                reason = why.name(),
                "NBD: {n} more clients refused or cut short in the handshake since the last such line"
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
