//! One NVMe/TCP queue pair (one TCP connection), from ICReq to close, on
//! the reactor it was given.
//!
//! Thread: the connection's reactor, from accept to close. Its socket is
//! non-blocking and registered with the reactor's epoll set. An admin
//! queue keeps its controller's state here (properties, features, keep
//! alive, held Asynchronous Event Requests); an I/O queue submits its
//! commands on an [`IoChannel`](crate::bdev::IoChannel) of this reactor,
//! many at once, and answers them as they complete: READ data goes out as
//! the IO buffer itself after a C2HData header, in one vectored write
//! with the response capsule.
//!
//! A malformed PDU gets a C2HTermReq with the fatal error status the
//! transport specification names, and the connection closes once that is
//! sent and its IO in flight has completed; nothing else is read from it.

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::auth::{Outcome, Transaction, message as auth_msg};
use super::command::{Command, admin, fctype, io as nvm, sgl};
use super::completion::{Completion, Status};
use super::controller::Controller;
use super::identify::{self, ControllerFacts, CopyLimits, NamespaceFacts};
use super::listener::Listener;
use super::nqn;
use super::pdu::{self, Digests, Fes, Header, PduError, flags, kind};
use super::target::Target;
use crate::bdev::{IoChannel, IoCompletion, IoDone, IoError, IoRequest, IoType};
use crate::env::tsc;
use crate::export::{Attachment, Buffers, HandshakeSlot, Output, Protocol, ShareWatch, Stream};
use crate::pool::IoBuf;
use crate::reactor::{self, FdHandler, FdRegistration, Interest, Poll, PollerHandle, Readiness};

/// Bytes read from the socket per read call.
const READ_CHUNK: usize = 256 << 10;
/// Bytes read behind data received straight into an IO buffer: its data
/// digest and the next H2CData header with its header digest, so that the
/// next Write's data can go straight to its buffer too.
const AFTER_DATA: usize = 4 + pdu::DATA_HLEN + 4;
/// The Copy command's limits: 256 blocks per source range, 128 ranges
/// (their list, 4 KiB, fits the capsule), 4096 blocks per command.
pub const COPY_LIMITS: CopyLimits = CopyLimits {
    range_blocks: 256,
    command_blocks: 4096,
    ranges: 128,
};
/// Command Size Limit Exceeded (a Copy beyond the advertised limits).
const COMMAND_SIZE_LIMIT_EXCEEDED: Status = Status(0x183);
/// Longest a connection may take from accept to its Connect: one that
/// has not connected by then is closed, so idle sockets cannot hold the
/// target's connection slots.
pub const CONNECT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);
/// Stop reading while this much output waits for the host.
const OUTPUT_HIGH_WATER: usize = 64 << 20;
/// Property offsets.
const PROP_CAP: u32 = 0x00;
const PROP_VS: u32 = 0x08;
const PROP_CC: u32 = 0x14;
const PROP_CSTS: u32 = 0x1C;
/// Feature identifiers.
const FEAT_ARBITRATION: u8 = 0x01;
const FEAT_POWER: u8 = 0x02;
const FEAT_TEMPERATURE: u8 = 0x04;
const FEAT_ERROR_RECOVERY: u8 = 0x05;
const FEAT_VWC: u8 = 0x06;
const FEAT_NUM_QUEUES: u8 = 0x07;
const FEAT_ASYNC_EVENT: u8 = 0x0B;
const FEAT_KATO: u8 = 0x0F;
/// Transient Transport Error: a data digest did not match.
const TRANSIENT_TRANSPORT_ERROR: Status = Status(0x022);
/// Connect's CATTR bit: the host disables SQ flow control.
const CATTR_SQ_FLOW_OFF: u8 = 0x04;
/// Namespace is Write Protected.
const WRITE_PROTECTED: Status = Status(0x020);
/// Connect's result: authentication (DH-HMAC-CHAP) is required (ATR).
const AUTHREQ_ATR: u32 = 1 << 17;

/// CAP: MQES, CQR, TO (15 s), CSS NVM, MPSMIN 4 KiB, MPSMAX 4 KiB.
const fn cap(queue_entries: u16) -> u64 {
    (queue_entries as u64 - 1) | 1 << 16 | 30 << 24 | 1 << 37
}

/// What a queue is doing.
enum Phase {
    /// Waiting for the host's ICReq.
    Init,
    /// Waiting for the Connect that says which queue this is.
    Connecting,
    /// The admin queue of `Admin::ctrl`.
    Admin(Box<Admin>),
    /// An I/O queue.
    Io(Box<IoQueue>),
}

/// The queue's in-band authentication (DH-HMAC-CHAP).
enum Auth {
    /// Not required (or not yet: before the Connect).
    Open,
    /// Required and not done: only AUTH_Send and AUTH_Receive are
    /// executed; a failed transaction stays here until the queue closes.
    Pending(Box<Transaction>),
    /// Done: the host authenticated.
    Done,
}

impl Auth {
    /// Whether commands other than AUTH_Send / AUTH_Receive may run.
    fn is_open(&self) -> bool {
        !matches!(self, Auth::Pending(_))
    }

    /// Whether `cmd` may run: any command once open, else only AUTH_Send
    /// and AUTH_Receive.
    fn admits(&self, cmd: &Command) -> bool {
        self.is_open()
            || (cmd.opcode() == admin::FABRICS
                && matches!(cmd.fctype(), fctype::AUTH_SEND | fctype::AUTH_RECEIVE))
    }
}

struct Admin {
    ctrl: Arc<Controller>,
    /// Keep-alive timeout in TSC ticks (0: none), and when the last
    /// command arrived.
    kato: u64,
    last: u64,
    /// Command IDs of the Asynchronous Event Requests held.
    aers: Vec<u16>,
    /// The namespace went away (the Changed Namespace List names it).
    ns_changed: bool,
    /// The share's closing flag (none on the discovery controller): an
    /// unshare is seen at the next round.
    watch: Option<ShareWatch>,
    /// The share's namespace, for Identify (none on the discovery
    /// controller).
    ns: Option<NamespaceFacts>,
    serial: String,
}

struct IoQueue {
    ctrl: Arc<Controller>,
    ch: IoChannel,
    bufs: Buffers,
    /// Declared after `ch`: the device is released after the channel.
    attachment: Attachment,
    block_size: u64,
    blocks: u64,
    read_only: bool,
}

/// A command the I/O queue took and has not answered.
struct Slot {
    cid: u16,
    op: u8,
    buf: Option<IoBuf>,
    len: usize,
    /// Bytes of a Write's or Compare's data received.
    got: usize,
    /// An R2T asked for the data.
    r2t: bool,
    offset: u64,
    /// Device IOs in flight for it (DSM: one per range).
    pending: u32,
    /// A Compare's second buffer, for the device's data.
    spare: Option<IoBuf>,
    status: Status,
}

struct State {
    phase: Phase,
    input: Vec<u8>,
    start: usize,
    output: Output,
    eof: bool,
    digests: Digests,
    /// Queue id, size, and the submission queue head reported in CQEs.
    qid: u16,
    qsize: u16,
    sqhd: u16,
    slots: Vec<Option<Slot>>,
    free: Vec<u16>,
    /// The data PDU whose data is being received straight into its IO
    /// buffer (its header handled, its data not all here yet).
    inbound: Option<Inbound>,
    /// Bytes still to come of a PDU that was handled before all of it
    /// arrived and whose data is not wanted (the command was refused).
    skip: usize,
    /// Commands whose data an R2T asked for and has not all come: while
    /// there are some, reads stop at PDU headers, so that the data that
    /// follows a header is read into its buffer rather than the input.
    awaiting: u32,
    /// The host disabled SQ flow control (Connect's CATTR): a successful
    /// read's C2HData carries SUCCESS and no response capsule follows.
    sqhd_off: bool,
    /// A C2HTermReq went out: read nothing more, close once it is sent.
    terminated: bool,
    /// When the connection must have connected, and authenticated if it
    /// must (TSC).
    connect_by: u64,
    auth: Auth,
}

/// Data of a Write or Compare arriving straight into the IO buffer of the
/// command in slot `tag` (bytes `at..end` of it still to come).
struct Inbound {
    tag: u16,
    /// Where in the buffer this PDU's data started, and where the bytes
    /// read straight into the buffer start.
    start: usize,
    direct: usize,
    at: usize,
    end: usize,
    /// CRC-32C of the PDU's data before `direct` (data digests on).
    crc: u32,
    /// The PDU's flags.
    flags: u8,
}

/// The data of the PDU being handled: the part of it in the input, its
/// whole length, and its digest when data digests are on and it is here.
#[derive(Clone, Copy)]
struct PduData<'a> {
    here: &'a [u8],
    len: usize,
    digest: Option<u32>,
}

impl<'a> PduData<'a> {
    /// The data of the PDU whose bytes so far are `b` (all of them once
    /// `b` is as long as PLEN), `len` bytes long.
    fn of(d: Digests, hdr: &Header, b: &'a [u8], len: usize) -> PduData<'a> {
        if hdr.pdo == 0 {
            return PduData {
                here: &[],
                len: 0,
                digest: None,
            };
        }
        let at = hdr.pdo as usize;
        let here = &b[at..b.len().min(at + len)];
        let digest = (d.data && b.len() >= at + len + 4)
            .then(|| u32::from_le_bytes(b[at + len..at + len + 4].try_into().expect("4 bytes")));
        PduData { here, len, digest }
    }

    fn complete(&self) -> bool {
        self.here.len() == self.len
    }

    /// Whether the digest (if any) matches the data (which is all here).
    fn digest_ok(&self) -> bool {
        self.digest
            .is_none_or(|want| pdu::crc32c(0, self.here) == want)
    }
}

/// A queue pair.
pub struct Connection {
    sock: Rc<Stream>,
    state: RefCell<State>,
    in_flight: Cell<u32>,
    /// A command waits for an IO buffer.
    starved: Cell<bool>,
    reg: RefCell<Option<FdRegistration>>,
    poller: RefCell<Option<PollerHandle>>,
    server: Arc<Target>,
    /// The listener that accepted it, and its place among the listener's
    /// connections not connected yet (`None` once its Connect succeeded).
    listener: Arc<Listener>,
    connecting: RefCell<Option<HandshakeSlot>>,
    peer: String,
    me: Weak<Connection>,
}

/// What handling one command gave: a completion, maybe with data for the
/// host, or nothing yet (the command went to the device or is held).
enum Answer {
    Now(Completion, Option<Vec<u8>>),
    Later,
}

fn status_of(e: &IoError) -> Status {
    match e {
        IoError::OutOfRange { .. } => Status::LBA_OUT_OF_RANGE,
        IoError::Unaligned { .. } | IoError::Empty(_) | IoError::Buffer { .. } => {
            Status::INVALID_FIELD
        }
        IoError::Unsupported(_) => Status::INVALID_OPCODE,
        IoError::Device(_) => Status::INTERNAL_ERROR,
    }
}

impl Connection {
    /// Starts serving `sock` on the calling reactor.
    pub fn start(
        sock: Stream,
        peer: String,
        server: Arc<Target>,
        listener: Arc<Listener>,
        slot: HandshakeSlot,
    ) {
        if let Err(e) = sock.set_nonblocking() {
            tracing::warn!(%peer, "NVMe/TCP connection dropped: {e}");
            listener.closed();
            return;
        }
        let conn = Rc::new_cyclic(|me| Connection {
            me: me.clone(),
            sock: Rc::new(sock),
            state: RefCell::new(State {
                phase: Phase::Init,
                input: Vec::with_capacity(2 * READ_CHUNK),
                start: 0,
                output: Output::with_capacity(4096),
                eof: false,
                digests: Digests::default(),
                qid: 0,
                qsize: 0,
                sqhd: 0,
                slots: Vec::new(),
                free: Vec::new(),
                inbound: None,
                skip: 0,
                sqhd_off: false,
                awaiting: 0,
                terminated: false,
                connect_by: tsc::now() + tsc::ns_to_ticks(CONNECT_DEADLINE.as_nanos() as u64),
                auth: Auth::Open,
            }),
            in_flight: Cell::new(0),
            starved: Cell::new(false),
            reg: RefCell::new(None),
            poller: RefCell::new(None),
            server,
            listener,
            connecting: RefCell::new(Some(slot)),
            peer,
        });
        let weak: Weak<dyn FdHandler> = Rc::downgrade(&conn) as Weak<dyn FdHandler>;
        match reactor::register_fd(conn.sock.clone(), Interest::READ, weak) {
            Ok(r) => *conn.reg.borrow_mut() = Some(r),
            Err(e) => {
                tracing::warn!(peer = %conn.peer, "NVMe/TCP connection dropped: {e}");
                conn.listener.closed();
                return;
            }
        }
        conn.server.connection_opened();
        tracing::debug!(peer = %conn.peer, "NVMe/TCP connection");
        let c = conn.clone();
        *conn.poller.borrow_mut() = Some(reactor::register_poller("nvmf-conn", move || c.tick()));
    }

    /// Once a round: keep-alive expiry, a controller torn down, an
    /// unshare; pending output; close when done.
    fn tick(self: &Rc<Self>) -> Poll {
        {
            let mut guard = self.state.borrow_mut();
            let st = &mut *guard;
            let now = tsc::now();
            let terminated = st.terminated;
            let mut announce = None;
            let unauthenticated = !st.auth.is_open();
            if unauthenticated && now < st.connect_by {
                reactor::wake_by(st.connect_by);
            }
            // Evicted for a newcomer while still connecting (the accept
            // loop counted and logged it).
            let evicted = self
                .connecting
                .borrow()
                .as_ref()
                .is_some_and(HandshakeSlot::evicted);
            let gone = match &mut st.phase {
                Phase::Admin(_) | Phase::Io(_) if unauthenticated && evicted => true,
                Phase::Admin(_) | Phase::Io(_) if unauthenticated && now >= st.connect_by => {
                    if let Some(n) = self.listener.deadline_log.note(Instant::now()) {
                        tracing::info!(peer = %self.peer, unlogged = n, "NVMe/TCP connection closed: not authenticated within {CONNECT_DEADLINE:?}");
                    }
                    true
                }
                Phase::Admin(a) => {
                    if a.kato != 0 && now.saturating_sub(a.last) > a.kato {
                        tracing::info!(peer = %self.peer, cntlid = a.ctrl.cntlid, "NVMe/TCP keep-alive timeout: controller torn down");
                        true
                    } else {
                        if a.kato != 0 {
                            reactor::wake_by(a.last + a.kato + 1);
                        }
                        let closing = a.watch.as_ref().is_some_and(ShareWatch::closing);
                        if closing && !a.ctrl.is_dead() && !terminated {
                            // The namespace is gone: a held Asynchronous
                            // Event Request says so (a notice, namespace
                            // attribute changed, log page 04h), then the
                            // controller closes once that is sent.
                            tracing::info!(peer = %self.peer, cntlid = a.ctrl.cntlid, "NVMe/TCP share gone: namespace removal announced, controller closing");
                            a.ns_changed = true;
                            announce = Some(a.aers.pop());
                            false
                        } else {
                            a.ctrl.is_dead()
                        }
                    }
                }
                Phase::Io(q) => q.ctrl.is_dead() || q.attachment.closing(),
                Phase::Init | Phase::Connecting => {
                    if evicted {
                        true
                    } else if now >= st.connect_by {
                        let log = &self.listener.deadline_log;
                        if let Some(n) = log.note(Instant::now()) {
                            tracing::info!(peer = %self.peer, unlogged = n, "NVMe/TCP connection closed: no Connect within {CONNECT_DEADLINE:?}");
                        }
                        true
                    } else {
                        reactor::wake_by(st.connect_by);
                        false
                    }
                }
            };
            if let Some(aer) = announce {
                st.terminated = true;
                if let Some(cid) = aer {
                    let mut c = Completion::new(cid, Status::SUCCESS);
                    c.dw0 = 0x0004_0002;
                    self.respond(st, c, None);
                }
            }
            if gone {
                st.eof = true;
            }
        }
        let busy = if self.has_output() {
            self.flush()
        } else {
            false
        };
        self.maybe_close();
        if busy { Poll::Busy } else { Poll::Idle }
    }

    fn has_output(&self) -> bool {
        !self.state.borrow().output.is_empty()
    }

    /// Writes what it can; returns whether anything was written.
    fn flush(self: &Rc<Self>) -> bool {
        let mut st = self.state.borrow_mut();
        let flushed = st.output.flush(&self.sock, self.reg.borrow().as_ref());
        if flushed.gone {
            st.eof = true;
        }
        drop(st);
        if flushed.released && self.starved.get() {
            self.process();
        }
        flushed.wrote
    }

    /// Closes once the host is gone (or the connection was terminated and
    /// its output sent) and nothing is in flight.
    fn maybe_close(&self) {
        if self.in_flight.get() != 0 {
            return;
        }
        let st = self.state.borrow();
        let close = st.eof || (st.terminated && st.output.is_empty());
        drop(st);
        if close {
            self.close();
        }
    }

    fn close(&self) {
        let poller = self.poller.borrow_mut().take();
        if poller.is_none() {
            return;
        }
        self.server.connection_closed();
        drop(self.connecting.take());
        self.listener.closed();
        let phase = {
            let mut st = self.state.borrow_mut();
            // The IO buffers that commands and the output still hold go
            // back to the queue's pools before the pools go with the phase.
            st.inbound = None;
            st.slots.clear();
            st.free.clear();
            st.output.clear();
            std::mem::replace(&mut st.phase, Phase::Init)
        };
        match &phase {
            Phase::Admin(a) => {
                // The admin queue goes: so does its controller, and its
                // I/O queues close at their next round.
                self.server.controllers.remove(&a.ctrl);
                tracing::debug!(peer = %self.peer, cntlid = a.ctrl.cntlid, "NVMe/TCP controller gone");
            }
            Phase::Io(q) => {
                q.ctrl.connected_io_queues.fetch_sub(1, Ordering::AcqRel);
            }
            _ => {}
        }
        drop(phase); // the channel and the attachment go here
        tracing::debug!(peer = %self.peer, "NVMe/TCP connection closed");
        drop(self.reg.borrow_mut().take());
        drop(poller);
    }

    fn read_input(&self) {
        let mut guard = self.state.borrow_mut();
        let st = &mut *guard;
        if st.eof || st.terminated || st.output.len() > OUTPUT_HIGH_WATER {
            return;
        }
        let start = std::mem::take(&mut st.start);
        st.input.drain(..start);
        let fd = self.sock.clone();
        let got = match &mut st.inbound {
            Some(inb) => {
                // Data straight into its IO buffer, and what follows it
                // (its digest, the next header) into the input.
                let buf = st.slots[inb.tag as usize]
                    .as_mut()
                    .and_then(|s| s.buf.as_mut())
                    .expect("an inbound command's buffer");
                let mut after = [0u8; AFTER_DATA];
                let mut iov = [
                    io::IoSliceMut::new(&mut buf.as_mut_slice()[inb.at..inb.end]),
                    io::IoSliceMut::new(&mut after),
                ];
                rustix::io::readv(&*fd, &mut iov).inspect(|&n| {
                    let direct = n.min(inb.end - inb.at);
                    inb.at += direct;
                    st.input.extend_from_slice(&after[..n - direct]);
                })
            }
            None => {
                let want = Self::read_size(st);
                st.input.reserve(want);
                let len = st.input.len();
                let spare = &mut st.input.spare_capacity_mut()[..want];
                let got = rustix::io::read(&*fd, spare).map(|(init, _)| init.len());
                if let Ok(n) = got {
                    // SAFETY: the read initialised the first `n` bytes of
                    // the spare capacity, which directly follow `len`.
                    unsafe { st.input.set_len(len + n) };
                }
                got
            }
        };
        match got {
            Ok(0) => st.eof = true,
            Ok(_) => {}
            Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => st.eof = true,
        }
    }

    /// How much to read into the input: a large chunk, unless Writes'
    /// data is awaited after R2Ts; then up to the end of the next PDU's
    /// header (an H2CData header when its common header is not here yet),
    /// so that its data is read straight into its buffer.
    fn read_size(st: &State) -> usize {
        let b = &st.input[st.start..];
        if st.awaiting == 0 || st.skip > 0 {
            return READ_CHUNK;
        }
        if b.len() < pdu::COMMON_HEADER {
            let hdgst = if st.digests.header { 4 } else { 0 };
            return pdu::DATA_HLEN + hdgst - b.len();
        }
        let hdr = Header::parse(b);
        let upto = if hdr.pdo != 0 {
            hdr.pdo as usize
        } else {
            hdr.plen as usize
        };
        if upto > b.len() {
            (upto - b.len()).min(READ_CHUNK)
        } else {
            // The header is here and its data was not taken into a buffer
            // (none free): the data comes into the input.
            READ_CHUNK
        }
    }

    /// Handles every whole PDU buffered, and the header of a Write's data
    /// PDU whose data is still on its way (the data then goes straight to
    /// the command's IO buffer).
    fn process(self: &Rc<Self>) {
        let mut guard = self.state.borrow_mut();
        let st = &mut *guard;
        // The input is taken out while its PDUs are handled where they lie
        // (handling never reads the input otherwise), so no PDU is copied.
        let input = std::mem::take(&mut st.input);
        let max_plen = self.server.limits.max_pdu();
        loop {
            if st.terminated || st.eof || st.output.len() > OUTPUT_HIGH_WATER {
                break;
            }
            if st.skip > 0 {
                let n = st.skip.min(input.len() - st.start);
                st.start += n;
                st.skip -= n;
                if st.skip > 0 {
                    break;
                }
            }
            if st.inbound.is_some() {
                if !self.inbound_done(st, &input[st.start..]) {
                    break;
                }
                continue;
            }
            let b = &input[st.start..];
            if b.len() < pdu::COMMON_HEADER {
                break;
            }
            let hdr = Header::parse(b);
            let data_len = match hdr.check(st.digests, max_plen) {
                Ok(n) => n,
                Err(e) => {
                    self.terminate(st, e, &b[..b.len().min(hdr.hlen as usize)]);
                    break;
                }
            };
            let plen = hdr.plen as usize;
            if b.len() < plen && !Self::takes_data_directly(st, &hdr, b) {
                break;
            }
            let pdu_bytes = &b[..b.len().min(plen)];
            if let Err(e) = self.check_header_digest(st.digests, &hdr, pdu_bytes) {
                self.terminate(st, e, &pdu_bytes[..hdr.hlen as usize]);
                break;
            }
            let data = PduData::of(st.digests, &hdr, pdu_bytes, data_len);
            match self.handle(st, &hdr, pdu_bytes, data) {
                Ok(true) => {
                    st.start += pdu_bytes.len();
                    // Handled without its data (refused): the rest of the
                    // PDU is dropped as it comes. (Taken data is inbound.)
                    if pdu_bytes.len() < plen && st.inbound.is_none() {
                        st.skip = plen - pdu_bytes.len();
                    }
                }
                // Waits for an IO buffer: the same PDU is handled again.
                Ok(false) => break,
                Err(e) => {
                    self.terminate(st, e, &pdu_bytes[..hdr.hlen as usize]);
                    break;
                }
            }
        }
        st.input = input;
    }

    /// Whether the PDU at the front of the input (`b`, not all of it here)
    /// is handled now, its data going straight to an IO buffer: an
    /// H2CData, or a Write's or Compare's capsule on an I/O queue, whose
    /// header (and header digest) is here.
    fn takes_data_directly(st: &State, hdr: &Header, b: &[u8]) -> bool {
        if hdr.pdo == 0 || b.len() < hdr.pdo as usize || !matches!(st.phase, Phase::Io(_)) {
            return false;
        }
        match hdr.kind {
            kind::H2C_DATA => true,
            kind::CAPSULE_CMD => matches!(b[pdu::COMMON_HEADER], nvm::WRITE | nvm::COMPARE),
            _ => false,
        }
    }

    /// The data being received straight into a buffer: once all of it
    /// and its digest (if any) are in, it counts as received. Returns
    /// whether it was (`b`: the input after it).
    fn inbound_done(self: &Rc<Self>, st: &mut State, b: &[u8]) -> bool {
        let inb = st.inbound.as_ref().expect("data inbound");
        if inb.at < inb.end {
            return false;
        }
        let mut digest_ok = true;
        if st.digests.data {
            if b.len() < 4 {
                return false;
            }
            let want = u32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
            let buf = st.slots[inb.tag as usize]
                .as_ref()
                .and_then(|s| s.buf.as_ref())
                .expect("an inbound command's buffer");
            digest_ok = pdu::crc32c(inb.crc, &buf.as_slice()[inb.direct..inb.end]) == want;
            st.start += 4;
        }
        let inb = st.inbound.take().expect("data inbound");
        self.data_received(st, inb.tag, inb.end - inb.start, digest_ok, inb.flags);
        true
    }

    fn check_header_digest(
        &self,
        d: Digests,
        hdr: &Header,
        pdu_bytes: &[u8],
    ) -> Result<(), PduError> {
        if !d.header || hdr.kind == kind::IC_REQ || hdr.kind == kind::H2C_TERM_REQ {
            return Ok(());
        }
        let hlen = hdr.hlen as usize;
        let want = u32::from_le_bytes(pdu_bytes[hlen..hlen + 4].try_into().expect("4 bytes"));
        if pdu::crc32c(0, &pdu_bytes[..hlen]) != want {
            return Err(PduError::new(Fes::HeaderDigest, "header digest mismatch"));
        }
        Ok(())
    }

    /// Sends a C2HTermReq and stops reading.
    fn terminate(&self, st: &mut State, e: PduError, quoted: &[u8]) {
        tracing::info!(peer = %self.peer, "NVMe/TCP connection terminated: {e}");
        self.server.counters.pdu_error();
        pdu::put_c2h_term_req(st.output.bytes(), &e, quoted);
        st.terminated = true;
    }

    /// Handles one whole PDU. `Ok(false)`: not handled yet (no buffer).
    fn handle(
        self: &Rc<Self>,
        st: &mut State,
        hdr: &Header,
        b: &[u8],
        data: PduData,
    ) -> Result<bool, PduError> {
        match (hdr.kind, &st.phase) {
            (kind::IC_REQ, Phase::Init) => {
                let pfv = u16::from_le_bytes([b[8], b[9]]);
                if pfv != 0 {
                    return Err(PduError {
                        fes: Fes::InvalidHeaderField,
                        fei: 8,
                        why: format!("ICReq PFV {pfv}"),
                    });
                }
                let dgst = b[11];
                st.digests = Digests {
                    header: dgst & 1 != 0,
                    data: dgst & 2 != 0,
                };
                pdu::put_ic_resp(
                    st.output.bytes(),
                    st.digests,
                    self.server.limits.max_h2c_data(),
                );
                st.phase = Phase::Connecting;
                if let Some(s) = self.connecting.borrow().as_ref() {
                    s.progressed();
                }
                Ok(true)
            }
            (kind::IC_REQ, _) => Err(PduError::new(Fes::PduSequence, "a second ICReq")),
            (_, Phase::Init) => Err(PduError::new(Fes::PduSequence, "a PDU before ICReq")),
            (kind::H2C_TERM_REQ, _) => {
                tracing::info!(peer = %self.peer, fes = u16::from_le_bytes([b[8], b[9]]), "NVMe/TCP host terminated the connection");
                st.eof = true;
                Ok(true)
            }
            (kind::CAPSULE_CMD, _) => {
                let cmd = Command::from_slice(&b[pdu::COMMON_HEADER..]);
                let admin_queue = !matches!(st.phase, Phase::Io(_));
                let opcode = cmd.opcode();
                // A Write's or Compare's data digest is checked as the data
                // is copied to its buffer; other data is here whole.
                let to_buffer = !admin_queue && matches!(cmd.opcode(), nvm::WRITE | nvm::COMPARE);
                if !to_buffer && !data.digest_ok() {
                    self.server.counters.command(admin_queue, opcode);
                    self.advance_sqhd(st);
                    self.respond(
                        st,
                        Completion::new(cmd.cid(), TRANSIENT_TRANSPORT_ERROR),
                        None,
                    );
                    return Ok(true);
                }
                if !st.auth.admits(&cmd) {
                    // Not executed, not counted as a command: the host has
                    // not authenticated.
                    self.advance_sqhd(st);
                    self.respond(st, Completion::new(cmd.cid(), Status::AUTH_REQUIRED), None);
                    return Ok(true);
                }
                let handled = self.capsule(st, cmd, data);
                if let Ok(true) = handled {
                    // Counted once taken (not each time it waits for a
                    // buffer).
                    self.server.counters.command(admin_queue, opcode);
                }
                if matches!(st.phase, Phase::Admin(_) | Phase::Io(_)) && st.auth.is_open() {
                    // Connected, and authenticated if its host has a
                    // secret: it leaves the connecting ones.
                    drop(self.connecting.take());
                }
                handled
            }
            (kind::H2C_DATA, Phase::Io(_)) => {
                self.h2c_data(st, hdr, b, data)?;
                Ok(true)
            }
            (k, _) => Err(PduError::new(
                Fes::PduSequence,
                format!("PDU type {k:#x} here"),
            )),
        }
    }

    fn advance_sqhd(&self, st: &mut State) {
        if st.qsize > 0 {
            st.sqhd = (st.sqhd + 1) % st.qsize;
        }
    }

    /// Appends the answer to a command: its data in a C2HData PDU (at most
    /// what the host's SGL asked for), then its response capsule.
    fn respond(&self, st: &mut State, mut c: Completion, data: Option<(Vec<u8>, usize)>) {
        if let Some((bytes, max)) = data {
            let n = bytes.len().min(max);
            if n > 0 {
                let end = flags::LAST_PDU;
                pdu::put_c2h_data(st.output.bytes(), c.cid, 0, n as u32, end, st.digests);
                st.output.bytes().extend_from_slice(&bytes[..n]);
                if st.digests.data {
                    let crc = pdu::crc32c(0, &bytes[..n]);
                    st.output.bytes().extend_from_slice(&crc.to_le_bytes());
                }
            }
        }
        c.sqhd = st.sqhd;
        let cqe = c.to_bytes(st.qid);
        pdu::put_capsule_resp(st.output.bytes(), &cqe, st.digests);
        if c.status != 0 {
            self.server.counters.error(Status(c.status));
        }
    }

    /// Handles a command capsule. `Ok(false)`: it waits for an IO buffer.
    fn capsule(
        self: &Rc<Self>,
        st: &mut State,
        cmd: Command,
        data: PduData,
    ) -> Result<bool, PduError> {
        let cid = cmd.cid();
        if let Phase::Io(_) = st.phase
            && cmd.opcode() != admin::FABRICS
        {
            return self.io_command(st, cmd, data);
        }
        self.advance_sqhd(st);
        let answer = if cmd.opcode() == admin::FABRICS {
            self.fabrics(st, &cmd, data.here)
        } else {
            match &mut st.phase {
                Phase::Admin(a) => {
                    a.last = tsc::now();
                    self.admin_command(a, &cmd)
                }
                _ => Answer::Now(Completion::new(cid, Status::COMMAND_SEQUENCE_ERROR), None),
            }
        };
        if let Answer::Now(c, data) = answer {
            let max = cmd.sgl().1 as usize;
            self.respond(st, c, data.map(|d| (d, max)));
        }
        Ok(true)
    }

    fn fabrics(self: &Rc<Self>, st: &mut State, cmd: &Command, data: &[u8]) -> Answer {
        let cid = cmd.cid();
        let ctrl = match &st.phase {
            Phase::Admin(a) => Some(a.ctrl.clone()),
            Phase::Io(q) => Some(q.ctrl.clone()),
            _ => None,
        };
        match (cmd.fctype(), ctrl) {
            (fctype::CONNECT, None) => self.connect(st, cmd, data),
            (fctype::CONNECT, Some(_)) => {
                Answer::Now(Completion::new(cid, Status::COMMAND_SEQUENCE_ERROR), None)
            }
            (fctype::PROPERTY_GET, Some(ctrl)) if st.qid == 0 => {
                let v = match cmd.property_offset() {
                    PROP_CAP => Some(cap(self.server.limits.queue_entries)),
                    PROP_VS => Some(0x0002_0000),
                    PROP_CC => Some(ctrl.cc() as u64),
                    PROP_CSTS => Some(ctrl.csts() as u64),
                    _ => None,
                };
                match v {
                    Some(v) => {
                        let mut c = Completion::new(cid, Status::SUCCESS);
                        c.dw0 = v as u32;
                        c.dw1 = (v >> 32) as u32;
                        Answer::Now(c, None)
                    }
                    None => Answer::Now(Completion::new(cid, Status::INVALID_FIELD), None),
                }
            }
            (fctype::PROPERTY_SET, Some(ctrl)) if st.qid == 0 => {
                if cmd.property_offset() != PROP_CC {
                    return Answer::Now(Completion::new(cid, Status::INVALID_FIELD), None);
                }
                let cc = cmd.property_value() as u32;
                ctrl.set_cc(cc);
                tracing::debug!(peer = %self.peer, cntlid = ctrl.cntlid, cc = format_args!("{cc:#x}"), "NVMe/TCP CC set");
                Answer::Now(Completion::new(cid, Status::SUCCESS), None)
            }
            (fctype::AUTH_SEND, Some(ctrl)) => self.auth_send(st, &ctrl, cmd, data),
            (fctype::AUTH_RECEIVE, Some(ctrl)) => self.auth_receive(st, &ctrl, cmd),
            (fctype::DISCONNECT, Some(_)) => {
                st.eof = true;
                Answer::Now(Completion::new(cid, Status::SUCCESS), None)
            }
            (_, None) => Answer::Now(Completion::new(cid, Status::COMMAND_SEQUENCE_ERROR), None),
            _ => Answer::Now(Completion::new(cid, Status::INVALID_OPCODE), None),
        }
    }

    /// Connect: the admin queue makes a controller, an I/O queue joins
    /// one.
    fn connect(self: &Rc<Self>, st: &mut State, cmd: &Command, data: &[u8]) -> Answer {
        let cid = cmd.cid();
        let invalid = |attr_data: bool, offset: u16| {
            let mut c = Completion::new(cid, Status::CONNECT_INVALID_PARAMETERS);
            c.dw0 = attr_data as u32 | (offset as u32) << 16;
            Answer::Now(c, None)
        };
        if data.len() < 1024 {
            return Answer::Now(Completion::new(cid, Status::SGL_LENGTH_INVALID), None);
        }
        if u16::from_le_bytes([cmd.0[40], cmd.0[41]]) != 0 {
            return Answer::Now(
                Completion::new(cid, Status::CONNECT_INCOMPATIBLE_FORMAT),
                None,
            );
        }
        let qid = cmd.connect_qid();
        let sqsize = cmd.connect_sqsize();
        if sqsize == 0 || sqsize >= self.server.limits.queue_entries {
            return invalid(false, 44);
        }
        let cntlid = u16::from_le_bytes([data[16], data[17]]);
        let subnqn = nqn::field(&data[256..512]);
        let hostnqn = nqn::field(&data[512..768]);
        st.qid = qid;
        st.qsize = sqsize + 1;
        st.sqhd_off = cmd.connect_cattr() & CATTR_SQ_FLOW_OFF != 0;
        st.sqhd = 1 % st.qsize;
        if qid == 0 {
            if cntlid != 0xFFFF {
                return invalid(true, 16);
            }
            let (export, ns, serial, watch, dhchap) = if subnqn == nqn::DISCOVERY_NQN {
                (None, None, String::from("discovery"), None, None)
            } else {
                let Some(sub) = self.server.subsystems.find(&subnqn) else {
                    return invalid(true, 256);
                };
                let Some(watch) = self.server.exports.watch(Protocol::Nvmf, &sub.export) else {
                    return invalid(true, 256); // unshared meanwhile
                };
                let Some(share) = self.server.exports.find(Protocol::Nvmf, &sub.export) else {
                    return invalid(true, 256); // unshared meanwhile
                };
                if !sub.allowed_hosts.is_empty() && !sub.allowed_hosts.contains(&hostnqn) {
                    tracing::warn!(peer = %self.peer, subnqn, hostnqn, "NVMe/TCP Connect refused: the host is not allowed");
                    let mut c = Completion::new(cid, Status::CONNECT_INVALID_HOST);
                    c.dw0 = 1 | 512 << 16; // the data's HOSTNQN field
                    return Answer::Now(c, None);
                }
                let bdev = share.desc.bdev();
                let ns = NamespaceFacts {
                    blocks: bdev.num_blocks(),
                    block_size: bdev.block_size(),
                    uuid: *bdev.uuid().as_bytes(),
                    copy: COPY_LIMITS,
                };
                let serial = bdev.uuid().simple().to_string()[..20].to_string();
                let dhchap = sub.dhchap.get(&hostnqn);
                (Some(share.name), Some(ns), serial, Some(watch), dhchap)
            };
            let ctrl = self
                .server
                .controllers
                .create(subnqn, hostnqn, export, dhchap);
            let kato = cmd.connect_kato() as u64;
            tracing::info!(peer = %self.peer, cntlid = ctrl.cntlid, subnqn = ctrl.subnqn, hostnqn = ctrl.hostnqn, authentication = ctrl.dhchap.is_some(), "NVMe/TCP controller connected");
            let mut c = Completion::new(cid, Status::SUCCESS);
            c.dw0 = ctrl.cntlid as u32 | self.require_auth(st, &ctrl);
            st.phase = Phase::Admin(Box::new(Admin {
                ctrl,
                kato: tsc::ns_to_ticks(kato * 1_000_000),
                last: tsc::now(),
                aers: Vec::new(),
                ns_changed: false,
                watch,
                ns,
                serial,
            }));
            return Answer::Now(c, None);
        }
        let Some(ctrl) = self.server.controllers.get(cntlid) else {
            return invalid(true, 16);
        };
        if ctrl.subnqn != subnqn {
            return invalid(true, 256);
        }
        if ctrl.hostnqn != hostnqn {
            return invalid(true, 512);
        }
        if !ctrl.enabled() || ctrl.export.is_none() {
            return Answer::Now(Completion::new(cid, Status::COMMAND_SEQUENCE_ERROR), None);
        }
        if qid as u32 > ctrl.io_queues.load(Ordering::Acquire) {
            return invalid(false, 42);
        }
        let name = ctrl.export.clone().expect("checked above");
        let Some(attachment) = self.server.exports.attach(Protocol::Nvmf, &name) else {
            return Answer::Now(Completion::new(cid, Status::CONNECT_CONTROLLER_BUSY), None);
        };
        let ch = match attachment.desc.open_channel() {
            Ok(ch) => ch,
            Err(e) => {
                tracing::warn!(peer = %self.peer, "NVMe/TCP: {e}");
                return Answer::Now(Completion::new(cid, Status::INTERNAL_ERROR), None);
            }
        };
        let bufs = match Buffers::new() {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(peer = %self.peer, "NVMe/TCP: {e}");
                return Answer::Now(Completion::new(cid, Status::INTERNAL_ERROR), None);
            }
        };
        let bdev = attachment.desc.bdev().clone();
        let read_only = self
            .server
            .exports
            .find(Protocol::Nvmf, &name)
            .is_some_and(|s| s.read_only);
        ctrl.connected_io_queues.fetch_add(1, Ordering::AcqRel);
        tracing::debug!(peer = %self.peer, cntlid, qid, "NVMe/TCP I/O queue connected");
        let atr = self.require_auth(st, &ctrl);
        st.slots = (0..st.qsize).map(|_| None).collect();
        st.free = (0..st.qsize).rev().collect();
        st.phase = Phase::Io(Box::new(IoQueue {
            ctrl,
            ch,
            bufs,
            attachment,
            block_size: bdev.block_size() as u64,
            blocks: bdev.num_blocks(),
            read_only,
        }));
        let mut c = Completion::new(cid, Status::SUCCESS);
        c.dw0 = atr;
        Answer::Now(c, None)
    }

    /// After a successful Connect to `ctrl`: when its host has secrets,
    /// the queue must authenticate before anything else runs. Returns the
    /// Connect result's AUTHREQ bits.
    fn require_auth(&self, st: &mut State, ctrl: &Controller) -> u32 {
        match &ctrl.dhchap {
            Some(keys) => {
                let t = Transaction::new(keys.clone(), &ctrl.hostnqn, &ctrl.subnqn);
                st.auth = Auth::Pending(Box::new(t));
                AUTHREQ_ATR
            }
            None => 0,
        }
    }

    /// Checks an AUTH_Send's or AUTH_Receive's protocol fields and length;
    /// the status to refuse it with, if any.
    fn auth_refusal(cmd: &Command) -> Option<Status> {
        let (spsp0, spsp1, secp) = cmd.auth_protocol();
        if secp != auth_msg::SECP_DHCHAP
            || spsp0 != auth_msg::SPSP
            || spsp1 != auth_msg::SPSP
            || cmd.auth_len() == 0
        {
            return Some(Status::INVALID_FIELD);
        }
        None
    }

    /// AUTH_Send: a DH-HMAC-CHAP message for the queue's transaction.
    fn auth_send(&self, st: &mut State, ctrl: &Controller, cmd: &Command, data: &[u8]) -> Answer {
        let cid = cmd.cid();
        if let Some(s) = Self::auth_refusal(cmd) {
            return Answer::Now(Completion::new(cid, s), None);
        }
        if data.len() != cmd.auth_len() as usize {
            return Answer::Now(Completion::new(cid, Status::SGL_LENGTH_INVALID), None);
        }
        let Auth::Pending(t) = &mut st.auth else {
            // Nothing to authenticate, or done (no re-authentication).
            return Answer::Now(Completion::new(cid, Status::COMMAND_SEQUENCE_ERROR), None);
        };
        t.send(data);
        self.auth_settled(st, ctrl);
        Answer::Now(Completion::new(cid, Status::SUCCESS), None)
    }

    /// AUTH_Receive: the DH-HMAC-CHAP message the host is due.
    fn auth_receive(&self, st: &mut State, ctrl: &Controller, cmd: &Command) -> Answer {
        let cid = cmd.cid();
        if let Some(s) = Self::auth_refusal(cmd) {
            return Answer::Now(Completion::new(cid, s), None);
        }
        let Auth::Pending(t) = &mut st.auth else {
            return Answer::Now(Completion::new(cid, Status::COMMAND_SEQUENCE_ERROR), None);
        };
        let msg = t.receive(cmd.auth_len() as usize);
        self.auth_settled(st, ctrl);
        Answer::Now(Completion::new(cid, Status::SUCCESS), Some(msg))
    }

    /// Once the queue's transaction is over: authenticated, the queue runs
    /// commands; failed, the controller is torn down and the queue closes
    /// once its answer (the Failure1) is sent, executing nothing more.
    fn auth_settled(&self, st: &mut State, ctrl: &Controller) {
        let Auth::Pending(t) = &st.auth else { return };
        let (hash, group) = t.negotiated();
        match t.outcome() {
            Outcome::Pending => {}
            Outcome::Authenticated => {
                tracing::info!(peer = %self.peer, cntlid = ctrl.cntlid, qid = st.qid, hostnqn = ctrl.hostnqn, hash, dhgroup = group, "NVMe/TCP host authenticated (DH-HMAC-CHAP)");
                st.auth = Auth::Done;
            }
            Outcome::Failed(why) => {
                tracing::warn!(peer = %self.peer, cntlid = ctrl.cntlid, qid = st.qid, hostnqn = ctrl.hostnqn, subnqn = ctrl.subnqn, reason = why, "NVMe/TCP authentication failed (DH-HMAC-CHAP): controller torn down");
                st.terminated = true;
                self.server.controllers.remove(ctrl);
            }
        }
    }

    fn admin_command(&self, a: &mut Admin, cmd: &Command) -> Answer {
        let cid = cmd.cid();
        let ok = |data: Vec<u8>| Answer::Now(Completion::new(cid, Status::SUCCESS), Some(data));
        let discovery = a.ctrl.export.is_none();
        match cmd.opcode() {
            admin::IDENTIFY => {
                let cns = cmd.cdw(10) & 0xFF;
                let csi = (cmd.cdw(11) >> 24) & 0xFF;
                match (cns, &a.ns) {
                    (1, _) => ok(identify::controller(&ControllerFacts {
                        cntlid: a.ctrl.cntlid,
                        serial: &a.serial,
                        model: "io-engine",
                        subnqn: &a.ctrl.subnqn,
                        mdts: self.server.limits.mdts(),
                        capsule_bytes: (64 + self.server.limits.in_capsule) as u32,
                        max_commands: self.server.limits.queue_entries,
                        namespaces: if discovery { 0 } else { 1 },
                        discovery,
                    })),
                    (0, Some(ns)) if cmd.nsid() == 1 => ok(identify::namespace(ns)),
                    (0, Some(_)) if cmd.nsid() == 0xFFFF_FFFF => {
                        Answer::Now(Completion::new(cid, Status::INVALID_NAMESPACE), None)
                    }
                    (0, Some(_)) => {
                        Answer::Now(Completion::new(cid, Status::INVALID_NAMESPACE), None)
                    }
                    (2, Some(_)) => ok(identify::active_namespaces(cmd.nsid())),
                    (3, Some(ns)) if cmd.nsid() == 1 => {
                        ok(identify::namespace_descriptors(&ns.uuid))
                    }
                    // The NVM command set's specific structures: nothing
                    // beyond the defaults.
                    (5 | 6, Some(_)) if csi == 0 => ok(vec![0; identify::IDENTIFY_LEN]),
                    _ => Answer::Now(Completion::new(cid, Status::INVALID_FIELD), None),
                }
            }
            admin::GET_LOG_PAGE => {
                let lid = (cmd.cdw(10) & 0xFF) as u8;
                let numd = ((cmd.cdw(10) >> 16) | (cmd.cdw(11) & 0xFFFF) << 16) as usize + 1;
                let offset = (cmd.cdw(12) as u64 | (cmd.cdw(13) as u64) << 32) as usize;
                let page = match lid {
                    0x01 => Some(vec![0u8; 64]),
                    0x02 => {
                        let s = self
                            .server
                            .exports
                            .find(Protocol::Nvmf, a.ctrl.export.as_deref().unwrap_or(""));
                        let (rb, wb, r, w) = s
                            .map(|s| {
                                let st = s.desc.io_stats();
                                let (rd, wr) = (st.op(IoType::Read), st.op(IoType::Write));
                                (rd.bytes, wr.bytes, rd.ops, wr.ops)
                            })
                            .unwrap_or_default();
                        Some(identify::smart_log(rb, wb, r, w))
                    }
                    0x03 => Some(identify::firmware_log()),
                    0x04 => {
                        let mut list = vec![0u8; 4096];
                        if std::mem::take(&mut a.ns_changed) {
                            list[..4].copy_from_slice(&1u32.to_le_bytes());
                        }
                        Some(list)
                    }
                    0x05 => Some(identify::effects_log(discovery)),
                    0x70 if discovery => Some(self.server.discovery_log()),
                    _ => None,
                };
                match page {
                    Some(p) => {
                        let from = offset.min(p.len());
                        let to = (from + numd * 4).min(p.len());
                        ok(p[from..to].to_vec())
                    }
                    None => Answer::Now(Completion::new(cid, Status::INVALID_LOG_PAGE), None),
                }
            }
            admin::SET_FEATURES | admin::GET_FEATURES => {
                let set = cmd.opcode() == admin::SET_FEATURES;
                let fid = (cmd.cdw(10) & 0xFF) as u8;
                if set && cmd.cdw(10) & (1 << 31) != 0 {
                    return Answer::Now(Completion::new(cid, Status::FEATURE_NOT_SAVEABLE), None);
                }
                let mut c = Completion::new(cid, Status::SUCCESS);
                match fid {
                    FEAT_NUM_QUEUES => {
                        if set {
                            let want = (cmd.cdw(11) & 0xFFFF).min(cmd.cdw(11) >> 16) + 1;
                            let granted = want.min(self.server.max_io_queues());
                            a.ctrl.io_queues.store(granted, Ordering::Release);
                        }
                        let n = a.ctrl.io_queues.load(Ordering::Acquire) - 1;
                        c.dw0 = n | n << 16;
                    }
                    FEAT_KATO => {
                        if set {
                            a.kato = tsc::ns_to_ticks(cmd.cdw(11) as u64 * 1_000_000);
                        }
                        c.dw0 = (tsc::ticks_to_ns(a.kato) / 1_000_000) as u32;
                    }
                    FEAT_ASYNC_EVENT => {}
                    // No volatile cache to enable: writes are on the
                    // device when they complete.
                    FEAT_VWC => c.dw0 = 0,
                    // The mandatory features, at their defaults: one
                    // arbitration burst, power state 0, an over-temperature
                    // threshold of 343 K, no error recovery time limit.
                    FEAT_ARBITRATION | FEAT_POWER | FEAT_ERROR_RECOVERY if !set => c.dw0 = 0,
                    FEAT_TEMPERATURE if !set => c.dw0 = 343,
                    FEAT_ARBITRATION | FEAT_POWER | FEAT_TEMPERATURE | FEAT_ERROR_RECOVERY => {}
                    _ => c.status = Status::INVALID_FIELD.0,
                }
                Answer::Now(c, None)
            }
            admin::ASYNC_EVENT => {
                if a.aers.len() >= 4 {
                    // AERL exceeded.
                    return Answer::Now(Completion::new(cid, Status(0x105)), None);
                }
                a.aers.push(cid);
                Answer::Later
            }
            admin::KEEP_ALIVE => Answer::Now(Completion::new(cid, Status::SUCCESS), None),
            admin::ABORT => {
                let mut c = Completion::new(cid, Status::SUCCESS);
                c.dw0 = 1; // not aborted
                Answer::Now(c, None)
            }
            _ => Answer::Now(Completion::new(cid, Status::INVALID_OPCODE), None),
        }
    }

    /// An NVM command on an I/O queue. `Ok(false)`: no IO buffer is free;
    /// the capsule is handled again when one comes back.
    fn io_command(
        self: &Rc<Self>,
        st: &mut State,
        cmd: Command,
        data: PduData,
    ) -> Result<bool, PduError> {
        let cid = cmd.cid();
        let Phase::Io(q) = &st.phase else {
            unreachable!("an I/O queue")
        };
        let fail = |st: &mut State, this: &Self, s: Status| {
            this.advance_sqhd(st);
            this.respond(st, Completion::new(cid, s), None);
            Ok(true)
        };
        if cmd.nsid() != 1 && cmd.opcode() != nvm::FLUSH {
            return fail(st, self, Status::INVALID_NAMESPACE);
        }
        let (bs, blocks, read_only) = (q.block_size, q.blocks, q.read_only);
        let range = |cmd: &Command| {
            let (slba, nlb) = (cmd.slba(), cmd.nlb());
            if slba.checked_add(nlb).is_none_or(|end| end > blocks) {
                Err(Status::LBA_OUT_OF_RANGE)
            } else {
                Ok((slba * bs, nlb * bs))
            }
        };
        let op = cmd.opcode();
        let (offset, len, io) = match op {
            nvm::READ | nvm::WRITE | nvm::COMPARE => {
                let (offset, len) = match range(&cmd) {
                    Ok(r) => r,
                    Err(s) => return fail(st, self, s),
                };
                if len as usize > self.server.limits.max_transfer {
                    return fail(st, self, Status::INVALID_FIELD);
                }
                if op == nvm::WRITE && read_only {
                    return fail(st, self, WRITE_PROTECTED);
                }
                let (_, sgl_len, sgl_type) = cmd.sgl();
                if sgl_len as u64 != len {
                    return fail(st, self, Status::SGL_LENGTH_INVALID);
                }
                let in_capsule = sgl_type == sgl::IN_CAPSULE;
                // Reads come by C2HData; Writes and Compares bring their
                // data in the capsule or by R2T.
                if sgl_type != sgl::TRANSPORT && (op == nvm::READ || !in_capsule) {
                    return fail(st, self, Status::SGL_TYPE_INVALID);
                }
                if in_capsule && data.len != len as usize {
                    return fail(st, self, Status::SGL_LENGTH_INVALID);
                }
                (offset, len, None)
            }
            nvm::FLUSH => (0, 0, Some(IoRequest::no_data(IoType::Flush, 0, 0))),
            nvm::WRITE_ZEROES => {
                if read_only {
                    return fail(st, self, WRITE_PROTECTED);
                }
                match range(&cmd) {
                    Ok((o, l)) => (o, l, Some(IoRequest::no_data(IoType::WriteZeroes, o, l))),
                    Err(s) => return fail(st, self, s),
                }
            }
            nvm::DSM => {
                let deallocate = cmd.cdw(11) & 4 != 0;
                if !deallocate {
                    return fail(st, self, Status::SUCCESS);
                }
                if read_only {
                    return fail(st, self, WRITE_PROTECTED);
                }
                return self.deallocate(st, &cmd, data.here);
            }
            nvm::COPY => {
                if read_only {
                    return fail(st, self, WRITE_PROTECTED);
                }
                return self.copy(st, &cmd, data.here);
            }
            _ => return fail(st, self, Status::INVALID_OPCODE),
        };
        // Take a slot (and a buffer for data): none free means the host
        // sent more than its queue holds, or buffers are out.
        let Some(&tag) = st.free.last() else {
            return fail(st, self, Status::COMMAND_SEQUENCE_ERROR);
        };
        let Phase::Io(q) = &st.phase else {
            unreachable!("an I/O queue")
        };
        let (buf, spare) = if io.is_none() {
            // A Compare takes two: the host's data and the device's.
            let take = |n: usize| {
                (0..n)
                    .map(|_| q.bufs.take(len as usize))
                    .collect::<Option<Vec<_>>>()
            };
            match take(if op == nvm::COMPARE { 2 } else { 1 }) {
                Some(mut b) => {
                    self.starved.set(false);
                    let first = b.pop();
                    (first, b.pop())
                }
                None => {
                    self.starved.set(true);
                    return Ok(false);
                }
            }
        } else {
            (None, None)
        };
        st.free.pop();
        self.advance_sqhd(st);
        st.slots[tag as usize] = Some(Slot {
            cid,
            op,
            buf,
            len: len as usize,
            got: 0,
            r2t: false,
            offset,
            pending: 0,
            spare,
            status: Status::SUCCESS,
        });
        match (op, io) {
            (_, Some(io)) => self.submit(st, tag, io),
            (nvm::READ, None) => {
                let buf = st.slots[tag as usize]
                    .as_mut()
                    .and_then(|s| s.buf.take())
                    .expect("a READ's buffer");
                self.submit(st, tag, IoRequest::read(buf, offset, len));
            }
            _ if data.len > 0 => self.receive(st, tag, 0, data, 0),
            _ => {
                // The data comes in H2CData PDUs: ask for all of it.
                pdu::put_r2t(st.output.bytes(), cid, tag, 0, len as u32, st.digests);
                st.slots[tag as usize].as_mut().expect("taken above").r2t = true;
                st.awaiting += 1;
            }
        }
        Ok(true)
    }

    /// Dataset Management with Deallocate: one unmap per range, the
    /// command answered when the last completes.
    fn deallocate(
        self: &Rc<Self>,
        st: &mut State,
        cmd: &Command,
        data: &[u8],
    ) -> Result<bool, PduError> {
        let cid = cmd.cid();
        let nr = (cmd.cdw(10) & 0xFF) as usize + 1;
        let answer = |st: &mut State, s: Status| {
            self.advance_sqhd(st);
            self.respond(st, Completion::new(cid, s), None);
            Ok(true)
        };
        if data.len() < nr * 16 {
            return answer(st, Status::SGL_LENGTH_INVALID);
        }
        let Phase::Io(q) = &st.phase else {
            unreachable!("an I/O queue")
        };
        let (bs, blocks) = (q.block_size, q.blocks);
        let mut ranges = Vec::with_capacity(nr);
        for r in data[..nr * 16].chunks_exact(16) {
            let nlb = u32::from_le_bytes(r[4..8].try_into().expect("4 bytes")) as u64;
            let slba = u64::from_le_bytes(r[8..16].try_into().expect("8 bytes"));
            if slba.checked_add(nlb).is_none_or(|e| e > blocks) {
                return answer(st, Status::LBA_OUT_OF_RANGE);
            }
            if nlb > 0 {
                ranges.push(IoRequest::no_data(IoType::Unmap, slba * bs, nlb * bs));
            }
        }
        if ranges.is_empty() {
            return answer(st, Status::SUCCESS);
        }
        self.submit_all(st, cid, nvm::DSM, ranges)
    }

    /// Copy (NVMe 2.0 Simple Copy, source range format 0): one device copy
    /// per source range, to consecutive blocks from SDLBA, the command
    /// answered when the last completes.
    fn copy(self: &Rc<Self>, st: &mut State, cmd: &Command, data: &[u8]) -> Result<bool, PduError> {
        let cid = cmd.cid();
        let answer = |st: &mut State, s: Status| {
            self.advance_sqhd(st);
            self.respond(st, Completion::new(cid, s), None);
            Ok(true)
        };
        let nr = (cmd.cdw(12) & 0xFF) as usize + 1;
        let format = (cmd.cdw(12) >> 8) & 0xF;
        if format != 0 {
            return answer(st, Status::INVALID_FIELD);
        }
        if nr > COPY_LIMITS.ranges as usize {
            return answer(st, COMMAND_SIZE_LIMIT_EXCEEDED);
        }
        if data.len() < nr * 32 {
            return answer(st, Status::SGL_LENGTH_INVALID);
        }
        let Phase::Io(q) = &st.phase else {
            unreachable!("an I/O queue")
        };
        let (bs, blocks) = (q.block_size, q.blocks);
        let mut dst = cmd.slba();
        let mut total = 0u64;
        let mut copies = Vec::with_capacity(nr);
        for r in data[..nr * 32].chunks_exact(32) {
            let slba = u64::from_le_bytes(r[8..16].try_into().expect("8 bytes"));
            let nlb = u16::from_le_bytes([r[16], r[17]]) as u64 + 1;
            total += nlb;
            if nlb > COPY_LIMITS.range_blocks as u64 || total > COPY_LIMITS.command_blocks as u64 {
                return answer(st, COMMAND_SIZE_LIMIT_EXCEEDED);
            }
            let in_range = |lba: u64| lba.checked_add(nlb).is_some_and(|e| e <= blocks);
            if !in_range(slba) || !in_range(dst) {
                return answer(st, Status::LBA_OUT_OF_RANGE);
            }
            if slba < dst + nlb && dst < slba + nlb {
                // A range that overlaps its destination has no defined
                // result.
                return answer(st, Status::INVALID_FIELD);
            }
            copies.push(IoRequest::copy(slba * bs, dst * bs, nlb * bs));
            dst += nlb;
        }
        self.submit_all(st, cid, nvm::COPY, copies)
    }

    /// Takes a slot for command `cid` (`op`) and submits `ios` for it:
    /// the command is answered when the last completes (Dataset
    /// Management: an unmap per range; Copy: a copy per range).
    fn submit_all(
        self: &Rc<Self>,
        st: &mut State,
        cid: u16,
        op: u8,
        ios: Vec<IoRequest>,
    ) -> Result<bool, PduError> {
        self.advance_sqhd(st);
        let Some(tag) = st.free.pop() else {
            self.respond(
                st,
                Completion::new(cid, Status::COMMAND_SEQUENCE_ERROR),
                None,
            );
            return Ok(true);
        };
        st.slots[tag as usize] = Some(Slot {
            cid,
            op,
            buf: None,
            len: 0,
            got: 0,
            r2t: false,
            offset: 0,
            pending: 0,
            spare: None,
            status: Status::SUCCESS,
        });
        for io in ios {
            if st.slots[tag as usize].is_none() {
                break; // refused at once and answered
            }
            self.submit(st, tag, io);
        }
        Ok(true)
    }

    /// H2CData for a WRITE the target sent an R2T for (its data here
    /// whole, or only its header and part of its data).
    fn h2c_data(
        self: &Rc<Self>,
        st: &mut State,
        hdr: &Header,
        b: &[u8],
        data: PduData,
    ) -> Result<(), PduError> {
        let cccid = u16::from_le_bytes([b[8], b[9]]);
        let ttag = u16::from_le_bytes([b[10], b[11]]);
        let datao = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes")) as usize;
        let datal = u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")) as usize;
        let slot = st
            .slots
            .get_mut(ttag as usize)
            .and_then(|s| s.as_mut())
            .filter(|s| {
                (s.op == nvm::WRITE || s.op == nvm::COMPARE) && s.buf.is_some() && s.cid == cccid
            })
            .ok_or_else(|| {
                PduError::field(10, format!("H2CData for unknown transfer tag {ttag}"))
            })?;
        if datal != data.len {
            return Err(PduError::field(
                16,
                format!("H2CData DATAL {datal} with {} bytes of data", data.len),
            ));
        }
        if datao != slot.got {
            return Err(PduError {
                fes: Fes::DataTransferOutOfRange,
                fei: datao as u32,
                why: format!("H2CData offset {datao}, expected {}", slot.got),
            });
        }
        if datao + datal > slot.len {
            return Err(PduError {
                fes: Fes::DataTransferLimitExceeded,
                fei: (datao + datal) as u32,
                why: format!("H2CData beyond the R2T's {} bytes", slot.len),
            });
        }
        self.receive(st, ttag, datao, data, hdr.flags);
        Ok(())
    }

    /// Puts the part of a PDU's data that is here into the buffer of slot
    /// `tag` from offset `at` (with its CRC-32C computed in the same pass
    /// when data digests are on); the rest, if any, is then read straight
    /// into the buffer.
    fn receive(self: &Rc<Self>, st: &mut State, tag: u16, at: usize, data: PduData, flags: u8) {
        let digests = st.digests.data;
        let slot = st.slots[tag as usize].as_mut().expect("a taken slot");
        let buf = slot.buf.as_mut().expect("a Write's or Compare's buffer");
        let n = data.here.len();
        let dst = &mut buf.as_mut_slice()[at..at + n];
        let crc = if digests {
            pdu::copy_crc32c(dst, data.here, 0)
        } else {
            dst.copy_from_slice(data.here);
            0
        };
        if data.complete() {
            let digest_ok = data.digest.is_none_or(|want| want == crc);
            self.data_received(st, tag, n, digest_ok, flags);
        } else {
            st.inbound = Some(Inbound {
                tag,
                start: at,
                direct: at + n,
                at: at + n,
                end: at + data.len,
                crc,
                flags,
            });
        }
    }

    /// `n` more bytes of the data of the command in slot `tag` are in its
    /// buffer (their digest matched or not): once all are, the command
    /// goes on (or is answered Transient Transport Error).
    fn data_received(
        self: &Rc<Self>,
        st: &mut State,
        tag: u16,
        n: usize,
        digest_ok: bool,
        pdu_flags: u8,
    ) {
        let slot = st.slots[tag as usize].as_mut().expect("a taken slot");
        slot.got += n;
        if !digest_ok {
            slot.status = TRANSIENT_TRANSPORT_ERROR;
        }
        if slot.got < slot.len {
            return;
        }
        if slot.r2t {
            st.awaiting -= 1;
            if pdu_flags & flags::LAST_PDU == 0 {
                tracing::debug!(peer = %self.peer, "NVMe/TCP: last H2CData without LAST_PDU");
            }
        }
        if slot.status.is_success() {
            self.data_in(st, tag);
        } else {
            let status = slot.status;
            self.finish(st, tag, status);
        }
    }

    /// The host's data of a Write or Compare in slot `tag` is all in its
    /// buffer: a Write goes to the device; a Compare reads the device's
    /// data into its second buffer, compared when that completes.
    fn data_in(self: &Rc<Self>, st: &mut State, tag: u16) {
        let slot = st.slots[tag as usize].as_mut().expect("a taken slot");
        let (offset, len) = (slot.offset, slot.len as u64);
        let io = if slot.op == nvm::COMPARE {
            IoRequest::read(
                slot.spare.take().expect("a Compare's second buffer"),
                offset,
                len,
            )
        } else {
            IoRequest::write(slot.buf.take().expect("a Write's buffer"), offset, len)
        };
        self.submit(st, tag, io);
    }

    fn submit(self: &Rc<Self>, st: &mut State, tag: u16, mut io: IoRequest) {
        io.tag = tag as u64;
        let Phase::Io(q) = &st.phase else {
            unreachable!("an I/O queue")
        };
        let cb: Rc<dyn IoCompletion> = self.clone();
        match q.ch.submit(io, cb) {
            Ok(()) => {
                self.in_flight.set(self.in_flight.get() + 1);
                if let Some(s) = st.slots[tag as usize].as_mut() {
                    s.pending += 1;
                }
            }
            Err(e) => {
                let status = status_of(&e.error);
                let s = st.slots[tag as usize].as_mut().expect("a taken slot");
                if s.status.is_success() {
                    s.status = status;
                }
                if s.pending == 0 {
                    self.finish(st, tag, status);
                }
            }
        }
    }

    /// Answers the command in slot `tag` and frees the slot.
    fn finish(&self, st: &mut State, tag: u16, status: Status) {
        let slot = st.slots[tag as usize].take().expect("a taken slot");
        st.free.push(tag);
        let mut c = Completion::new(slot.cid, status);
        c.sqhd = st.sqhd;
        let cqe = c.to_bytes(st.qid);
        pdu::put_capsule_resp(st.output.bytes(), &cqe, st.digests);
        if !status.is_success() {
            self.server.counters.error(status);
        } else if slot.op == nvm::WRITE {
            self.server.counters.bytes(0, slot.len as u64);
        }
    }

    /// The connection's own `Rc` (it is alive: the reactor upgraded its
    /// registration's weak handler to call us).
    fn self_rc(&self) -> Option<Rc<Connection>> {
        self.me.upgrade()
    }
}

impl IoCompletion for Connection {
    fn complete(self: Rc<Self>, mut io: IoDone) {
        self.in_flight.set(self.in_flight.get() - 1);
        {
            let mut guard = self.state.borrow_mut();
            let st = &mut *guard;
            let tag = io.tag() as u16;
            let status = match io.status() {
                Ok(()) => Status::SUCCESS,
                Err(e) => status_of(&e),
            };
            let slot = st.slots[tag as usize]
                .as_mut()
                .expect("a command in flight");
            slot.pending -= 1;
            if !status.is_success() && slot.status.is_success() {
                slot.status = status;
            }
            if slot.op == nvm::COMPARE && slot.status.is_success() {
                let len = io.len() as usize;
                let device = io.buf().map(|b| &b.as_slice()[..len]);
                let host = slot.buf.as_ref().map(|b| &b.as_slice()[..len]);
                let zeroes = io.reads_zeroes();
                let same = match (device, host) {
                    (_, Some(h)) if zeroes => h.iter().all(|&x| x == 0),
                    (Some(d), Some(h)) => d == h,
                    _ => false,
                };
                if !same {
                    slot.status = Status::COMPARE_FAILURE;
                }
            }
            if slot.pending == 0 {
                let (cid, op, status) = (slot.cid, slot.op, slot.status);
                // Nothing more goes out after a C2HTermReq, or to a host
                // that has gone.
                let silent = st.eof || st.terminated;
                // With SQ flow control off, a read's C2HData says SUCCESS
                // and is its whole answer (the host needs no SQHD).
                let mut answered = silent;
                if !silent && op == nvm::READ && status.is_success() {
                    let len = io.len() as usize;
                    let mut buf = io.take_buf().expect("a read carries its buffer");
                    if io.reads_zeroes() {
                        buf.as_mut_slice()[..len].fill(0);
                    }
                    let digests = st.digests;
                    self.server.counters.bytes(len as u64, 0);
                    answered = st.sqhd_off;
                    let end = if answered {
                        flags::LAST_PDU | flags::SUCCESS
                    } else {
                        flags::LAST_PDU
                    };
                    pdu::put_c2h_data(st.output.bytes(), cid, 0, len as u32, end, digests);
                    let crc = digests.data.then(|| pdu::crc32c(0, &buf.as_slice()[..len]));
                    st.output.push_data(buf, len);
                    if let Some(crc) = crc {
                        st.output.bytes().extend_from_slice(&crc.to_le_bytes());
                    }
                }
                if answered {
                    st.slots[tag as usize] = None;
                    st.free.push(tag);
                } else {
                    self.finish(st, tag, status);
                }
            }
        }
        drop(io);
        if self.starved.get() {
            self.process();
        }
        if self.in_flight.get() == 0 || self.state.borrow().output.len() > 64 << 10 {
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
        if this.has_output() {
            this.flush();
        }
        this.maybe_close();
    }
}
