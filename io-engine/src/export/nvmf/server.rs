//! The NVMe/TCP listeners: accept hosts and hand each connection (one
//! queue pair) to a reactor, round-robin, where it lives until it closes.
//!
//! Thread: the accept loops run on the control-plane runtime (tokio); each
//! accepted socket moves to its reactor in a message and never comes back.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::connection::Connection;
use super::listener::Listener;
use super::target::Target;
use crate::export::{Dispatch, Stream};

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
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => return,
            a = listener.accept() => a,
        };
        let (sock, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!("NVMe/TCP accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if let Err(why) = limits.admit() {
            target.counters.refused(why);
            tracing::warn!(%peer, listener = %limits.addr, "NVMe/TCP connection refused: {why}");
            continue;
        }
        let _ = sock.set_nodelay(true);
        let stream = match sock.into_std() {
            Ok(s) => Stream::Tcp(s),
            Err(e) => {
                tracing::warn!(%peer, "NVMe/TCP accept: {e}");
                limits.closed(false);
                continue;
            }
        };
        let core = target.next.fetch_add(1, Ordering::Relaxed) % dispatch.cores().max(1);
        let target = target.clone();
        let peer = peer.to_string();
        let limits = limits.clone();
        dispatch.run_on(
            core,
            Box::new(move || Connection::start(stream, peer, target, limits)),
        );
    }
}
