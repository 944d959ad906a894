//! What a connection has to send: reply headers and small replies as
//! bytes, READ data as the IO buffers themselves, all in reply order, sent
//! with vectored writes, so READ data is never copied; and its flushing
//! (writes until the socket is full, the socket's write interest on while
//! output waits), the same for every protocol. It writes to a [`Sink`]:
//! the socket, or an NBD connection's TLS session, which encrypts the
//! pieces into records (READ data read once, from the IO buffer, by the
//! cipher) and may hold records the socket did not take.
//!
//! Thread: the connection's reactor (`!Send`: it holds IO buffers of the
//! connection's pools).

use std::collections::VecDeque;
use std::io::{self, IoSlice};

use super::{Flushed, Sink, Stream};
use crate::pool::IoBuf;
use crate::reactor::{FdRegistration, Interest};

/// Most pieces given to one `writev` (well under `IOV_MAX`).
const MAX_IOVECS: usize = 64;
/// Bytes sent, and at least half of those held, past which the sent ones
/// are dropped from the front (else a client that never reads all of its
/// output would make the bytes held grow without bound).
const COMPACT_AT: usize = 64 << 10;

/// An IO buffer to send whole (`len` bytes), after the first `at` bytes of
/// [`Output::bytes`].
struct Data {
    at: usize,
    buf: IoBuf,
    len: usize,
}

/// The bytes waiting for the client, in order: `bytes` with the buffers of
/// `data` spliced in at their positions. A buffer goes back to its pool
/// once it has been sent whole.
pub(in crate::export) struct Output {
    bytes: Vec<u8>,
    data: VecDeque<Data>,
    /// Bytes of `bytes` sent.
    sent: usize,
    /// Bytes of the first buffer of `data` sent (while `sent` is at it).
    data_sent: usize,
    /// Bytes of the buffers of `data`, whole.
    data_len: usize,
    /// Whether the connection takes input: the socket's read interest is
    /// on (see [`set_reading`](Self::set_reading)).
    reading: bool,
    /// The interest last set on the socket's registration (write: output
    /// was left at the last flush).
    applied: Interest,
}

impl Output {
    pub(in crate::export) fn with_capacity(n: usize) -> Output {
        Output {
            bytes: Vec::with_capacity(n),
            data: VecDeque::new(),
            sent: 0,
            data_sent: 0,
            data_len: 0,
            reading: true,
            applied: Interest::READ,
        }
    }

    /// Where replies are encoded: appended after everything queued.
    #[inline]
    pub(in crate::export) fn bytes(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Queues the first `len` bytes of `buf`, after everything queued.
    #[inline]
    pub(in crate::export) fn push_data(&mut self, buf: IoBuf, len: usize) {
        debug_assert!(len <= buf.len());
        self.data_len += len;
        self.data.push_back(Data {
            at: self.bytes.len(),
            buf,
            len,
        });
    }

    /// Bytes not yet sent.
    #[inline]
    pub(in crate::export) fn len(&self) -> usize {
        self.bytes.len() - self.sent + self.data_len - self.data_sent
    }

    /// Whether everything is sent.
    #[inline]
    pub(in crate::export) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of heap it holds for the client (its encoded replies, the
    /// queue of buffers; not the buffers, which are their pools').
    pub(in crate::export) fn heap_bytes(&self) -> usize {
        self.bytes.capacity() + self.data.capacity() * std::mem::size_of::<Data>()
    }

    /// Whether a write stopped part way through what is queued.
    #[inline]
    pub(in crate::export) fn started(&self) -> bool {
        self.sent > 0 || self.data_sent > 0
    }

    /// Whether it holds IO buffers.
    #[inline]
    pub(in crate::export) fn holds_buffers(&self) -> bool {
        !self.data.is_empty()
    }

    /// Drops everything (the client is gone); the buffers go back.
    pub(in crate::export) fn clear(&mut self) {
        self.bytes.clear();
        self.data.clear();
        self.sent = 0;
        self.data_sent = 0;
        self.data_len = 0;
    }

    /// Writes what `sock` takes, until it would block; a write error (the
    /// client is gone) drops what it will never read. Then turns the
    /// write interest of `sock`'s registration `reg` on while output is
    /// left, off once it is all sent.
    pub(in crate::export) fn flush(
        &mut self,
        sock: &Stream,
        reg: Option<&FdRegistration>,
    ) -> Flushed {
        self.flush_to(&mut &*sock, reg)
    }

    /// [`flush`](Self::flush) through `sink`, which may hold bytes it
    /// took (TLS records): the write interest stays on while it does.
    pub(in crate::export) fn flush_to<S: Sink>(
        &mut self,
        sink: &mut S,
        reg: Option<&FdRegistration>,
    ) -> Flushed {
        let held = self.holds_buffers();
        let mut wrote = false;
        let mut gone = false;
        while !self.is_empty() || sink.holds() {
            match self.write_to(sink) {
                Ok(0) => break,
                Ok(_) => wrote = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.clear();
                    gone = true;
                    break;
                }
            }
        }
        let write = !self.is_empty() || sink.holds();
        self.apply(write, reg);
        Flushed {
            wrote,
            gone,
            released: held && !self.holds_buffers(),
        }
    }

    /// Turns the socket's read interest on or off (`reading`: whether the
    /// connection takes input now; off while it takes none, so a
    /// level-triggered readable socket does not keep the reactor awake).
    pub(in crate::export) fn set_reading(&mut self, reading: bool, reg: Option<&FdRegistration>) {
        self.reading = reading;
        self.apply(self.applied.write, reg);
    }

    /// Sets the registration's interest to reading and `write`, if it is
    /// not that already.
    fn apply(&mut self, write: bool, reg: Option<&FdRegistration>) {
        let want = Interest {
            read: self.reading,
            write,
        };
        if want != self.applied {
            self.applied = want;
            if let Some(r) = reg {
                let _ = r.set_interest(want);
            }
        }
    }

    /// One vectored write of as much as the socket takes; returns the
    /// bytes written.
    pub(in crate::export) fn write_to<S: Sink>(&mut self, sock: &mut S) -> io::Result<usize> {
        let mut iov: [IoSlice<'_>; MAX_IOVECS] = [IoSlice::new(&[]); MAX_IOVECS];
        let mut n = 0;
        for (slot, piece) in iov.iter_mut().zip(self.pieces()) {
            *slot = IoSlice::new(piece);
            n += 1;
        }
        let written = sock.write_vectored(iov.get(..n).unwrap_or_default())?;
        self.advance(written);
        Ok(written)
    }

    /// What is left to send, in order: runs of `bytes` and the buffers
    /// spliced between them, none empty. Any number of its first pieces is
    /// a prefix of the output. It would end at a piece out of bounds
    /// (never: a buffer's `at` is within `bytes` and not before `sent`,
    /// its `len` within it).
    fn pieces(&self) -> impl Iterator<Item = &[u8]> {
        let mut pos = self.sent;
        let tail = self.data.back().map_or(self.sent, |d| d.at);
        self.data
            .iter()
            .enumerate()
            .flat_map(move |(i, d)| {
                let before = self.bytes.get(pos..d.at);
                pos = d.at;
                let from = if i == 0 { self.data_sent } else { 0 };
                [before, d.buf.as_slice().get(from..d.len)]
            })
            .chain([self.bytes.get(tail..)])
            .map_while(|piece| piece)
            .filter(|piece| !piece.is_empty())
    }

    /// Marks `n` more bytes sent; buffers sent whole go back.
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let Some(d) = self.data.front() else {
                self.sent += n.min(self.bytes.len() - self.sent);
                break;
            };
            if self.sent < d.at {
                let k = n.min(d.at - self.sent);
                self.sent += k;
                n -= k;
                continue;
            }
            let len = d.len;
            let k = n.min(len - self.data_sent);
            self.data_sent += k;
            n -= k;
            if self.data_sent == len {
                self.data_sent = 0;
                self.data_len -= len;
                self.data.pop_front();
            }
        }
        if self.is_empty() {
            self.clear();
        } else if self.sent >= COMPACT_AT && 2 * self.sent >= self.bytes.len() {
            // A client that reads, but never all of it: what it read goes,
            // so the bytes held stay those it has yet to read.
            self.bytes.drain(..self.sent);
            for d in &mut self.data {
                d.at -= self.sent;
            }
            self.sent = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    use super::*;
    use crate::pool::{BufPool, PoolConfig};

    /// Replies of a header and 1 MiB of data each, larger than the socket
    /// takes at once: every write stops part way, in a header or in a
    /// buffer, and the reader still gets every byte in order.
    #[test]
    fn partial_writes_keep_the_order_and_return_each_buffer_once_sent() {
        const LEN: usize = 1 << 20;
        let pool = BufPool::new(PoolConfig::new("output-test", 3, 1).cache_size(0), LEN).unwrap();
        let (a, mut b) = UnixStream::pair().unwrap();
        let sock = Stream::Unix(a);
        sock.set_nonblocking().unwrap();
        let mut out = Output::with_capacity(64);
        let mut want = Vec::new();
        for i in 0..3u8 {
            let mut buf = pool.get().unwrap();
            buf.as_mut_slice().fill(i + 1);
            let len = LEN - 512 * i as usize;
            out.bytes().extend_from_slice(&[0xa0 + i; 16]);
            want.extend_from_slice(&[0xa0 + i; 16]);
            out.push_data(buf, len);
            want.extend(std::iter::repeat_n(i + 1, len));
        }
        out.bytes().extend_from_slice(b"tail");
        want.extend_from_slice(b"tail");
        assert_eq!(out.len(), want.len());
        assert!(pool.get().is_none(), "all three buffers are queued");

        let reader = std::thread::spawn(move || {
            let mut got = vec![0; want.len()];
            b.read_exact(&mut got).unwrap();
            assert!(got == want, "the bytes arrive in order");
        });
        let mut partial = 0;
        while !out.is_empty() {
            match out.write_to(&mut &sock) {
                Ok(_) => partial += usize::from(out.started()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                Err(e) => panic!("{e}"),
            }
        }
        reader.join().unwrap();
        assert!(partial > 0, "some write stopped part way");
        assert!(!out.holds_buffers());
        assert!(pool.get().is_some(), "the buffers are back");
    }

    /// A flush sends what the socket takes and says so; once the client
    /// is gone it drops the output (the buffers go back) and says that.
    #[test]
    fn flush_says_what_went_out_and_when_the_client_is_gone() {
        let pool = BufPool::new(PoolConfig::new("output-test", 1, 1).cache_size(0), 4096).unwrap();
        let (a, mut b) = UnixStream::pair().unwrap();
        let sock = Stream::Unix(a);
        sock.set_nonblocking().unwrap();
        let mut out = Output::with_capacity(64);
        out.bytes().extend_from_slice(b"head");
        out.push_data(pool.get().unwrap(), 512);
        let f = out.flush(&sock, None);
        assert!(f.wrote && !f.gone && f.released);
        assert!(out.is_empty());
        let mut got = [0; 516];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got[..4], b"head");

        let f = out.flush(&sock, None);
        assert!(!f.wrote && !f.gone && !f.released, "nothing to send");

        drop(b);
        out.push_data(pool.get().unwrap(), 512);
        let f = out.flush(&sock, None);
        assert!(f.gone && f.released);
        assert!(out.is_empty());
        assert!(pool.get().is_some(), "the buffer is back");
    }

    /// A client that reads part of its output while more is queued behind
    /// it, and never all of it: the bytes held stay those it has not read,
    /// and it still gets every byte in order.
    #[test]
    fn output_read_in_part_forever_holds_only_what_is_unread() {
        use crate::export::Sink;
        struct Slow<'a>(&'a mut Vec<u8>, usize);
        impl Sink for Slow<'_> {
            fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
                let mut n = 0;
                for b in bufs {
                    let k = b.len().min(self.1 - n);
                    self.0.extend_from_slice(&b[..k]);
                    n += k;
                }
                Ok(n)
            }
        }
        let pool = BufPool::new(PoolConfig::new("output-test", 4, 1).cache_size(0), 4096).unwrap();
        let mut out = Output::with_capacity(64);
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for i in 0..2000u32 {
            // 1 KiB of replies queued, 900 bytes read, each round.
            let reply = [i as u8; 1000];
            out.bytes().extend_from_slice(&reply);
            want.extend_from_slice(&reply);
            if i % 100 == 0 {
                let mut buf = pool.get().unwrap();
                buf.as_mut_slice().fill(!(i as u8));
                out.push_data(buf, 24);
                want.extend_from_slice(&[!(i as u8); 24]);
            }
            out.write_to(&mut Slow(&mut got, 900)).unwrap();
            assert!(out.heap_bytes() < 1 << 20, "{} held", out.heap_bytes());
        }
        while !out.is_empty() {
            out.write_to(&mut Slow(&mut got, 900)).unwrap();
        }
        assert!(got == want, "every byte, in order");
    }

    /// More replies than one `writev` takes pieces: the rest goes in the
    /// next writes, in order.
    #[test]
    fn many_small_replies_go_out_over_several_writes_in_order() {
        let pool =
            BufPool::new(PoolConfig::new("output-test", 100, 1).cache_size(0), 4096).unwrap();
        let (a, mut b) = UnixStream::pair().unwrap();
        let sock = Stream::Unix(a);
        let mut out = Output::with_capacity(64);
        let mut want = Vec::new();
        for i in 0..100u8 {
            let mut buf = pool.get().unwrap();
            buf.as_mut_slice().fill(i);
            out.bytes().extend_from_slice(&[!i; 16]);
            want.extend_from_slice(&[!i; 16]);
            out.push_data(buf, 512);
            want.extend_from_slice(&[i; 512]);
            if i % 3 == 0 {
                // A reply without data between two with.
                out.bytes().extend_from_slice(&[0xee; 16]);
                want.extend_from_slice(&[0xee; 16]);
            }
        }
        let mut writes = 0;
        while !out.is_empty() {
            out.write_to(&mut &sock).unwrap();
            writes += 1;
        }
        assert!(writes > 1, "64 pieces at most per write");
        let mut got = vec![0; want.len()];
        b.read_exact(&mut got).unwrap();
        assert!(got == want, "the bytes arrive in order");
    }
}
