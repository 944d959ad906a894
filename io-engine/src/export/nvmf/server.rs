//! The NVMe/TCP listeners: accept hosts and hand each connection (one
//! queue pair) to a reactor, round-robin, where it lives until it closes.
//!
//! Thread: the accept loops run on the control-plane runtime (tokio); each
//! accepted socket moves to its reactor in a message and never comes back.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::connection::Connection;
use super::listener::{Listener, Refusal};
use super::target::Target;
use crate::export::{Dispatch, REFUSAL_LOG_INTERVAL, RefusalLog, Stream};

/// Accepts hosts on `listener` until `shutdown` completes.
pub async fn serve(
    target: Arc<Target>,
    listener: tokio::net::TcpListener,
    dispatch: Arc<dyn Dispatch>,
    shutdown: impl Future<Output = ()> + Send,
) {
    let limits = match listener.local_addr() {
        Ok(a) => {
            target.listening_at(a);
            Arc::new(Listener::new(
                a,
                target.max_connections,
                target.max_connecting,
            ))
        }
        Err(e) => {
            tracing::warn!("NVMe/TCP listener has no address: {e}");
            return;
        }
    };
    tokio::pin!(shutdown);
    // Per reason: connections refused, connecting ones closed to make room.
    let logs = [(); 2].map(|_| RefusalLog::new(REFUSAL_LOG_INTERVAL));
    let [full_log, connecting_log] = &logs;
    let log_of = |why: Refusal| match why {
        Refusal::Connections(_) => full_log,
        Refusal::Connecting(_) => connecting_log,
    };
    let mut flush = tokio::time::interval(REFUSAL_LOG_INTERVAL);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => return,
            a = listener.accept() => a,
            _ = flush.tick() => {
                let now = Instant::now();
                for n in logs.iter().filter_map(|l| l.flush(now)) {
                    tracing::warn!(listener = %limits.addr, "NVMe/TCP: {n} more connections refused or closed to make room since the last such line");
                }
                for (event, n) in target.logs.flush(now) {
                    tracing::info!(listener = %limits.addr, "NVMe/TCP: {n} more {} since the last such line", event.summary());
                }
                continue;
            }
        };
        let (sock, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!("NVMe/TCP accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let core = target.next.fetch_add(1, Ordering::Relaxed) % dispatch.cores().max(1);
        let slot = match limits.admit(core) {
            Ok((slot, evicted)) => {
                if let Some(victim) = evicted {
                    // It sees its flag at its reactor's next round: wake
                    // that reactor (an adaptive one may be asleep).
                    dispatch.run_on(victim, Box::new(|| {}));
                    let why = Refusal::Connecting(limits.max_connecting());
                    target.counters.refused(why);
                    if let Some(n) = log_of(why).note(Instant::now()) {
                        tracing::warn!(%peer, listener = %limits.addr, unlogged = n, "NVMe/TCP connection not connected yet closed to make room, the oldest silent first: {why}");
                    }
                }
                slot
            }
            Err(why) => {
                target.counters.refused(why);
                if let Some(n) = log_of(why).note(Instant::now()) {
                    tracing::warn!(%peer, listener = %limits.addr, unlogged = n, "NVMe/TCP connection refused: {why}");
                }
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
        let stream = match sock.into_std() {
            Ok(s) => Stream::Tcp(s),
            Err(e) => {
                tracing::warn!(%peer, "NVMe/TCP accept: {e}");
                limits.closed();
                continue;
            }
        };
        let target = target.clone();
        let peer = peer.to_string();
        let limits = limits.clone();
        dispatch.run_on(
            core,
            Box::new(move || Connection::start(stream, peer, target, limits, slot)),
        );
    }
}
