//! [`PlaintextRefusal`]: what the gRPC port says, in plaintext HTTP/2, to a
//! client that speaks plaintext gRPC to it while it serves TLS only: every
//! request it sends gets a trailers-only gRPC response, status UNAVAILABLE
//! and a message that says to connect over TLS, then the connection
//! closes. Without it the client saw its bytes fail the TLS handshake and
//! reported `UNKNOWN: transport error` or a reset.
//!
//! The peer is nobody the engine knows, so it gets little: the HTTP/2
//! comes from `h2` (tonic's), with small limits on what it may send
//! (header lists of [`MAX_HEADER_LIST`], [`MAX_STREAMS`] requests), the
//! whole exchange ends after [`PLAINTEXT_TIMEOUT`], and at most as many
//! such peers are answered at once as the engine serves requests at once
//! (`--grpc-max-concurrent-requests`); one more is closed unanswered. Its
//! bytes are parsed by `h2` only; a malformed preface or frame ends the
//! connection.
//!
//! Thread: the control-plane runtime, one task per connection (the task
//! `tls_incoming` sorted it on).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;
use tonic::codegen::http::{HeaderValue, Response};

/// How the refusal's message starts; `io-engine-ctl` recognises it.
pub const TLS_ONLY: &str = "this engine serves gRPC over TLS only";

/// Longest a plaintext peer is talked to, from its first byte.
pub const PLAINTEXT_TIMEOUT: Duration = Duration::from_secs(2);

/// Requests answered on one connection before it is closed.
const MAX_STREAMS: u32 = 4;

/// Largest header list a plaintext peer may send, in bytes.
const MAX_HEADER_LIST: u32 = 16 << 10;

/// `grpc-status` UNAVAILABLE: the server is not there for this client.
const UNAVAILABLE: &str = "14";

/// The refusal: its message, and the bound on peers answered at once.
#[derive(Debug)]
pub struct PlaintextRefusal {
    message: HeaderValue,
    answering: Arc<Semaphore>,
}

impl PlaintextRefusal {
    /// The refusal of a listener whose TLS asks for a client certificate
    /// when `mutual`, answering at most `max_at_once` peers at once.
    pub fn new(mutual: bool, max_at_once: usize) -> Self {
        let client_cert = if mutual {
            " and a client certificate its client CA signed (--tls-cert FILE --tls-key FILE)"
        } else {
            ""
        };
        let message = format!(
            "{TLS_ONLY}: connect with https:// and the CA that signed its certificate \
             (io-engine-ctl --endpoint https://HOST:PORT --tls-ca FILE){client_cert}"
        );
        PlaintextRefusal {
            // ASCII without `%`: a valid grpc-message as it is (gRPC
            // percent-encodes the rest).
            message: HeaderValue::from_str(&message).unwrap_or(HeaderValue::from_static(TLS_ONLY)),
            answering: Arc::new(Semaphore::new(max_at_once)),
        }
    }

    /// The message the peer gets.
    #[cfg(test)]
    fn message(&self) -> &str {
        self.message.to_str().unwrap_or(TLS_ONLY)
    }

    /// Answers the peer on `io`, whose first byte was the `P` of HTTP/2's
    /// preface, then closes it; gives up after [`PLAINTEXT_TIMEOUT`], or at
    /// once when as many peers are being answered as the bound allows.
    pub async fn answer<T>(&self, io: T)
    where
        T: AsyncRead + AsyncWrite + Unpin,
    {
        let Ok(_place) = self.answering.clone().try_acquire_owned() else {
            tracing::debug!("plaintext gRPC client on the TLS port: closed, too many at once");
            return;
        };
        match tokio::time::timeout(PLAINTEXT_TIMEOUT, self.exchange(io)).await {
            Ok(Ok(answered)) => {
                tracing::debug!(
                    answered,
                    "plaintext gRPC client on the TLS port: told to use TLS"
                )
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "plaintext peer on the gRPC TLS port"),
            Err(_) => tracing::debug!("plaintext peer on the gRPC TLS port: timed out"),
        }
    }

    /// The HTTP/2 exchange: each request gets the refusal, the first one
    /// starts a graceful close (GOAWAY). Returns the requests answered.
    async fn exchange<T>(&self, io: T) -> Result<u32, h2::Error>
    where
        T: AsyncRead + AsyncWrite + Unpin,
    {
        let mut conn = h2::server::Builder::new()
            .max_concurrent_streams(MAX_STREAMS)
            .max_header_list_size(MAX_HEADER_LIST)
            .handshake::<_, tonic::codegen::Bytes>(io)
            .await?;
        let mut answered = 0;
        while let Some(request) = conn.accept().await {
            let (_request, mut respond) = request?;
            let mut response = Response::new(());
            let headers = response.headers_mut();
            headers.insert("content-type", HeaderValue::from_static("application/grpc"));
            headers.insert("grpc-status", HeaderValue::from_static(UNAVAILABLE));
            headers.insert("grpc-message", self.message.clone());
            // Trailers-only: the headers end the stream.
            respond.send_response(response, true)?;
            answered += 1;
            if answered == 1 {
                conn.graceful_shutdown();
            }
            if answered == MAX_STREAMS {
                break;
            }
        }
        // Send what is left (the GOAWAY) and wait for the peer to go.
        std::future::poll_fn(|cx| conn.poll_closed(cx)).await?;
        Ok(answered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_says_how_to_connect() {
        let one_way = PlaintextRefusal::new(false, 1);
        assert!(one_way.message().starts_with(TLS_ONLY));
        assert!(one_way.message().contains("https://"));
        assert!(one_way.message().contains("--tls-ca"));
        assert!(!one_way.message().contains("--tls-cert"));
        let mutual = PlaintextRefusal::new(true, 1);
        assert!(mutual.message().contains("--tls-cert FILE --tls-key FILE"));
        // A grpc-message needs no percent-encoding when it is printable
        // ASCII without `%`.
        assert!(
            mutual
                .message()
                .bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b'%')
        );
        assert!(mutual.message().len() < crate::control::MAX_MESSAGE);
    }

    /// An HTTP/2 client's gRPC request gets the trailers-only refusal, and
    /// the connection is closed after it (GOAWAY).
    #[tokio::test]
    async fn a_request_gets_unavailable_and_the_connection_closes() {
        let refusal = PlaintextRefusal::new(true, 1);
        let (client_io, server_io) = tokio::io::duplex(64 << 10);
        let server = tokio::spawn(async move { refusal.answer(server_io).await });
        let (mut client, conn) = h2::client::handshake(client_io).await.unwrap();
        let conn = tokio::spawn(conn);
        let request = tonic::codegen::http::Request::post("/io_engine.v1.EngineService/GetInfo")
            .header("content-type", "application/grpc")
            .body(())
            .unwrap();
        let (response, _body) = client.send_request(request, true).unwrap();
        let response = response.await.unwrap();
        let headers = response.headers();
        assert_eq!(headers["grpc-status"], "14");
        let message = headers["grpc-message"].to_str().unwrap();
        assert!(message.starts_with(TLS_ONLY), "{message}");
        assert!(response.into_body().is_end_stream(), "trailers-only");
        drop(client);
        // The server is done well before its timeout, and so is the
        // client's connection.
        tokio::time::timeout(Duration::from_secs(1), server)
            .await
            .unwrap()
            .unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(1), conn)
            .await
            .unwrap();
    }

    /// Beyond the bound a peer is closed without a byte, and bytes that are
    /// not HTTP/2 end the exchange at once.
    #[tokio::test]
    async fn over_the_bound_and_garbage_are_closed() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let refusal = Arc::new(PlaintextRefusal::new(false, 1));
        let place = refusal.answering.clone().try_acquire_owned().unwrap();
        let (mut client, server_io) = tokio::io::duplex(1024);
        refusal.answer(server_io).await;
        let mut buf = Vec::new();
        assert_eq!(client.read_to_end(&mut buf).await.unwrap(), 0);
        drop(place);

        let (mut client, server_io) = tokio::io::duplex(1024);
        client
            .write_all(b"PRI * HTTP/1.1\r\n\r\nnot h2 at all")
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(1), refusal.answer(server_io))
            .await
            .unwrap();
    }
}
