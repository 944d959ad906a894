//! One NBD connection, from handshake to close, on the reactor it was given.
//!
//! Thread: the connection's reactor, from accept to close. Its socket is
//! non-blocking and registered with the reactor's epoll set; its device IO is
//! submitted on an [`IoChannel`] of that reactor and completes there. Many
//! requests are in flight at once; replies are answered as they complete
//! (out of order) into one output buffer, which goes out once the client's
//! requests in flight are all answered (or a short hold ends: see [`Hold`]),
//! from the last completion or from a per-connection poller that runs once
//! per reactor round, so replies completed together leave in one write.
//!
//! When its export goes away (unshare, daemon shutdown) a connection
//! answers what it took, as the NBD spec asks of a server that shuts down:
//! requests already executing complete and are answered; every request it
//! reads from then on is answered `ESHUTDOWN` without being executed (the
//! spec has the client disconnect on that error). Once nothing is in
//! flight it releases the device and lingers: it goes on answering
//! `ESHUTDOWN` until the client disconnects or [`LINGER`] has passed, then
//! shuts its sending side and closes, with nothing unread, so the client
//! sees a FIN, never a reset.

use std::cell::{Cell, RefCell};
use std::io::{self, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::export::{Attached, Exports};
use super::handshake::{Allocation, Handshake, HandshakeConfig, Outcome};
use super::proto::*;
use super::stats::{ExportCounters, NbdCounters};
use super::transmission::{Command, Request, RequestParser, validate};
use crate::bdev::{IoChannel, IoCompletion, IoDone, IoError, IoRequest, IoType};
use crate::env::tsc;
use crate::pool::{BufPool, IoBuf, PoolConfig};
use crate::reactor::{self, FdHandler, FdRegistration, Interest, Poll, PollerHandle, Readiness};

/// A client socket.
pub enum Stream {
    /// TCP.
    Tcp(TcpStream),
    /// A Unix socket.
    Unix(UnixStream),
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

impl Stream {
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).write(buf),
            Stream::Unix(s) => (&*s).write(buf),
        }
    }
    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(true),
            Stream::Unix(s) => s.set_nonblocking(true),
        }
    }
    fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Write),
        }
    }
}

/// Buffers per connection for IOs up to [`SMALL_BUF`]; larger IOs get one
/// of their own.
const SMALL_BUFS: usize = 32;
const SMALL_BUF: usize = 128 << 10;
/// Bytes read from the socket per read call.
const READ_CHUNK: usize = 256 << 10;
/// Stop taking requests while this much output waits for the client.
const OUTPUT_HIGH_WATER: usize = 64 << 20;

/// How long a connection whose export went away waits, once all it took
/// is answered, for the client to disconnect before closing itself (a
/// client that sends requests gets `ESHUTDOWN` and disconnects; an idle
/// one may not look before this).
pub const LINGER: Duration = Duration::from_millis(500);

enum Phase {
    Handshake(Box<Handshake>),
    Transmission(Box<Tx>),
    /// The export went away and everything taken is answered: the device
    /// is released; requests are answered `ESHUTDOWN` until the client
    /// disconnects or the TSC passes `until`.
    Lingering(Lingering),
    Closed,
}

struct Tx {
    attached: Attached,
    counters: Arc<ExportCounters>,
    ch: IoChannel,
    structured: bool,
    block_status: Option<u32>,
    /// A WRITE whose payload is arriving: header and the buffer filled so far.
    payload: Option<(Request, IoBuf, usize)>,
    /// Payload bytes of a refused WRITE still to skip.
    skip: usize,
    /// DISC received, or the export is going away: execute no more
    /// requests.
    draining: bool,
    /// The export is going away and the client has not sent DISC: answer
    /// each further request `ESHUTDOWN`.
    refusing: bool,
    /// When refusing began (TSC): a WRITE whose payload was arriving then
    /// gets until [`LINGER`] after it to arrive, to be executed and answered.
    refusing_since: u64,
    /// Last: dropped after `payload`, so its buffer is back first.
    bufs: Buffers,
}

struct Lingering {
    counters: Arc<ExportCounters>,
    structured: bool,
    /// Payload bytes of a refused WRITE still to skip.
    skip: usize,
    until: u64,
}

impl Tx {
    /// Once the export is going away: execute nothing more, answer the
    /// rest `ESHUTDOWN` (unless the client already sent DISC).
    #[inline]
    fn notice_closing(&mut self) {
        if !self.draining && self.attached.closing.load(Ordering::Acquire) {
            self.draining = true;
            self.refusing = true;
            self.refusing_since = tsc::now();
        }
    }
}

fn linger_ticks() -> u64 {
    tsc::ns_to_ticks(LINGER.as_nanos() as u64)
}

struct State {
    phase: Phase,
    /// Bytes read from the client; those before `start` are consumed.
    input: Vec<u8>,
    start: usize,
    output: Vec<u8>,
    written: usize,
    eof: bool,
    want_write: bool,
}

/// A connection.
pub struct Connection {
    sock: Rc<Stream>,
    state: RefCell<State>,
    in_flight: Cell<u32>,
    hold: Hold,
    reg: RefCell<Option<FdRegistration>>,
    poller: RefCell<Option<PollerHandle>>,
    exports: Arc<Exports>,
    counters: Arc<NbdCounters>,
    peer: String,
    me: Weak<Connection>,
}

impl Connection {
    /// Starts serving `sock` on the calling reactor.
    pub fn start(
        sock: Stream,
        peer: String,
        exports: Arc<Exports>,
        counters: Arc<NbdCounters>,
        refuse: Option<String>,
        reply_hold: Duration,
    ) {
        if let Err(e) = sock.set_nonblocking() {
            tracing::warn!(%peer, "NBD connection dropped: {e}");
            return;
        }
        let mut hs = Handshake::new(HandshakeConfig {
            exports: exports.clone(),
            tls_available: false,
            refuse,
        });
        let mut output = Vec::with_capacity(4096);
        hs.greeting(&mut output);
        let conn = Rc::new_cyclic(|me| Connection {
            me: me.clone(),
            sock: Rc::new(sock),
            state: RefCell::new(State {
                phase: Phase::Handshake(Box::new(hs)),
                input: Vec::with_capacity(2 * READ_CHUNK),
                start: 0,
                output,
                written: 0,
                eof: false,
                want_write: false,
            }),
            in_flight: Cell::new(0),
            hold: Hold::new(reply_hold),
            reg: RefCell::new(None),
            poller: RefCell::new(None),
            exports,
            counters,
            peer,
        });
        let weak: Weak<dyn FdHandler> = Rc::downgrade(&conn) as Weak<dyn FdHandler>;
        match reactor::register_fd(conn.sock.clone(), Interest::READ, weak) {
            Ok(r) => *conn.reg.borrow_mut() = Some(r),
            Err(e) => {
                tracing::warn!(peer = %conn.peer, "NBD connection dropped: {e}");
                return;
            }
        }
        conn.counters.connection_opened();
        tracing::debug!(peer = %conn.peer, "NBD connection");
        // The poller keeps the connection alive and flushes its output once a
        // round; it goes away when the connection closes.
        let c = conn.clone();
        *conn.poller.borrow_mut() = Some(reactor::register_poller("nbd-conn", move || c.tick()));
        conn.flush();
    }

    /// Once a round: write pending output, notice an unshare, close when done.
    fn tick(self: &Rc<Self>) -> Poll {
        let mut busy = false;
        {
            let mut st = self.state.borrow_mut();
            if let Phase::Transmission(tx) = &mut st.phase {
                tx.notice_closing();
            }
            if let Phase::Lingering(l) = &st.phase {
                reactor::wake_by(l.until);
            }
        }
        if self.has_output() {
            if self.flush_due() {
                busy = self.flush();
            } else {
                // Held replies: be awake when they must go out.
                reactor::wake_by(self.hold.until.get());
            }
        }
        self.maybe_close();
        if busy { Poll::Busy } else { Poll::Idle }
    }

    /// Whether the output should be written now rather than held (see
    /// [`Hold`]): always outside transmission, when draining or closing,
    /// when a write is under way or the output is large; in transmission
    /// when the client has nothing more to send or the hold time is up.
    fn flush_due(&self) -> bool {
        let st = self.state.borrow();
        let Phase::Transmission(tx) = &st.phase else {
            return true;
        };
        tx.draining
            || st.eof
            || st.written > 0
            || st.output.len() >= HOLD_BYTES
            || self.hold.due(tsc::now())
    }

    fn has_output(&self) -> bool {
        let st = self.state.borrow();
        st.written < st.output.len()
    }

    /// Writes what it can; returns whether anything was written.
    fn flush(&self) -> bool {
        let mut st = self.state.borrow_mut();
        let mut wrote = false;
        while st.written < st.output.len() {
            match self.sock.write(&st.output[st.written..]) {
                Ok(0) => break,
                Ok(n) => {
                    st.written += n;
                    wrote = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // The client is gone: drop what it will never read.
                    st.output.clear();
                    st.written = 0;
                    st.eof = true;
                    break;
                }
            }
        }
        if st.written == st.output.len() {
            st.output.clear();
            st.written = 0;
            self.hold.written_all();
        }
        let want_write = st.written < st.output.len();
        if want_write != st.want_write {
            st.want_write = want_write;
            let interest = if want_write {
                Interest::READ_WRITE
            } else {
                Interest::READ
            };
            if let Some(r) = &*self.reg.borrow() {
                let _ = r.set_interest(interest);
            }
        }
        wrote
    }

    /// Closes once the client is gone or drained and no IO is in flight;
    /// a connection drained because its export went away lingers first.
    fn maybe_close(&self) {
        let (done, linger) = {
            let st = self.state.borrow();
            let (drained, linger) = match &st.phase {
                Phase::Transmission(tx) => {
                    // A WRITE taken before the export went away is
                    // executed once its payload is in (for LINGER at most).
                    let mid_write = (tx.payload.is_some() || tx.skip > 0)
                        && tsc::now() < tx.refusing_since + linger_ticks();
                    (
                        tx.draining && !mid_write && st.written == st.output.len(),
                        tx.refusing,
                    )
                }
                Phase::Handshake(_) => (false, false),
                Phase::Lingering(l) => (tsc::now() >= l.until, false),
                Phase::Closed => (true, false),
            };
            (
                (st.eof || drained) && self.in_flight.get() == 0,
                linger && !st.eof,
            )
        };
        if !done {
            return;
        }
        let mut st = self.state.borrow_mut();
        if linger && let Phase::Transmission(tx) = &st.phase {
            // A WRITE whose payload stopped coming: the rest is skipped.
            let unread = tx
                .payload
                .as_ref()
                .map_or(0, |(req, _, filled)| req.length as usize - filled);
            let l = Lingering {
                counters: tx.counters.clone(),
                structured: tx.structured,
                skip: tx.skip + unread,
                until: tsc::now() + linger_ticks(),
            };
            // The channel and the export attachment go here: the device
            // is free as soon as everything taken is answered.
            st.phase = Phase::Lingering(l);
            tracing::debug!(peer = %self.peer, "NBD connection: export gone, all answered");
            return;
        }
        if matches!(st.phase, Phase::Lingering(_)) && !st.eof {
            // Time is up: the client gets a FIN, not a reset, unless it
            // sends something between this and the close.
            let _ = self.sock.shutdown_write();
        }
        drop(st);
        self.close();
    }

    fn close(&self) {
        let poller = self.poller.borrow_mut().take();
        if poller.is_some() {
            // First: the accept loop's total must not lag the export's count.
            self.counters.connection_closed();
            tracing::debug!(peer = %self.peer, "NBD connection closed");
        }
        let phase = std::mem::replace(&mut self.state.borrow_mut().phase, Phase::Closed);
        drop(phase); // the channel and the export attachment go here
        drop(self.reg.borrow_mut().take());
        drop(poller);
    }

    fn read_input(&self) {
        let mut st = self.state.borrow_mut();
        if st.eof || st.output.len() - st.written > OUTPUT_HIGH_WATER {
            return;
        }
        // Drop what was consumed, then read into spare capacity (no zeroing).
        let start = std::mem::take(&mut st.start);
        st.input.drain(..start);
        st.input.reserve(READ_CHUNK);
        let fd = self.sock.clone();
        match rustix::io::read(&*fd, rustix::buffer::spare_capacity(&mut st.input)) {
            // EOF without DISC is a normal close (fio never sends DISC).
            Ok(0) => st.eof = true,
            Ok(_) => {}
            Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => st.eof = true,
        }
    }

    /// Handles as much buffered input as it can.
    fn process(self: &Rc<Self>) {
        loop {
            let mut st = self.state.borrow_mut();
            let st = &mut *st;
            let progressed = match &mut st.phase {
                Phase::Handshake(hs) => {
                    let (used, outcome) = match hs.feed(&st.input[st.start..], &mut st.output) {
                        Ok(r) => r,
                        Err(e) => {
                            tracing::info!(peer = %self.peer, "NBD handshake failed: {e}");
                            st.start = st.input.len();
                            st.eof = true;
                            return;
                        }
                    };
                    st.start += used;
                    match outcome {
                        None => used > 0,
                        Some(Outcome::Transmission {
                            export,
                            structured_replies,
                            meta_context_base_allocation,
                            ..
                        }) => match self.begin_transmission(
                            &export.name,
                            structured_replies,
                            meta_context_base_allocation,
                        ) {
                            Some(tx) => {
                                st.phase = Phase::Transmission(Box::new(tx));
                                true
                            }
                            None => {
                                st.eof = true;
                                return;
                            }
                        },
                        Some(_) => {
                            // ABORT (acknowledged), a hard disconnect, or TLS.
                            st.eof = true;
                            return;
                        }
                    }
                }
                Phase::Transmission(tx) => {
                    if st.output.len() - st.written > OUTPUT_HIGH_WATER {
                        return;
                    }
                    match self.next_request(tx, &st.input[st.start..], &mut st.output) {
                        Ok(used) => {
                            st.start += used;
                            used > 0
                        }
                        Err(e) => {
                            tracing::info!(peer = %self.peer, "NBD connection closed: {e}");
                            tx.counters.error(0);
                            st.start = st.input.len();
                            st.eof = true;
                            return;
                        }
                    }
                }
                Phase::Lingering(l) => {
                    let input = &st.input[st.start..];
                    match self.refuse_next(
                        &l.counters,
                        l.structured,
                        &mut l.skip,
                        input,
                        &mut st.output,
                    ) {
                        Ok((used, disc)) => {
                            st.start += used;
                            if disc {
                                st.eof = true;
                                return;
                            }
                            used > 0
                        }
                        Err(e) => {
                            tracing::info!(peer = %self.peer, "NBD connection closed: {e}");
                            st.start = st.input.len();
                            st.eof = true;
                            return;
                        }
                    }
                }
                Phase::Closed => return,
            };
            if !progressed {
                return;
            }
        }
    }

    fn begin_transmission(
        &self,
        name: &str,
        structured: bool,
        block_status: Option<u32>,
    ) -> Option<Tx> {
        let attached = self.exports.attach(name)?;
        let ch = match attached.desc.open_channel() {
            Ok(ch) => ch,
            Err(e) => {
                tracing::warn!(peer = %self.peer, "NBD: {e}");
                return None;
            }
        };
        let bufs = match Buffers::new() {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(peer = %self.peer, "NBD connection refused: {e}");
                return None;
            }
        };
        tracing::debug!(peer = %self.peer, export = name, structured, "NBD transmission");
        Some(Tx {
            counters: self.counters.export(name),
            attached,
            ch,
            structured,
            block_status,
            bufs,
            payload: None,
            skip: 0,
            draining: false,
            refusing: false,
            refusing_since: 0,
        })
    }

    /// Takes the next request (or payload bytes) from `input`. Returns how
    /// many bytes it consumed (0: it needs more input, or a buffer); an
    /// error closes the connection.
    fn next_request(
        self: &Rc<Self>,
        tx: &mut Tx,
        input: &[u8],
        output: &mut Vec<u8>,
    ) -> Result<usize, String> {
        if tx.skip > 0 {
            let n = tx.skip.min(input.len());
            tx.skip -= n;
            return Ok(n);
        }
        if let Some((req, mut buf, filled)) = tx.payload.take() {
            let want = req.length as usize - filled;
            let n = want.min(input.len());
            buf.as_mut_slice()[filled..filled + n].copy_from_slice(&input[..n]);
            if filled + n < req.length as usize {
                tx.payload = Some((req, buf, filled + n));
                return Ok(n);
            }
            self.submit(
                tx,
                &req,
                IoRequest::write(buf, req.offset, req.length as u64),
                output,
            );
            return Ok(n);
        }
        // Checked per request, not only once a round: a request that
        // arrives after the unshare returned is never executed.
        tx.notice_closing();
        if tx.refusing {
            let (used, disc) =
                self.refuse_next(&tx.counters, tx.structured, &mut tx.skip, input, output)?;
            if disc {
                tx.refusing = false;
            }
            return Ok(used);
        }
        if tx.draining {
            return Ok(0);
        }
        let Some((req, used)) = RequestParser::parse(input).map_err(|e| e.to_string())? else {
            return Ok(0);
        };
        let export = &tx.attached.info;
        let valid = validate(&req, export, tx.structured, tx.block_status.is_some());
        let buf = match (valid, req.kind) {
            (Ok(()), Command::Read | Command::Write) => match tx.bufs.take(req.length as usize) {
                Some(buf) => Some(buf),
                // Every buffer is out: wait for a completion to return one
                // (the request is parsed, and counted, again then).
                None => return Ok(0),
            },
            _ => None,
        };
        tx.counters.request(req.kind);
        if req.kind != Command::Disc {
            self.hold.accepted();
        }
        if let Err(errno) = valid {
            tx.skip = req.payload_len();
            tx.counters.error(errno);
            self.reply_error(tx.structured, &req, errno, output);
            return Ok(used);
        }
        match req.kind {
            Command::Read | Command::Write => {
                let buf = buf.expect("a valid READ or WRITE took a buffer above");
                if req.kind == Command::Read {
                    self.submit(
                        tx,
                        &req,
                        IoRequest::read(buf, req.offset, req.length as u64),
                        output,
                    );
                } else {
                    tx.payload = Some((req, buf, 0));
                }
            }
            Command::Flush => {
                self.submit(tx, &req, IoRequest::no_data(IoType::Flush, 0, 0), output);
            }
            Command::Trim => {
                self.submit(
                    tx,
                    &req,
                    IoRequest::no_data(IoType::Unmap, req.offset, req.length as u64),
                    output,
                );
            }
            Command::WriteZeroes => {
                let io = IoRequest::no_data(IoType::WriteZeroes, req.offset, req.length as u64);
                self.submit(tx, &req, io, output);
            }
            Command::Cache => {
                // Device memory is as close as a cache gets: nothing to do.
                put_simple_reply(output, req.cookie, 0);
                self.hold.replied(tsc::now());
            }
            Command::BlockStatus => {
                let end = (req.offset + req.length as u64).min(export.size);
                let len = (end - req.offset).min(u32::MAX as u64) as u32;
                let id = tx.block_status.unwrap_or(0);
                put_block_status(
                    output,
                    req.cookie,
                    id,
                    &[(len, export.data_kind.block_status_flags())],
                    true,
                );
                self.hold.replied(tsc::now());
            }
            Command::Disc => {
                tx.draining = true;
            }
            Command::Unknown(_) => unreachable!("validate refuses unknown commands"),
        }
        Ok(used)
    }

    fn submit(self: &Rc<Self>, tx: &Tx, req: &Request, mut io: IoRequest, output: &mut Vec<u8>) {
        io.tag = req.cookie;
        let cb: Rc<dyn IoCompletion> = self.clone();
        match tx.ch.submit(io, cb) {
            Ok(()) => self.in_flight.set(self.in_flight.get() + 1),
            Err(e) => {
                // validate() ran first; a refusal here is the device's view of
                // the same rules (alignment, range): answer with its errno.
                let errno = errno_of(&e.error);
                tx.counters.error(errno);
                self.reply_error(tx.structured, req, errno, output);
            }
        }
    }

    /// Takes the next refused request (or payload bytes of one, counted
    /// in `skip`) from `input`, for a connection whose export went away:
    /// answered `ESHUTDOWN`, unexecuted. Returns the bytes consumed (0: it
    /// needs more input) and whether it was DISC (the client disconnects).
    fn refuse_next(
        &self,
        counters: &ExportCounters,
        structured: bool,
        skip: &mut usize,
        input: &[u8],
        output: &mut Vec<u8>,
    ) -> Result<(usize, bool), String> {
        if *skip > 0 {
            let n = (*skip).min(input.len());
            *skip -= n;
            return Ok((n, false));
        }
        let Some((req, used)) = RequestParser::parse(input).map_err(|e| e.to_string())? else {
            return Ok((0, false));
        };
        counters.request(req.kind);
        if req.kind == Command::Disc {
            return Ok((used, true));
        }
        counters.error(ESHUTDOWN);
        self.reply_error(structured, &req, ESHUTDOWN, output);
        *skip = req.payload_len();
        Ok((used, false))
    }

    fn reply_error(&self, structured: bool, req: &Request, errno: u32, output: &mut Vec<u8>) {
        self.hold.replied(tsc::now());
        if structured && req.kind == Command::Read {
            put_structured_error(output, req.cookie, errno, "", true);
        } else {
            put_simple_reply(output, req.cookie, errno);
        }
    }
}

/// A connection's buffers: a pool of small ones for the common IO sizes,
/// and, for larger IOs, one-buffer pools by power-of-two size, made when
/// first needed and reused; all freed with the connection.
struct Buffers {
    small: BufPool,
    large: RefCell<Vec<BufPool>>,
}

impl Buffers {
    fn new() -> Result<Buffers, crate::pool::BufPoolError> {
        Ok(Buffers {
            small: BufPool::new(
                PoolConfig::new("nbd-conn", SMALL_BUFS, 1).cache_size(0),
                SMALL_BUF,
            )?,
            large: RefCell::new(Vec::new()),
        })
    }

    fn take(&self, len: usize) -> Option<IoBuf> {
        if len <= SMALL_BUF {
            return self.small.get();
        }
        let size = len.next_power_of_two();
        let mut large = self.large.borrow_mut();
        if let Some(b) = large
            .iter()
            .filter(|p| p.buf_size() == size)
            .find_map(|p| p.get())
        {
            return Some(b);
        }
        if large.len() >= MAX_LARGE_BUFS {
            return None; // wait for one to come back
        }
        let pool = BufPool::new(PoolConfig::new("nbd-large", 1, 1).cache_size(0), size).ok()?;
        let b = pool.get();
        large.push(pool);
        b
    }
}

/// Replies held back so that a client with many requests in flight gets
/// them together.
///
/// A client with D requests in flight sends no more until it has a reply.
/// So once the connection has taken D requests and answered all of them,
/// nothing more is coming until the client hears back, and writing the
/// answers then, together, costs one `write` and one wake-up of the client
/// for all D instead of one each, on both sides. D is learned: the most
/// requests the client has had outstanding. A client that sends fewer than
/// that (its depth fell, it waits on one answer before sending the next)
/// gets its answers at the latest `max` (`--nbd-reply-hold`) after the
/// first was ready,
/// and D falls to what it had outstanding then. A client with one request
/// at a time (D = 1) gets each answer at once, as without holding.
struct Hold {
    /// Requests taken whose replies have not been written to the socket.
    outstanding: Cell<u32>,
    /// Of those, the replies waiting in the output.
    queued: Cell<u32>,
    /// The client's learned depth.
    depth: Cell<u32>,
    /// When the held replies must go out (a TSC time; meaningful while
    /// `queued > 0`).
    until: Cell<u64>,
    /// The longest hold, in TSC ticks (zero: replies go out at once).
    max: u64,
}

/// Output this large goes out at once.
const HOLD_BYTES: usize = 1 << 20;

impl Hold {
    fn new(max: Duration) -> Hold {
        Hold {
            outstanding: Cell::new(0),
            queued: Cell::new(0),
            depth: Cell::new(1),
            until: Cell::new(0),
            max: tsc::ns_to_ticks(max.as_nanos().min(u64::MAX as u128) as u64),
        }
    }

    /// A request was taken (every one but DISC gets a reply).
    fn accepted(&self) {
        let n = self.outstanding.get() + 1;
        self.outstanding.set(n);
        self.depth.set(self.depth.get().max(n));
    }

    /// A reply went into the output at `now`.
    fn replied(&self, now: u64) {
        if self.queued.get() == 0 {
            self.until.set(now + self.max);
        }
        self.queued.set(self.queued.get() + 1);
    }

    /// The whole output reached the socket.
    fn written_all(&self) {
        self.outstanding
            .set(self.outstanding.get().saturating_sub(self.queued.get()));
        self.queued.set(0);
    }

    /// Whether every request the client is expected to have in flight has
    /// its reply queued: nothing more is coming until they go out.
    fn all_answered(&self) -> bool {
        let queued = self.queued.get();
        queued >= self.outstanding.get() && queued >= self.depth.get()
    }

    /// Whether the queued replies should go out at `now`. Past the
    /// deadline it also lowers the learned depth to what the client has
    /// outstanding, so its next round goes out without waiting.
    fn due(&self, now: u64) -> bool {
        let outstanding = self.outstanding.get();
        if self.max == 0 || self.all_answered() {
            return true;
        }
        if now >= self.until.get() {
            // The client sent fewer than it used to: expect that many.
            self.depth.set(outstanding.max(1));
            return true;
        }
        false
    }
}

/// Large buffers a connection may hold at once (each up to 32 MiB).
const MAX_LARGE_BUFS: usize = 8;

fn errno_of(e: &IoError) -> u32 {
    match e {
        IoError::Unaligned { .. } | IoError::Empty(_) | IoError::Buffer { .. } => EINVAL,
        IoError::OutOfRange { .. } => ENOSPC,
        IoError::Unsupported(_) => ENOTSUP,
        IoError::Device(_) => EIO,
    }
}

impl IoCompletion for Connection {
    fn complete(self: Rc<Self>, mut io: IoDone) {
        self.in_flight.set(self.in_flight.get() - 1);
        self.hold.replied(tsc::now());
        let cookie = io.tag();
        let buf = io.take_buf();
        let status = io.status();
        let op = io.op();
        let (offset, len) = (io.offset(), io.len());
        drop(io);
        {
            let mut st = self.state.borrow_mut();
            let st = &mut *st;
            let (structured, zero) = match &st.phase {
                Phase::Transmission(tx) => (
                    tx.structured,
                    tx.attached.info.data_kind == Allocation::Zero,
                ),
                _ => (false, false),
            };
            if !st.eof {
                match status {
                    // A device that stores nothing reads as zeroes, as its
                    // base:allocation map says: a hole chunk, or zero bytes.
                    Ok(()) if op == IoType::Read && zero => {
                        if structured {
                            put_offset_hole(&mut st.output, cookie, offset, len as u32, true);
                        } else {
                            put_simple_reply(&mut st.output, cookie, 0);
                            let end = st.output.len() + len as usize;
                            st.output.resize(end, 0);
                        }
                    }
                    Ok(()) if op == IoType::Read => {
                        let data = &buf.as_ref().expect("a read carries its buffer").as_slice()
                            [..len as usize];
                        if structured {
                            put_offset_data_header(
                                &mut st.output,
                                cookie,
                                offset,
                                len as u32,
                                true,
                            );
                        } else {
                            put_simple_reply(&mut st.output, cookie, 0);
                        }
                        st.output.extend_from_slice(data);
                    }
                    Ok(()) => put_simple_reply(&mut st.output, cookie, 0),
                    Err(e) => {
                        let errno = errno_of(&e);
                        if structured && op == IoType::Read {
                            put_structured_error(&mut st.output, cookie, errno, "", true);
                        } else {
                            put_simple_reply(&mut st.output, cookie, errno);
                        }
                    }
                }
            }
        }
        drop(buf);
        // A returned buffer may unblock a request waiting for one.
        self.process();
        // The last reply the client waits for goes out now rather than at
        // the next round's tick: one round less of latency at iodepth 1.
        if self.hold.all_answered() && self.flush_due() {
            self.flush();
        }
    }
}

impl FdHandler for Connection {
    fn on_ready(&self, ready: Readiness) {
        let Some(this) = self.self_rc() else { return };
        if ready.writable {
            this.flush();
        }
        if ready.readable || ready.hangup {
            this.read_input();
            this.process();
        }
        if this.has_output() && this.flush_due() {
            this.flush();
        }
        this.maybe_close();
    }
}

impl Connection {
    /// The connection's own `Rc` (it is alive: the reactor upgraded its
    /// registration's weak handler to call us).
    fn self_rc(&self) -> Option<Rc<Connection>> {
        self.me.upgrade()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_micros(100);

    fn ticks(us: u64) -> u64 {
        tsc::ns_to_ticks(us * 1000)
    }

    /// `n` requests taken, then each answered at `now`.
    fn round(h: &Hold, n: u32, now: u64) {
        for _ in 0..n {
            h.accepted();
        }
        for _ in 0..n {
            h.replied(now);
        }
    }

    #[test]
    fn one_request_at_a_time_is_answered_at_once() {
        let h = Hold::new(MAX);
        for i in 0..3 {
            round(&h, 1, ticks(i * 10));
            assert!(h.due(ticks(i * 10)));
            h.written_all();
        }
    }

    #[test]
    fn replies_wait_for_all_the_requests_the_client_has_in_flight() {
        let h = Hold::new(MAX);
        round(&h, 4, 0); // first round: learns the depth, nothing held back
        assert!(h.due(0));
        h.written_all();
        assert_eq!(h.outstanding.get(), 0);
        for _ in 0..4 {
            h.accepted();
        }
        for i in 0..3 {
            h.replied(ticks(i));
            assert!(!h.due(ticks(i)), "held after {} of 4", i + 1);
        }
        h.replied(ticks(3));
        assert!(h.due(ticks(3)), "all 4 answered: out they go");
    }

    #[test]
    fn a_request_still_in_flight_holds_the_others() {
        let h = Hold::new(MAX);
        round(&h, 2, 0);
        h.written_all();
        h.accepted();
        h.accepted();
        h.accepted(); // the client now has 3 out
        h.replied(0);
        h.replied(0);
        assert!(!h.due(ticks(1)), "one of three still in the device");
    }

    #[test]
    fn a_client_sending_fewer_gets_its_replies_by_the_deadline_and_is_expected_to_go_on_so() {
        let h = Hold::new(MAX);
        round(&h, 8, 0);
        h.written_all();
        round(&h, 2, ticks(1000));
        assert!(!h.due(ticks(1050)));
        assert!(h.due(ticks(1101)), "past the hold: out they go");
        h.written_all();
        // It now expects 2: the next 2 go out at once.
        round(&h, 2, ticks(2000));
        assert!(h.due(ticks(2000)));
    }

    #[test]
    fn a_zero_hold_never_holds() {
        let h = Hold::new(Duration::ZERO);
        round(&h, 8, 0);
        h.written_all();
        h.accepted();
        h.accepted();
        h.replied(0);
        assert!(h.due(0));
    }
}
