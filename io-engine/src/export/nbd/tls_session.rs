//! One connection's TLS session after `STARTTLS`, driven on the reactor
//! like the plain connection: no thread, no async runtime. rustls is
//! used sans-IO: the connection reads the socket into [`TlsSession`]'s
//! ciphertext buffer (one `read` of up to [`READ_CHUNK`] bytes), which
//! rustls decrypts record by record into the connection's input; its
//! output goes through [`TlsSink`], which encrypts into TLS records (up
//! to 16 KiB each, straight from the IO buffers of READ replies) and
//! writes them with vectored writes, holding what the socket does not
//! take until it is writable again.
//!
//! The bytes the server queued before the session started (the
//! `STARTTLS` acknowledgement, in the clear) go out first.
//!
//! Thread: the connection's reactor.

use std::io::{self, BufRead, IoSlice, Write};
use std::sync::Arc;

use rustls::{ServerConfig, ServerConnection};

use super::tls_config::TLS_BUFFER_LIMIT;
use crate::export::{Sink, Stream};

/// Bytes read from the socket per read call.
const READ_CHUNK: usize = 256 << 10;

/// How a read of the socket went.
pub(super) enum TlsRead {
    /// The client may send more (plaintext, if any, is in the input).
    Open,
    /// The client closed (with or without `close_notify`).
    Closed,
    /// The TLS session failed (a bad record, a handshake the server
    /// refuses, an unverified client certificate): an alert may be
    /// waiting to be written, then the connection closes.
    Failed(rustls::Error),
}

/// One connection's TLS session.
pub(super) struct TlsSession {
    conn: ServerConnection,
    /// Bytes to send in the clear before any record, and how many went.
    clear: Vec<u8>,
    clear_sent: usize,
    /// Ciphertext read from the socket.
    cipher: Vec<u8>,
    /// Whether the handshake's end has been logged.
    established: bool,
}

impl TlsSession {
    /// A session with `config`, after `clear` is sent as it is.
    pub fn new(config: Arc<ServerConfig>, clear: Vec<u8>) -> Result<TlsSession, rustls::Error> {
        let mut conn = ServerConnection::new(config)?;
        conn.set_buffer_limit(Some(TLS_BUFFER_LIMIT));
        Ok(TlsSession {
            conn,
            clear,
            clear_sent: 0,
            cipher: Vec::new(),
            established: false,
        })
    }

    /// Reads what the socket has and appends the plaintext in it to
    /// `input`.
    pub fn read(&mut self, sock: &Stream, input: &mut Vec<u8>, peer: &str) -> TlsRead {
        self.cipher.clear();
        self.cipher.reserve(READ_CHUNK);
        match rustix::io::read(sock, rustix::buffer::spare_capacity(&mut self.cipher)) {
            Ok(0) => return TlsRead::Closed,
            Ok(_) => {}
            Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => return TlsRead::Open,
            Err(_) => return TlsRead::Closed,
        }
        // The read appended what it read to the emptied buffer.
        let mut rest = self.cipher.as_slice();
        while !rest.is_empty() {
            if let Err(e) = self.conn.read_tls(&mut rest) {
                // Only "plaintext buffer full", which draining below prevents.
                tracing::debug!(peer, "NBD TLS read: {e}");
                return TlsRead::Closed;
            }
            if let Err(e) = self.conn.process_new_packets() {
                return TlsRead::Failed(e);
            }
            if !drain(&mut self.conn, input) {
                return TlsRead::Closed;
            }
        }
        if !self.established && !self.conn.is_handshaking() {
            self.established = true;
            tracing::debug!(
                peer,
                version = ?self.conn.protocol_version(),
                suite = ?self.conn.negotiated_cipher_suite().map(|s| s.suite()),
                client_certificate = self.conn.peer_certificates().is_some(),
                "NBD TLS session"
            );
        }
        TlsRead::Open
    }

    /// Whether bytes wait for the socket.
    pub fn holds(&self) -> bool {
        self.clear_sent < self.clear.len() || self.conn.wants_write()
    }

    /// The sink the connection's output goes through.
    pub fn sink<'a>(&'a mut self, sock: &'a Stream) -> TlsSink<'a> {
        TlsSink { tls: self, sock }
    }

    /// Ends the session with `close_notify`, sent as far as the socket
    /// takes it now (the connection is closing: nothing waits for more).
    pub fn close(&mut self, sock: &Stream) {
        self.conn.send_close_notify();
        let _ = self.push(sock);
    }

    /// Writes what it holds: the clear bytes, then the records.
    fn push(&mut self, sock: &Stream) -> io::Result<()> {
        while let Some(unsent) = self.clear.get(self.clear_sent..).filter(|u| !u.is_empty()) {
            self.clear_sent += rustix::io::write(sock, unsent)?;
        }
        while self.conn.wants_write() {
            if self.conn.write_tls(&mut SocketWriter(sock))? == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }
}

/// Moves the plaintext `conn` decrypted to `input`; false once the client
/// sent `close_notify`.
fn drain(conn: &mut ServerConnection, input: &mut Vec<u8>) -> bool {
    let mut reader = conn.reader();
    loop {
        match reader.fill_buf() {
            Ok([]) => return false,
            Ok(buf) => {
                let k = buf.len();
                input.extend_from_slice(buf);
                reader.consume(k);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}

/// The socket as rustls writes records to it (vectored: many records in
/// one `writev`).
struct SocketWriter<'a>(&'a Stream);

impl Write for SocketWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.0.write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A connection's output, encrypted on its way to the socket.
pub(super) struct TlsSink<'a> {
    tls: &'a mut TlsSession,
    sock: &'a Stream,
}

impl Sink for TlsSink<'_> {
    /// Writes what the session holds first (`WouldBlock` if the socket
    /// does not take it all), then encrypts as much of `bufs` as the
    /// session buffers and writes what the socket takes of it.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.tls.push(self.sock)?;
        if bufs.is_empty() {
            return Ok(0);
        }
        let n = self.tls.conn.writer().write_vectored(bufs)?;
        match self.tls.push(self.sock) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }

    fn holds(&self) -> bool {
        self.tls.holds()
    }
}
