//! One NVMe/TCP queue pair as a sans-IO state machine: bytes from the host
//! go in, PDUs to send and device IOs to submit come out, IO completions
//! go back in. It frames the host's PDUs, checks them, runs ICReq, Connect
//! and in-band authentication (`fabrics`, `auth`), the admin commands
//! (`admin`) and the NVM commands of I/O queues (`io`), and holds what the
//! queue holds: its controller, and once established its export slot, IO
//! buffers and commands in flight. It never touches a socket, a reactor
//! or a device: the transport ([`Connection`](super::connection)) reads
//! and writes the socket and submits the IOs; a test or fuzz harness
//! drives it the same way from memory.
//!
//! Thread: one reactor (the connection's), or the harness's thread; `!Send`
//! (IO buffers of the queue's pools).
//!
//! Driving it:
//! - [`recv_buf`](QueuePair::recv_buf) says where the next bytes from the
//!   host go (`None`: take none now), [`received`](QueuePair::received)
//!   how many came, [`host_gone`](QueuePair::host_gone) that the host
//!   closed; [`feed`](QueuePair::feed) does both from a slice.
//! - [`process`](QueuePair::process) handles the whole PDUs received (and
//!   the header of a Write's data still arriving, whose data then goes
//!   straight to its buffer).
//! - [`next_io`](QueuePair::next_io) hands out the device IOs to submit;
//!   [`complete`](QueuePair::complete) takes each back, ended.
//! - [`output`](QueuePair::output) is what the host is to be sent, READ
//!   data as the IO buffers themselves; [`flushed`](QueuePair::flushed)
//!   reports a flush of it.
//! - [`tick`](QueuePair::tick), once in a while, runs the timers
//!   (connect and authentication deadline, keep alive, an unshare);
//!   [`should_close`](QueuePair::should_close) says when the connection
//!   may close, and [`close`](QueuePair::close) lets everything go.
//!
//! What a host controls is bounded: the input (a buffer of at most
//! [`INPUT_BYTES`], grown as reads need it: reading
//! stops when it is full), the output (reading and handling stop while
//! more than [`OUTPUT_CAP`] waits for a host that does not read), the
//! commands in flight (the queue's size), authentication (one transaction
//! per queue, its DH computations paid from the target's budget), and
//! everything an established queue holds (granted only after
//! authentication, within the host's queue limit). A malformed PDU gets a
//! C2HTermReq with the fatal error status the transport specification
//! names, as the last thing sent; nothing else is read. No input, however
//! formed, panics it.

mod admin;
mod admin_queue;
mod auth;
mod digest;
mod digest_jobs;
mod fabrics;
mod inbound;
mod input;
mod io;
mod io_queue;
mod pdu_data;
mod pending_io;
mod phase;
mod queue_auth;
mod slot;
mod wait;

#[cfg(test)]
mod tests;

use std::sync::Arc;

pub(super) use admin_queue::AdminQueue;
use inbound::Inbound;
pub use io_queue::COPY_LIMITS;
pub(super) use io_queue::IoQueue;
use pdu_data::PduData;
pub(super) use pending_io::PendingIo;
use phase::Phase;
use queue_auth::QueueAuth;
use slot::Slot;
use wait::Wait;

use super::completion::{Completion, Status};
use super::host_queues::HostSlot;
use super::pdu::{self, DataAlignment, Digests};
use super::peer_event::PeerEvent;
use super::target::Target;
use crate::bdev::{BdevDesc, IoRequest};
use crate::env::tsc;
use crate::export::{Flushed, HandshakeSlot, Output};

/// Most bytes of the input buffer: two reads' worth, which holds any PDU
/// the target handles whole (a capsule with its in-capsule data, at most 64
/// KiB) behind a read.
pub const INPUT_BYTES: usize = 2 * READ_CHUNK;
/// Bytes of the input buffer at first: a queue that is sent little (an
/// admin queue, an idle one) holds no more.
const INPUT_FIRST: usize = 32 << 10;
/// Bytes read from the socket per read, at most.
pub const READ_CHUNK: usize = 256 << 10;
/// Room kept behind data received straight into an IO buffer: its data
/// digest and the next H2CData header with its header digest, so that the
/// next Write's data can go straight to its buffer too.
const AFTER_DATA: usize = 4 + pdu::DATA_HLEN + 4;
/// Stop reading and handling the host's PDUs while more than this waits
/// to be sent to it: a host that does not read cannot make the target
/// queue answers without bound (IO buffers of READ data count too; they
/// come from the queue's own bounded pool).
pub const OUTPUT_CAP: usize = 2 << 20;
/// Longest a terminated connection waits for its host to read the
/// C2HTermReq before it closes anyway.
const TERMINATED_LINGER: std::time::Duration = std::time::Duration::from_secs(1);
/// Longest a connection may take from accept to its Connect, and to its
/// authentication when its host must authenticate: one that has not by
/// then is closed, so idle sockets cannot hold the target's connection
/// slots.
pub const CONNECT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// A queue pair's core.
pub struct QueuePair {
    target: Arc<Target>,
    /// The host's address, for logs.
    peer: String,
    /// Its place among the listener's connections not established yet
    /// (`None` once established).
    connecting: Option<HandshakeSlot>,
    /// Its place in its host's count of queues, once established.
    host_slot: Option<HostSlot>,
    /// Connected, authenticated if it must, and holding what its queue
    /// holds: no deadline any more.
    established: bool,
    phase: Phase,
    auth: QueueAuth,
    /// Bytes from the host: those in `start..end` not handled yet.
    input: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes still to come of a PDU handled before all of it arrived whose
    /// data is not wanted (the command was refused).
    skip: usize,
    /// The data PDU whose data is being received straight into its IO
    /// buffer (its header handled, its data not all here yet).
    inbound: Option<Inbound>,
    /// Commands whose data an R2T asked for and has not all come: while
    /// there are some, reads stop at PDU headers, so that the data that
    /// follows a header is read into its buffer rather than the input.
    awaiting: u32,
    output: Output,
    digests: Digests,
    /// Where the host wants data to start in the data PDUs it is sent.
    align: DataAlignment,
    /// Queue ID, size, and the submission queue head reported in CQEs.
    qid: u16,
    qsize: u16,
    sqhd: u16,
    /// The host disabled SQ flow control (Connect's CATTR): a successful
    /// read's C2HData carries SUCCESS and no response capsule follows.
    sqhd_off: bool,
    slots: Vec<Option<Slot>>,
    free: Vec<u16>,
    /// Device IOs to submit, in order.
    ios: std::collections::VecDeque<IoRequest>,
    /// Device IOs submitted and not ended.
    in_flight: u32,
    /// Data digests handed to the transport to compute off the core.
    digest_jobs: digest_jobs::DigestJobs,
    wait: Wait,
    /// The host is gone (or must be let go): nothing more is sent.
    eof: bool,
    /// A C2HTermReq (or the answer that ends the queue) went out: read
    /// nothing more, close once it is sent.
    terminated: bool,
    /// When the terminated queue closes even if its host does not read.
    linger_until: u64,
    /// When the connection must have connected, and authenticated if it
    /// must (TSC).
    connect_by: u64,
    /// The time of the calls being handled (TSC).
    now: u64,
    closed: bool,
}

/// What handling a command gave.
enum Answer {
    /// A completion now, maybe with data for the host.
    Now(Completion, Option<Vec<u8>>),
    /// Nothing yet: the command went to the device or is held.
    Later,
    /// Not taken: it waits (for an IO buffer, a DH token) and is handled
    /// again.
    Wait,
}

impl Answer {
    /// A completion with `status` and no data.
    fn status(cid: u16, status: Status) -> Answer {
        Answer::Now(Completion::new(cid, status), None)
    }
}

impl QueuePair {
    /// A queue pair for a connection from `peer`, accepted at `now` (TSC),
    /// holding `connecting` among its listener's connections not
    /// established yet.
    pub fn new(
        target: Arc<Target>,
        peer: String,
        connecting: Option<HandshakeSlot>,
        now: u64,
    ) -> QueuePair {
        target.connection_opened();
        QueuePair {
            target,
            peer,
            connecting,
            host_slot: None,
            established: false,
            phase: Phase::Init,
            auth: QueueAuth::Open,
            input: vec![0; INPUT_FIRST],
            start: 0,
            end: 0,
            skip: 0,
            inbound: None,
            awaiting: 0,
            output: Output::with_capacity(4096),
            digests: Digests::default(),
            align: DataAlignment::NONE,
            qid: 0,
            qsize: 0,
            sqhd: 0,
            sqhd_off: false,
            slots: Vec::new(),
            free: Vec::new(),
            ios: std::collections::VecDeque::new(),
            in_flight: 0,
            digest_jobs: digest_jobs::DigestJobs::default(),
            wait: Wait::Nothing,
            eof: false,
            terminated: false,
            linger_until: u64::MAX,
            connect_by: now.saturating_add(tsc::ns_to_ticks(CONNECT_DEADLINE.as_nanos() as u64)),
            now,
            closed: false,
        }
    }

    /// The next device IO to submit, in order. Each comes back through
    /// [`complete`](Self::complete).
    #[inline]
    pub fn next_io(&mut self) -> Option<IoRequest> {
        self.ios.pop_front()
    }

    /// Device IOs handed out (or to hand out) and not ended.
    #[inline]
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// The device an established I/O queue submits to (its transport
    /// opens its channel on it).
    pub fn device(&self) -> Option<&BdevDesc> {
        match &self.phase {
            Phase::Io(q) => Some(&q.attachment.desc),
            _ => None,
        }
    }

    /// What waits to be sent to the host.
    #[inline]
    pub(in crate::export) fn output(&mut self) -> &mut Output {
        &mut self.output
    }

    /// Whether anything waits to be sent.
    #[inline]
    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    /// A flush of the output went as `f` says: a host gone is noted.
    pub(in crate::export) fn flushed(&mut self, f: &Flushed) {
        if f.gone {
            self.eof = true;
        }
    }

    /// Whether the input waits for IO buffers to come back (completions
    /// and flushes that return some should be followed by a
    /// [`process`](Self::process)).
    #[inline]
    pub fn waits_for_buffer(&self) -> bool {
        self.wait == Wait::Buffer
    }

    /// Whether [`process`](Self::process) has something to do: bytes not
    /// handled that nothing stops it from handling now.
    pub fn has_work(&self, now: u64) -> bool {
        (self.start < self.end || self.inbound.is_some()) && !self.stopped(now)
    }

    /// Whether handling stops: the host is gone, the queue terminated,
    /// too much output waits, or a DH token is not due yet.
    fn stopped(&self, now: u64) -> bool {
        self.eof
            || self.terminated
            || self.output.len() > OUTPUT_CAP
            || matches!(self.wait, Wait::Dh(at) if now < at)
    }

    /// The host closed its side (or the connection failed): nothing more
    /// is read or sent; the queue closes once its IO in flight ends.
    pub fn host_gone(&mut self) {
        self.eof = true;
    }

    /// Whether the connection may close now: the host is gone (or the
    /// queue terminated and its last PDU sent), and no IO or digest is in
    /// flight.
    pub fn should_close(&self) -> bool {
        self.in_flight == 0
            && self.digest_jobs.out() == 0
            && (self.eof || (self.terminated && self.output.is_empty()) || self.closed)
    }

    /// Bytes of heap the queue pair holds for its host: its input buffer
    /// and its output's (READ data aside: it is in IO buffers of the
    /// queue's pool). The output stops growing once more than
    /// [`OUTPUT_CAP`] waits (the answer that crossed the bound and those of
    /// IOs in flight aside), so this stays within [`INPUT_BYTES`] and
    /// twice that, whatever the host sends.
    pub fn memory(&self) -> usize {
        self.input.len() + self.output.heap_bytes()
    }

    /// Runs the timers at `now` (TSC): the connect and authentication
    /// deadline, an eviction to make room for a newcomer, keep alive, a
    /// controller torn down, an unshare (announced to the host by a held
    /// Asynchronous Event Request), a terminated queue's linger. Returns
    /// when it wants to be ticked again at the latest (`None`: no timer).
    pub fn tick(&mut self, now: u64) -> Option<u64> {
        self.now = now;
        let mut wake = None;
        let mut at = |t: u64| wake = Some(wake.map_or(t, |w: u64| w.min(t)));
        if self.terminated && now >= self.linger_until {
            self.eof = true;
        }
        if self.eof || self.closed {
            return None;
        }
        if self.terminated {
            at(self.linger_until);
        }
        if let Wait::Dh(due) = self.wait {
            at(due);
        }
        if !self.established {
            if self.connecting.as_ref().is_some_and(HandshakeSlot::evicted) {
                self.eof = true;
                return None;
            }
            if now >= self.connect_by {
                if let Some(n) = self.target.logs.note(PeerEvent::ConnectDeadline) {
                    let what = if self.phase.connected() {
                        "not authenticated"
                    } else {
                        "no Connect"
                    };
                    tracing::info!(peer = %self.peer, unlogged = n, "NVMe/TCP connection closed: {what} within {CONNECT_DEADLINE:?}");
                }
                self.eof = true;
                return None;
            }
            at(self.connect_by);
        }
        let mut announce = None;
        let gone = match &mut self.phase {
            Phase::Admin(a) if a.kato != 0 && now.saturating_sub(a.last) > a.kato => {
                if let Some(n) = self.target.logs.note(PeerEvent::KeepAliveExpired) {
                    tracing::info!(peer = %self.peer, cntlid = a.ctrl.cntlid, unlogged = n, "NVMe/TCP keep-alive timeout: controller torn down");
                }
                true
            }
            Phase::Admin(a) => {
                if a.kato != 0 {
                    at(a.last.saturating_add(a.kato).saturating_add(1));
                }
                let closing = a.watch.as_ref().is_some_and(|w| w.closing());
                if closing && !a.ctrl.is_dead() && !self.terminated {
                    // The namespace is gone: a held Asynchronous Event
                    // Request says so (a notice, namespace attribute
                    // changed, log page 04h), then the controller closes
                    // once that is sent.
                    tracing::info!(peer = %self.peer, cntlid = a.ctrl.cntlid, "NVMe/TCP share gone: namespace removal announced, controller closing");
                    a.ns_changed = true;
                    announce = Some(a.aers.pop());
                    false
                } else {
                    a.ctrl.is_dead()
                }
            }
            Phase::IoPending(p) => p.ctrl.is_dead(),
            Phase::Io(q) => q.ctrl.is_dead() || q.attachment.closing(),
            Phase::Init | Phase::Connecting => false,
        };
        if let Some(aer) = announce {
            self.terminate_after_answer();
            if let Some(cid) = aer {
                let mut c = Completion::new(cid, Status::SUCCESS);
                c.dw0 = 0x0004_0002;
                self.respond(c, None);
            }
        }
        if gone {
            self.eof = true;
        }
        wake
    }

    /// Ends the queue once what is queued is sent: nothing more is read.
    fn terminate_after_answer(&mut self) {
        if !self.terminated {
            self.terminated = true;
            self.linger_until = self
                .now
                .saturating_add(tsc::ns_to_ticks(TERMINATED_LINGER.as_nanos() as u64));
        }
    }

    /// Lets everything go: the commands' buffers and the output back to the
    /// queue's pools, the controller (an admin queue's goes with it, and
    /// its I/O queues close at their next round), the QID, the host's
    /// place, the export slot, the connection count. Called once the IO
    /// in flight has ended (the transport drops its device channel first);
    /// a second call does nothing.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.eof = true;
        self.inbound = None;
        self.slots.clear();
        self.free.clear();
        self.ios.clear();
        self.output.clear();
        self.connecting = None;
        self.host_slot = None;
        match std::mem::replace(&mut self.phase, Phase::Init) {
            Phase::Admin(a) => {
                self.target.controllers.remove(&a.ctrl);
                tracing::debug!(peer = %self.peer, cntlid = a.ctrl.cntlid, "NVMe/TCP controller gone");
            }
            Phase::Io(q) => q.ctrl.release_queue(self.qid),
            Phase::IoPending(_) | Phase::Init | Phase::Connecting => {}
        }
        self.target.connection_closed();
        tracing::debug!(peer = %self.peer, "NVMe/TCP connection closed");
    }

    /// Advances the submission queue head past a command taken.
    fn advance_sqhd(&mut self) {
        if self.qsize > 0 {
            self.sqhd = (self.sqhd + 1) % self.qsize;
        }
    }

    /// Appends the answer to a command: its data in a C2HData PDU (at most
    /// what the host's SGL asked for: `max`), then its response capsule.
    fn respond(&mut self, mut c: Completion, data: Option<(Vec<u8>, usize)>) {
        if let Some((bytes, max)) = data {
            let bytes = bytes.get(..max).unwrap_or(&bytes);
            if !bytes.is_empty() {
                let (digests, align) = (self.digests, self.align);
                let n = bytes.len() as u32;
                let out = self.output.bytes();
                pdu::put_c2h_data(out, c.cid, 0, n, pdu::flags::LAST_PDU, digests, align);
                out.extend_from_slice(bytes);
                if digests.data {
                    out.extend_from_slice(&pdu::crc32c(0, bytes).to_le_bytes());
                }
            }
        }
        c.sqhd = self.sqhd;
        let cqe = c.to_bytes(self.qid);
        pdu::put_capsule_resp(self.output.bytes(), &cqe, self.digests);
        if c.status != 0 {
            self.target.counters.error(Status(c.status));
        }
    }

    /// Copies as much of `bytes` as the queue takes now into its input (or
    /// a command's buffer) and handles it, at `now`; returns how many it
    /// took (0: it takes none now). What a transport does with a socket,
    /// done from memory: for tests and fuzzing.
    pub fn feed(&mut self, mut bytes: &[u8], now: u64) -> usize {
        let mut taken = 0;
        while !bytes.is_empty() {
            let n = match self.recv_buf() {
                None => break,
                Some(super::RecvBuf::Input(room)) => copy_into(&mut [room], bytes),
                Some(super::RecvBuf::Direct { data, after }) => {
                    copy_into(&mut [data, after], bytes)
                }
            };
            if n == 0 {
                break;
            }
            self.received(n);
            bytes = bytes.get(n..).unwrap_or_default();
            taken += n;
            self.process(now);
        }
        self.process(now);
        taken
    }

    /// Writes what waits for the host into `into`, at most `max` bytes (a
    /// host that reads that much now); returns how many. For tests and
    /// fuzzing.
    pub fn drain_output(&mut self, into: &mut Vec<u8>, max: usize) -> usize {
        let mut sink = VecSink { into, room: max };
        let mut n = 0;
        while !self.output.is_empty() {
            match self.output.write_to(&mut sink) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
        n
    }

    /// Whether the controller of this admin queue (or of the I/O queue) is
    /// still in the target's registry.
    #[cfg(test)]
    fn controller_alive(&self) -> bool {
        match &self.phase {
            Phase::Admin(a) => !a.ctrl.is_dead(),
            Phase::IoPending(p) => !p.ctrl.is_dead(),
            Phase::Io(q) => !q.ctrl.is_dead(),
            _ => false,
        }
    }

    /// The number of I/O queues established on this queue's controller.
    #[cfg(test)]
    fn controller_queues(&self) -> u32 {
        match &self.phase {
            Phase::Admin(a) => a.ctrl.connected_io_queues(),
            Phase::IoPending(p) => p.ctrl.connected_io_queues(),
            Phase::Io(q) => q.ctrl.connected_io_queues(),
            _ => 0,
        }
        .min(u32::from(u16::MAX))
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        self.close();
    }
}

/// Copies the front of `src` into `dsts` in order; returns the bytes
/// copied.
fn copy_into(dsts: &mut [&mut [u8]], src: &[u8]) -> usize {
    let mut n = 0;
    for d in dsts.iter_mut() {
        let rest = src.get(n..).unwrap_or_default();
        let k = d.len().min(rest.len());
        if let (Some(to), Some(from)) = (d.get_mut(..k), rest.get(..k)) {
            to.copy_from_slice(from);
        }
        n += k;
    }
    n
}

/// A host that reads at most `room` bytes into `into`.
struct VecSink<'a> {
    into: &'a mut Vec<u8>,
    room: usize,
}

impl crate::export::Sink for VecSink<'_> {
    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        let mut n = 0;
        for b in bufs {
            let k = b.len().min(self.room - n);
            self.into.extend_from_slice(b.get(..k).unwrap_or_default());
            n += k;
            if n == self.room {
                break;
            }
        }
        self.room -= n;
        if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }
}
