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
use super::target::Target;
use crate::export::{Dispatch, Stream};

/// Accepts hosts on `listener` until `shutdown` completes.
pub async fn serve(
    target: Arc<Target>,
    listener: tokio::net::TcpListener,
    dispatch: Arc<dyn Dispatch>,
    shutdown: impl Future<Output = ()> + Send,
) {
    if let Ok(a) = listener.local_addr() {
        target.listening_at(a);
    }
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
        if target.max_connections != 0 && target.connections() >= target.max_connections {
            tracing::warn!(%peer, max = target.max_connections, "NVMe/TCP connection refused: the target is at its connection limit");
            continue;
        }
        let _ = sock.set_nodelay(true);
        let stream = match sock.into_std() {
            Ok(s) => Stream::Tcp(s),
            Err(e) => {
                tracing::warn!(%peer, "NVMe/TCP accept: {e}");
                continue;
            }
        };
        let core = target.next.fetch_add(1, Ordering::Relaxed) % dispatch.cores().max(1);
        let target = target.clone();
        let peer = peer.to_string();
        dispatch.run_on(
            core,
            Box::new(move || Connection::start(stream, peer, target)),
        );
    }
}
