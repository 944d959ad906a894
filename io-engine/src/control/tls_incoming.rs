//! [`TlsIncoming`]: the connections of the gRPC port when it serves TLS, as
//! the stream tonic's `serve_with_incoming` takes. The server accepts and
//! handshakes itself (tonic's own TLS gives no hook to look at a
//! connection first) so that each connection is sorted by its first byte:
//!
//! - `0x16`, a TLS handshake record: handshaken with the listener's rustls
//!   configuration (`GrpcTls`) within [`HANDSHAKE_TIMEOUT`] of the accept,
//!   then served by tonic;
//! - `P`, the start of HTTP/2's client preface (`PRI * HTTP/2.0`): a
//!   plaintext gRPC client, told in plaintext HTTP/2 to use TLS
//!   ([`PlaintextRefusal`]) and closed;
//! - anything else, or nothing within the handshake timeout: closed.
//!
//! The first byte is peeked, not read, so the TLS handshake sees the whole
//! stream. Handshakes run one task each; a connection that never
//! completes one goes at the timeout, and at most [`MAX_HANDSHAKES`] are in
//! progress: a newcomer beyond takes the place of the oldest, which is
//! closed, so that a flood of silent connections holds a bounded number of
//! descriptors and cannot keep a real client from being heard (it has the
//! time the flood takes to open `MAX_HANDSHAKES` more).
//!
//! Thread: the control-plane runtime: tonic's accept loop polls the
//! stream; the sorting and handshakes run as tasks of a `JoinSet` the
//! stream owns (dropped, with their connections, when the server stops).

use std::collections::VecDeque;
use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::Stream;

use super::grpc_tls::HANDSHAKE_TIMEOUT;
use super::plaintext_refusal::PlaintextRefusal;

/// The first byte of a TLS handshake record (a ClientHello).
const TLS_HANDSHAKE: u8 = 0x16;

/// The first byte of HTTP/2's client preface, `PRI * HTTP/2.0\r\n...`.
const HTTP2_PREFACE: u8 = b'P';

/// Connections sorted or handshaken at once; a newcomer beyond closes the
/// oldest.
pub(super) const MAX_HANDSHAKES: usize = 256;

/// How long accepting pauses after an error that is not one connection's
/// (no file descriptors left): a retry at once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How a connection is sorted and handshaken.
struct Sorter {
    acceptor: TlsAcceptor,
    refusal: PlaintextRefusal,
}

/// The TLS connections of a listener, handshaken, for tonic.
pub struct TlsIncoming {
    listener: TcpListener,
    sorter: Arc<Sorter>,
    handshakes: JoinSet<Option<TlsStream<TcpStream>>>,
    /// The handshakes in progress, oldest first.
    in_progress: VecDeque<AbortHandle>,
    backoff: Option<Pin<Box<Sleep>>>,
}

impl TlsIncoming {
    /// The connections of `listener`, handshaken with `acceptor`; plaintext
    /// gRPC clients get `refusal`.
    pub fn new(listener: TcpListener, acceptor: TlsAcceptor, refusal: PlaintextRefusal) -> Self {
        TlsIncoming {
            listener,
            sorter: Arc::new(Sorter { acceptor, refusal }),
            handshakes: JoinSet::new(),
            in_progress: VecDeque::new(),
            backoff: None,
        }
    }
}

impl Sorter {
    /// Sorts `stream` by its first byte; returns it handshaken if it is a
    /// TLS client's (see the module's comment).
    async fn sort(self: Arc<Self>, stream: TcpStream) -> Option<TlsStream<TcpStream>> {
        let handshake = async {
            let mut first = [0u8; 1];
            if stream.peek(&mut first).await.ok()? == 0 {
                return None;
            }
            match first[0] {
                TLS_HANDSHAKE => match self.acceptor.accept(stream).await {
                    Ok(tls) => Some(Ok(tls)),
                    Err(e) => {
                        tracing::debug!(error = %e, "gRPC TLS handshake failed");
                        None
                    }
                },
                HTTP2_PREFACE => Some(Err(stream)),
                _ => None,
            }
        };
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
            Ok(Some(Ok(tls))) => Some(tls),
            Ok(Some(Err(plaintext))) => {
                self.refusal.answer(plaintext).await;
                None
            }
            Ok(None) => None,
            Err(_) => {
                tracing::debug!("gRPC TLS handshake timed out");
                None
            }
        }
    }
}

impl Stream for TlsIncoming {
    type Item = io::Result<TlsStream<TcpStream>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(backoff) = &mut this.backoff
            && backoff.as_mut().poll(cx).is_ready()
        {
            this.backoff = None;
        }
        // Every connection waiting gets its task.
        while this.backoff.is_none() {
            match this.listener.poll_accept(cx) {
                Poll::Ready(Ok((stream, _))) => {
                    if this.in_progress.len() >= MAX_HANDSHAKES
                        && let Some(oldest) = this.in_progress.pop_front()
                    {
                        tracing::debug!(
                            "gRPC: {MAX_HANDSHAKES} handshakes in progress; the oldest is closed"
                        );
                        oldest.abort();
                    }
                    let handle = this.handshakes.spawn(this.sorter.clone().sort(stream));
                    this.in_progress.push_back(handle);
                }
                Poll::Ready(Err(e)) if one_connections(&e) => {
                    tracing::debug!(error = %e, "gRPC accept");
                }
                Poll::Ready(Err(e)) => {
                    tracing::warn!(error = %e, "gRPC accept failed; retrying in {ACCEPT_BACKOFF:?}");
                    let mut sleep = Box::pin(tokio::time::sleep(ACCEPT_BACKOFF));
                    // Registers the waker: the stream is polled again then.
                    let _ = sleep.as_mut().poll(cx);
                    this.backoff = Some(sleep);
                }
                Poll::Pending => break,
            }
        }
        loop {
            let (id, tls) = match this.handshakes.poll_join_next_with_id(cx) {
                Poll::Ready(Some(Ok((id, tls)))) => (id, tls),
                // Aborted (a newcomer took its place) or (never) panicked.
                Poll::Ready(Some(Err(e))) => (e.id(), None),
                // No handshake in progress: the listener's waker is set.
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            };
            this.in_progress.retain(|h| h.id() != id);
            if let Some(tls) = tls {
                return Poll::Ready(Some(Ok(tls)));
            }
        }
    }
}

/// Whether an accept error is one connection's (gone before it was
/// accepted) rather than the listener's.
fn one_connections(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
            | io::ErrorKind::TimedOut
    )
}
