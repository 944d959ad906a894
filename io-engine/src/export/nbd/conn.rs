//! One NBD connection, from handshake to close, on the reactor it was given.
//!
//! Thread: the connection's reactor, from accept to close. Its socket is
//! non-blocking and registered with the reactor's epoll set; its device IO is
//! submitted on an [`IoChannel`](crate::bdev::IoChannel) of that reactor and
//! completes there. Many requests are in flight at once; replies are
//! answered as they complete (out of order) into one [`Output`], READ data
//! as the IO buffer itself, which goes out with vectored writes once the
//! client's requests in flight are all answered (or a short hold ends: see
//! [`Hold`]), from the last completion or from a per-connection poller that
//! runs once per reactor round, so replies completed together leave in one
//! write.
//!
//! When its export goes away (unshare, daemon shutdown) a connection
//! answers what it took, as the NBD spec asks of a server that shuts down:
//! requests already executing complete and are answered; every request it
//! reads from then on is answered `ESHUTDOWN` without being executed (the
//! spec has the client disconnect on that error). Once nothing is in
//! flight it releases the device and lingers: it goes on answering
//! `ESHUTDOWN` until the client disconnects or [`LINGER`](super::LINGER) has passed, then
//! shuts its sending side and closes, with nothing unread, so the client
//! sees a FIN, never a reset. The phases are in [`phase`](super::phase).
//!
//! After `STARTTLS` (see [`TlsSession`]) input is read through the
//! connection's TLS session, which decrypts it into the same input buffer,
//! and output is flushed through it (READ data encrypted from the IO
//! buffer into TLS records); everything else is the same.
//!
//! How long each client waited is measured from the request read (a
//! WRITE: its header, before the payload) to the moment the output that
//! holds its reply has all been written to the socket, held time included,
//! and counted in the reactor's own entry of the export's
//! [`RequestDurations`](super::request_durations::RequestDurations).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::admission::Admission;
use super::conn_error::ConnError;
use super::handshake::{Handshake, HandshakeConfig, Outcome};
use super::hold::{HOLD_BYTES, Hold};
use super::phase::{Phase, Tx};
use super::proto::*;
use super::request_durations::CoreDurations;
use super::stats::{ExportCounters, NbdCounters};
use super::tls_session::{TlsRead, TlsSession};
use super::transmission::{
    Command, Request, RequestParser, command_index, error_message, validate,
};
use super::{Refusal, SessionLimit, TlsConfig, TlsMode};
use crate::bdev::{IoCompletion, IoDone, IoError, IoRequest, IoType};
use crate::env::{core_slot, tsc};
use crate::export::{Buffers, Exports, HandshakeSlot, Output, Protocol, Stream};
use crate::reactor::{self, FdHandler, FdRegistration, Interest, Poll, PollerHandle, Readiness};

/// Bytes read from the socket per read call.
const READ_CHUNK: usize = 256 << 10;
/// Stop taking requests while this much output waits for the client.
const OUTPUT_HIGH_WATER: usize = 64 << 20;

struct State {
    phase: Phase,
    /// Bytes read from the client; those before `start` are consumed.
    input: Vec<u8>,
    start: usize,
    output: Output,
    eof: bool,
    /// The TLS session, once the client sent `STARTTLS`.
    tls: Option<Box<TlsSession>>,
}

/// What the connection made of the next bytes of its input.
enum Step {
    /// Bytes consumed (0: more input is needed).
    Used(usize),
    /// DISC, `usize` bytes: the client disconnects.
    Disc(usize),
}

/// A connection.
pub struct Connection {
    sock: Rc<Stream>,
    state: RefCell<State>,
    in_flight: Cell<u32>,
    hold: Hold,
    /// This reactor's entry for the export's request durations, once an
    /// export is attached.
    durations: RefCell<Option<Arc<CachePadded<CoreDurations>>>>,
    /// Replies in the output not yet all written: their [`COMMANDS`]
    /// index and when their request was read (TSC).
    ///
    /// [`COMMANDS`]: super::transmission::COMMANDS
    replies: RefCell<Vec<(usize, u64)>>,
    /// WRITEs executing: their cookie and when their header was read.
    writes: RefCell<Vec<(u64, u64)>>,
    /// When the header of the WRITE whose payload is arriving was read.
    payload_start: Cell<u64>,
    /// A request waits for a buffer that the output holds: send it now.
    starved: Cell<bool>,
    /// When that request's header was first read (TSC).
    starved_since: Cell<u64>,
    reg: RefCell<Option<FdRegistration>>,
    poller: RefCell<Option<PollerHandle>>,
    /// Its place among the connections in the handshake, and its deadline.
    admission: RefCell<Admission>,
    exports: Arc<Exports>,
    counters: Arc<NbdCounters>,
    tls_config: TlsConfig,
    peer: String,
    me: Weak<Connection>,
}

impl Connection {
    /// Starts serving `sock` on the calling reactor, with the exports and
    /// session limit of `sessions`, holding `slot` among the connections
    /// in the handshake until transmission or `handshake_timeout`.
    pub fn start(
        sock: Stream,
        peer: String,
        sessions: Arc<SessionLimit>,
        slot: HandshakeSlot,
        handshake_timeout: Duration,
        reply_hold: Duration,
        tls_config: TlsConfig,
    ) {
        if let Err(e) = sock.set_nonblocking() {
            tracing::warn!(%peer, "NBD connection dropped: {e}");
            return;
        }
        let admission = Admission::new(slot, handshake_timeout);
        let (exports, counters) = (sessions.exports.clone(), sessions.counters.clone());
        let mut hs = Handshake::new(HandshakeConfig {
            exports: sessions,
            tls: tls_config.mode(),
        });
        let mut output = Output::with_capacity(4096);
        hs.greeting(output.bytes());
        let conn = Rc::new_cyclic(|me| Connection {
            me: me.clone(),
            sock: Rc::new(sock),
            state: RefCell::new(State {
                phase: Phase::Handshake(Box::new(hs)),
                input: Vec::with_capacity(2 * READ_CHUNK),
                start: 0,
                output,
                eof: false,
                tls: None,
            }),
            in_flight: Cell::new(0),
            hold: Hold::new(reply_hold),
            durations: RefCell::new(None),
            replies: RefCell::new(Vec::new()),
            writes: RefCell::new(Vec::new()),
            payload_start: Cell::new(0),
            starved: Cell::new(false),
            starved_since: Cell::new(0),
            reg: RefCell::new(None),
            poller: RefCell::new(None),
            admission: RefCell::new(admission),
            exports,
            counters,
            tls_config,
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

    /// Once a round: notice an unshare, end a handshake cut short, write
    /// pending output, close when done.
    fn tick(self: &Rc<Self>) -> Poll {
        let mut busy = false;
        {
            let mut st = self.state.borrow_mut();
            st.phase.notice_closing();
            // Only a connection not in transmission yet has a cut to make.
            if let Some(why) = self.admission.borrow_mut().cut_short(tsc::now()) {
                self.cut_short(why);
                st.eof = true;
            }
            match &st.phase {
                Phase::Refusing(r) if r.awaits_payload(tsc::now()) => {
                    reactor::wake_by(r.grace_end())
                }
                Phase::Lingering(l) => reactor::wake_by(l.until),
                _ => {}
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
    /// [`Hold`]): always outside transmission, after DISC, when a write is
    /// under way, the output is large or a request waits for one of its
    /// buffers; in transmission when the client has nothing more to send or
    /// the hold time is up.
    fn flush_due(&self) -> bool {
        let st = self.state.borrow();
        let Phase::Transmission(tx) = &st.phase else {
            return true;
        };
        // Only TLS records wait.
        st.output.is_empty()
            || tx.disc
            || st.eof
            || st.output.started()
            || st.output.len() >= HOLD_BYTES
            || self.starved.get()
            || self.hold.due(tsc::now())
    }

    fn has_output(&self) -> bool {
        let st = self.state.borrow();
        !st.output.is_empty() || st.tls.as_ref().is_some_and(|t| t.holds())
    }

    /// Writes what it can; returns whether anything was written. Buffers
    /// that went out may let a request waiting for one go on.
    fn flush(self: &Rc<Self>) -> bool {
        let mut guard = self.state.borrow_mut();
        let st = &mut *guard;
        let reg = self.reg.borrow();
        let flushed = match &mut st.tls {
            None => st.output.flush(&self.sock, reg.as_ref()),
            Some(tls) => st.output.flush_to(&mut tls.sink(&self.sock), reg.as_ref()),
        };
        drop(reg);
        if flushed.gone {
            st.eof = true;
        }
        if st.output.is_empty() {
            self.hold.written_all();
            self.replies_written();
        }
        drop(guard);
        if flushed.released && self.starved.get() {
            self.process();
        }
        flushed.wrote
    }

    /// A reply to a request of `cmd`, read at `start` (TSC), went into the
    /// output.
    fn reply_queued(&self, cmd: Command, start: u64) {
        if self.durations.borrow().is_some() {
            self.replies.borrow_mut().push((command_index(cmd), start));
        }
    }

    /// The output is all written: every reply queued has reached the
    /// socket; count how long each client waited.
    fn replies_written(&self) {
        let mut replies = self.replies.borrow_mut();
        if replies.is_empty() {
            return;
        }
        if let Some(d) = self.durations.borrow().as_ref() {
            let now = tsc::now();
            for &(cmd, start) in replies.iter() {
                d.record(cmd, now.saturating_sub(start));
            }
        }
        replies.clear();
    }

    /// Closes once the client is gone or done and no IO is in flight; a
    /// connection whose export went away lingers first.
    fn maybe_close(&self) {
        if self.in_flight.get() != 0 {
            return;
        }
        let mut st = self.state.borrow_mut();
        let flushed = st.output.is_empty();
        let eof = st.eof;
        let now = tsc::now();
        let close = match &st.phase {
            Phase::Handshake(_) => eof,
            Phase::Transmission(tx) => eof || (tx.disc && flushed),
            Phase::Refusing(r) => {
                if !eof && flushed && !r.awaits_payload(now) {
                    // The channel and the export attachment go here: the
                    // device is free as soon as everything taken is answered.
                    st.phase.linger();
                    tracing::debug!(peer = %self.peer, "NBD connection: export gone, all answered");
                    return;
                }
                eof
            }
            Phase::Lingering(l) => {
                if !eof && now >= l.until {
                    // Time is up: the client gets a FIN, not a reset, unless
                    // it sends something between this and the close.
                    let _ = self.sock.shutdown_write();
                }
                eof || now >= l.until
            }
            Phase::Closed => true,
        };
        drop(st);
        if close {
            self.close();
        }
    }

    /// Counts (and maybe logs) a connection closed in the handshake for
    /// `why`.
    fn cut_short(&self, why: Refusal) {
        let Some(unlogged) = self.counters.refused(why, Instant::now()) else {
            return;
        };
        let peer = &self.peer;
        match why {
            Refusal::Handshakes => {
                tracing::warn!(%peer, unlogged, "NBD connection closed in the handshake to make room: --nbd-max-handshakes connections were in it and this one had made the least progress")
            }
            _ => {
                tracing::warn!(%peer, unlogged, "NBD connection closed: not in transmission within --nbd-handshake-timeout")
            }
        }
    }

    fn close(&self) {
        let poller = self.poller.borrow_mut().take();
        if poller.is_some() {
            // First: the accept loop's total must not lag the export's count.
            let established = self.admission.borrow_mut().close();
            self.counters.connection_closed(established);
            tracing::debug!(peer = %self.peer, "NBD connection closed");
        }
        let mut st = self.state.borrow_mut();
        if let Some(mut tls) = st.tls.take() {
            tls.close(&self.sock);
        }
        let phase = std::mem::replace(&mut st.phase, Phase::Closed);
        drop(st);
        drop(phase); // the channel and the export attachment go here
        drop(self.reg.borrow_mut().take());
        drop(poller);
    }

    fn read_input(&self) {
        let mut st = self.state.borrow_mut();
        if st.eof || st.output.len() > OUTPUT_HIGH_WATER {
            return;
        }
        // Drop what was consumed, then read into spare capacity (no zeroing).
        let start = std::mem::take(&mut st.start);
        st.input.drain(..start);
        st.input.reserve(READ_CHUNK);
        let st = &mut *st;
        if let Some(tls) = &mut st.tls {
            match tls.read(&self.sock, &mut st.input, &self.peer) {
                TlsRead::Open => {}
                TlsRead::Closed => st.eof = true,
                TlsRead::Failed(e) => {
                    // The alert rustls queued goes out before the close.
                    tracing::info!(peer = %self.peer, "NBD TLS failed: {e}");
                    st.eof = true;
                }
            }
            return;
        }
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
            // Checked per request, not only once a round: a request that
            // arrives after the unshare returned is never executed.
            st.phase.notice_closing();
            // `start` never passes the input's end (it moves by what a step
            // used of this slice); an empty slice if it did.
            let input = st.input.get(st.start..).unwrap_or_default();
            let output = &mut st.output;
            let backlog = output.len() > OUTPUT_HIGH_WATER;
            let step = match &mut st.phase {
                Phase::Handshake(hs) => match hs.feed(input, output.bytes()) {
                    Ok((used, None)) => {
                        if used > 0 {
                            self.admission.borrow().progressed();
                        }
                        Ok(Step::Used(used))
                    }
                    Ok((used, Some(Outcome::StartTls))) => {
                        self.admission.borrow().progressed();
                        st.start += used;
                        if st.start < st.input.len() {
                            // Sent before the ACK it had to wait for: it
                            // would be read as TLS. Refused, not guessed at.
                            tracing::info!(
                                peer = %self.peer,
                                "NBD connection closed: the client sent data after STARTTLS before its reply"
                            );
                            st.start = st.input.len();
                            st.eof = true;
                            return;
                        }
                        match self.start_tls(output) {
                            Ok(tls) => st.tls = Some(Box::new(tls)),
                            Err(e) => {
                                tracing::warn!(peer = %self.peer, "NBD TLS: {e}");
                                st.eof = true;
                            }
                        }
                        return;
                    }
                    Ok((used, Some(outcome))) => {
                        st.start += used;
                        match self.begin_transmission(outcome) {
                            Some(tx) => {
                                st.phase = Phase::Transmission(Box::new(tx));
                                continue;
                            }
                            None => {
                                // ABORT (acknowledged), a hard disconnect,
                                // or an export that could not be attached.
                                st.eof = true;
                                return;
                            }
                        }
                    }
                    Err(e) => Err(e.into()),
                },
                Phase::Transmission(_) | Phase::Refusing(_) if backlog => return,
                Phase::Transmission(tx) => self.next_request(tx, input, output).map(Step::Used),
                Phase::Refusing(r) => match self.pending_payload(&mut r.tx, input, output) {
                    Some(used) => Ok(Step::Used(used)),
                    None => {
                        let tx = &mut r.tx;
                        self.refuse_next(&tx.counters, tx.structured, &mut tx.skip, input, output)
                    }
                },
                Phase::Lingering(l) => {
                    self.refuse_next(&l.counters, l.structured, &mut l.skip, input, output)
                }
                Phase::Closed => return,
            };
            match step {
                Ok(Step::Used(used)) => {
                    st.start += used;
                    if used == 0 {
                        return;
                    }
                }
                Ok(Step::Disc(used)) => {
                    st.start += used;
                    if matches!(st.phase, Phase::Refusing(_)) {
                        // Answer what was taken, then close.
                        st.phase.disconnect();
                    } else {
                        st.eof = true;
                        return;
                    }
                }
                Err(e) => {
                    match &e {
                        ConnError::Handshake(_) => tracing::info!(peer = %self.peer, "NBD {e}"),
                        ConnError::Protocol(_) => {
                            tracing::info!(peer = %self.peer, "NBD connection closed: {e}")
                        }
                    }
                    match &st.phase {
                        Phase::Transmission(tx) => tx.counters.error(0),
                        Phase::Refusing(r) => r.tx.counters.error(0),
                        _ => {}
                    }
                    st.start = st.input.len();
                    st.eof = true;
                    return;
                }
            }
        }
    }

    /// The session `STARTTLS` starts, which first sends what `output` holds
    /// (the `ACK`) in the clear.
    fn start_tls(&self, output: &mut Output) -> Result<TlsSession, String> {
        let config = self
            .tls_config
            .server()
            .ok_or_else(|| format!("STARTTLS accepted with TLS {}", TlsMode::Off))?;
        // Outside transmission the output is bytes only, the unsent last.
        let unsent = output.len();
        let bytes = output.bytes();
        let clear = bytes
            .get(bytes.len().saturating_sub(unsent)..)
            .unwrap_or_default()
            .to_vec();
        output.clear();
        TlsSession::new(config.clone(), clear).map_err(|e| e.to_string())
    }

    /// Attaches the export the option phase chose; `None` for any other
    /// ending, or if it cannot be attached.
    fn begin_transmission(&self, outcome: Outcome) -> Option<Tx> {
        let Outcome::Transmission {
            export,
            structured_replies: structured,
            meta_context_base_allocation: block_status,
            ..
        } = outcome
        else {
            return None;
        };
        let attachment = self.exports.attach(Protocol::Nbd, &export.name)?;
        let ch = match attachment.desc.open_channel() {
            Ok(ch) => ch,
            Err(e) => {
                tracing::warn!(peer = %self.peer, "NBD: {e}");
                return None;
            }
        };
        let bufs = Buffers::new();
        tracing::debug!(peer = %self.peer, export = export.name, structured, "NBD transmission");
        self.admission.borrow_mut().establish();
        self.counters.session_started();
        let counters = self.counters.export(&export.name);
        // Every reactor holds a slot; a connection elsewhere counts no durations.
        *self.durations.borrow_mut() =
            core_slot::current().and_then(|s| counters.durations.core(s));
        Some(Tx {
            counters,
            ch,
            attachment,
            export,
            structured,
            block_status,
            bufs,
            payload: None,
            skip: 0,
            disc: false,
        })
    }

    /// Payload bytes the connection is in the middle of: a refused WRITE's
    /// to skip, or a taken WRITE's to fill in (submitting it once whole).
    /// `None` when there are none.
    fn pending_payload(
        self: &Rc<Self>,
        tx: &mut Tx,
        input: &[u8],
        output: &mut Output,
    ) -> Option<usize> {
        if tx.skip > 0 {
            let n = tx.skip.min(input.len());
            tx.skip -= n;
            return Some(n);
        }
        let (req, mut buf, filled) = tx.payload.take()?;
        // The buffer holds the whole payload (taken for `req.length`
        // bytes), `filled` of them in.
        let unfilled = buf
            .as_mut_slice()
            .get_mut(filled..req.length as usize)
            .unwrap_or_default();
        let n = unfilled.len().min(input.len());
        if let (Some(to), Some(from)) = (unfilled.get_mut(..n), input.get(..n)) {
            to.copy_from_slice(from);
        }
        if filled + n < req.length as usize {
            tx.payload = Some((req, buf, filled + n));
        } else {
            let io = IoRequest::write(buf, req.offset, req.length as u64)
                .fua(req.has_flag(CMD_FLAG_FUA));
            self.submit(tx, &req, io, output, self.payload_start.get());
        }
        Some(n)
    }

    /// Takes the next request (or payload bytes) from `input`. Returns how
    /// many bytes it consumed (0: it needs more input, or a buffer).
    fn next_request(
        self: &Rc<Self>,
        tx: &mut Tx,
        input: &[u8],
        output: &mut Output,
    ) -> Result<usize, ConnError> {
        if let Some(n) = self.pending_payload(tx, input, output) {
            return Ok(n);
        }
        if tx.disc {
            return Ok(0);
        }
        let Some((req, used)) = RequestParser::parse(input)? else {
            return Ok(0);
        };
        let mut start = tsc::now();
        let valid = validate(&req, &tx.export, tx.structured, tx.block_status.is_some());
        let buf = match (valid, req.kind) {
            (Ok(()), Command::Read | Command::Write) => match tx.bufs.take(req.length as usize) {
                Ok(Some(buf)) => {
                    if self.starved.replace(false) {
                        // Its header was first read when it starved.
                        start = self.starved_since.get();
                    }
                    Some(buf)
                }
                // Every buffer is out: wait for one to come back (the
                // request is parsed, and counted, again then).
                Ok(None) => {
                    if !self.starved.replace(true) {
                        self.starved_since.set(start);
                    }
                    return Ok(0);
                }
                // No memory for a buffer, and none out to come back: the
                // request fails (ENOMEM), the connection goes on.
                Err(e) => {
                    tracing::warn!(peer = %self.peer, "NBD: {e}");
                    tx.counters.request(req.kind);
                    self.hold.accepted();
                    self.refuse(tx, &req, ENOMEM, output);
                    return Ok(used);
                }
            },
            _ => None,
        };
        tx.counters.request(req.kind);
        if req.kind != Command::Disc {
            self.hold.accepted();
        }
        if let Err(errno) = valid {
            self.refuse(tx, &req, errno, output);
            return Ok(used);
        }
        let (offset, len) = (req.offset, req.length as u64);
        match (req.kind, buf) {
            (Command::Read, Some(buf)) => {
                self.submit(tx, &req, IoRequest::read(buf, offset, len), output, start);
            }
            (Command::Write, Some(buf)) => {
                tx.payload = Some((req, buf, 0));
                self.payload_start.set(start);
            }
            // Never: `validate` refuses unknown commands, and a valid READ
            // or WRITE took a buffer above. Refused as `validate` would.
            (Command::Unknown(_) | Command::Read | Command::Write, _) => {
                self.refuse(tx, &req, EINVAL, output);
            }
            (Command::Flush, _) => {
                let io = IoRequest::no_data(IoType::Flush, 0, 0);
                self.submit(tx, &req, io, output, start);
            }
            (Command::Trim, _) => {
                let io = IoRequest::no_data(IoType::Unmap, offset, len);
                self.submit(tx, &req, io, output, start);
            }
            (Command::WriteZeroes, _) => {
                let io = IoRequest::no_data(IoType::WriteZeroes, offset, len);
                self.submit(tx, &req, io, output, start);
            }
            (Command::Cache, _) => {
                // Device memory is as close as a cache gets: nothing to do.
                put_simple_reply(output.bytes(), req.cookie, 0);
                self.hold.replied(start);
                self.reply_queued(req.kind, start);
            }
            (Command::BlockStatus, _) => {
                let export = &tx.export;
                // `validate` checked that the range is within the export.
                let end = offset.saturating_add(len).min(export.size);
                let len = end.saturating_sub(offset).min(u32::MAX as u64) as u32;
                let id = tx.block_status.unwrap_or(0);
                put_block_status(
                    output.bytes(),
                    req.cookie,
                    id,
                    &[(len, export.data_kind.block_status_flags())],
                    true,
                );
                self.hold.replied(start);
                self.reply_queued(req.kind, start);
            }
            (Command::Disc, _) => {
                tx.disc = true;
            }
        }
        Ok(used)
    }

    /// Answers `req` with `errno`, its payload (if any) skipped.
    fn refuse(&self, tx: &mut Tx, req: &Request, errno: u32, output: &mut Output) {
        tx.skip = req.payload_len();
        tx.counters.error(errno);
        self.reply_error(tx.structured, req, errno, output);
    }

    /// Submits `io` for `req`, read at `start` (TSC).
    fn submit(
        self: &Rc<Self>,
        tx: &Tx,
        req: &Request,
        mut io: IoRequest,
        output: &mut Output,
        start: u64,
    ) {
        io.tag = req.cookie;
        let cb: Rc<dyn IoCompletion> = self.clone();
        match tx.ch.submit(io, cb) {
            Ok(()) => {
                self.in_flight.set(self.in_flight.get() + 1);
                // The others are submitted as their header is read: their
                // IO's submission time is their start.
                if req.kind == Command::Write {
                    self.writes.borrow_mut().push((req.cookie, start));
                }
            }
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
    /// answered `ESHUTDOWN`, unexecuted.
    fn refuse_next(
        &self,
        counters: &ExportCounters,
        structured: bool,
        skip: &mut usize,
        input: &[u8],
        output: &mut Output,
    ) -> Result<Step, ConnError> {
        if *skip > 0 {
            let n = (*skip).min(input.len());
            *skip -= n;
            return Ok(Step::Used(n));
        }
        let Some((req, used)) = RequestParser::parse(input)? else {
            return Ok(Step::Used(0));
        };
        counters.request(req.kind);
        if req.kind == Command::Disc {
            return Ok(Step::Disc(used));
        }
        counters.error(ESHUTDOWN);
        self.reply_error(structured, &req, ESHUTDOWN, output);
        *skip = req.payload_len();
        Ok(Step::Used(used))
    }

    fn reply_error(&self, structured: bool, req: &Request, errno: u32, output: &mut Output) {
        let now = tsc::now();
        self.hold.replied(now);
        self.reply_queued(req.kind, now);
        let read = req.kind == Command::Read;
        put_error(output, structured, read, req.cookie, errno);
    }

    /// The command of a completed IO and when its request was read (TSC).
    fn started(&self, io: &IoDone) -> (Command, u64) {
        let cmd = match io.op() {
            IoType::Read => Command::Read,
            IoType::Write => Command::Write,
            IoType::Flush => Command::Flush,
            IoType::Unmap => Command::Trim,
            IoType::WriteZeroes => Command::WriteZeroes,
            _ => Command::Unknown(0),
        };
        if cmd != Command::Write {
            return (cmd, io.submit_tsc());
        }
        let mut writes = self.writes.borrow_mut();
        match writes.iter().position(|&(cookie, _)| cookie == io.tag()) {
            Some(i) => (cmd, writes.swap_remove(i).1),
            None => (cmd, io.submit_tsc()),
        }
    }

    /// The connection's own `Rc` (it is alive: the reactor upgraded its
    /// registration's weak handler to call us).
    fn self_rc(&self) -> Option<Rc<Connection>> {
        self.me.upgrade()
    }
}

fn errno_of(e: &IoError) -> u32 {
    match e {
        IoError::Unaligned { .. } | IoError::Empty(_) | IoError::Buffer { .. } => EINVAL,
        IoError::OutOfRange { .. } => ENOSPC,
        IoError::Unsupported(_) => ENOTSUP,
        IoError::Device(_) => EIO,
    }
}

/// Appends the reply to a completed IO. READ data goes out of the IO
/// buffer itself; a device that placed none (it reads as zeroes) gets a
/// hole chunk, or zeroes in the buffer for a simple reply.
fn put_completion(output: &mut Output, structured: bool, io: &mut IoDone) {
    let (cookie, op, offset, len) = (io.tag(), io.op(), io.offset(), io.len());
    match io.status() {
        Ok(()) if op == IoType::Read => {
            if structured && io.reads_zeroes() {
                put_offset_hole(output.bytes(), cookie, offset, len as u32, true);
                return;
            }
            // A READ carries its buffer, of `len` bytes or more: one that
            // did not would be answered EIO.
            let buf = io.take_buf();
            let Some(mut buf) = buf.filter(|b| b.as_slice().len() >= len as usize) else {
                put_error(output, structured, true, cookie, EIO);
                return;
            };
            if io.reads_zeroes()
                && let Some(data) = buf.as_mut_slice().get_mut(..len as usize)
            {
                data.fill(0);
            }
            if structured {
                put_offset_data_header(output.bytes(), cookie, offset, len as u32, true);
            } else {
                put_simple_reply(output.bytes(), cookie, 0);
            }
            output.push_data(buf, len as usize);
        }
        Ok(()) => put_simple_reply(output.bytes(), cookie, 0),
        Err(e) => put_error(output, structured, op == IoType::Read, cookie, errno_of(&e)),
    }
}

/// Appends an error reply: a structured error chunk to a READ when
/// structured replies are on, else a simple reply.
fn put_error(output: &mut Output, structured: bool, read: bool, cookie: u64, errno: u32) {
    if structured && read {
        put_structured_error(output.bytes(), cookie, errno, error_message(errno), true);
    } else {
        put_simple_reply(output.bytes(), cookie, errno);
    }
}

impl IoCompletion for Connection {
    fn complete(self: Rc<Self>, mut io: IoDone) {
        self.in_flight.set(self.in_flight.get() - 1);
        self.hold.replied(tsc::now());
        let (cmd, start) = self.started(&io);
        {
            let mut st = self.state.borrow_mut();
            let st = &mut *st;
            if !st.eof {
                put_completion(&mut st.output, st.phase.structured(), &mut io);
                self.reply_queued(cmd, start);
            }
        }
        // Any buffer not queued for the client (a WRITE's, a failed READ's)
        // goes back now: it may unblock a request waiting for one.
        drop(io);
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
