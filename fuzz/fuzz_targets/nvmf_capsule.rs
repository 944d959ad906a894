//! Fuzzes the NVMe/TCP target's queue pairs end to end: arbitrary host
//! bytes, after a valid ICReq and Connect, sent over TCP to an engine
//! running in this process.
//!
//! Thread: libFuzzer's drives the host side (plus a writer thread per
//! input, so that a target answering a lot never blocks on a host that
//! is still writing); the engine's one reactor runs the connections, and
//! a thread of `engine::testing::serve_nvmf` accepts them.
//!
//! Once per process an engine starts with one adaptive reactor on normal
//! pages, a writable 1 MiB malloc device `disk0` (512-byte blocks) and a
//! read-only 1 GiB null device `null0` (4 KiB blocks), both shared over
//! NVMe-oF, listening on 127.0.0.1. For each device an admin queue
//! connects, enables its controller (CC.EN) and asks for I/O queues, and
//! stays open for the life of the process, so that inputs can connect I/O
//! queues to it.
//!
//! The first input byte chooses the scenario:
//! - bits 1:0: the queue: 0 the discovery controller's admin queue, 1 an
//!   admin queue of the device's subsystem, 2 and 3 an I/O queue (QID 1)
//!   of the device's held controller;
//! - bit 2: header digests, bit 3: data digests (asked in the ICReq);
//! - bit 4: the device, `disk0` or `null0`;
//! - bit 5: fix the digests up: the harness recomputes the header and
//!   data digests of every PDU of the rest it can frame, so that the
//!   fuzzer gets past the digest checks.
//!
//! The rest is the host's byte stream after its ICReq and Connect (the
//! harness sends those, valid, first). The host then shuts its side
//! down (EOF) and reads everything the target sends until it closes.
//!
//! Asserted for every input:
//! - the target closes the connection within 5 s of the host's EOF;
//! - what it sent parses as a sequence of well-formed PDUs of the types a
//!   target sends: an ICResp first (echoing the digests), the Connect's
//!   successful response second, then response capsules (of this queue's
//!   SQID), C2HData and R2T PDUs with consistent HLEN, PDO, PLEN, flags
//!   and correct digests, and at most one C2HTermReq, as the last PDU; a
//!   partial PDU only at the end of a connection reset (the target closed
//!   with host bytes unread);
//! - once the connection is closed, the target's connection count, its
//!   controllers and the shares' attached I/O queues are back at their
//!   baseline, the shared IO pool has no object in use, and no pool was
//!   dropped with objects outstanding (`pool::leaked_pools`);
//! - nothing panicked: libfuzzer-sys's panic hook aborts the process on
//!   a panic on any thread, the reactor's included (a reactor catches
//!   panics of its pollers and messages, but the hook runs first).
//!
//! Seeds (`corpus/nvmf_capsule/`) are real host traffic, recorded by
//! `fuzz/capture_nvmf_seeds.py`: it runs the release `io-engine` daemon
//! with the same two devices, puts a recording TCP proxy in front of it,
//! and drives `nvmf-perf` (reads and writes in the capsule and by
//! R2T/H2CData, Copy, with and without digests) and a small raw-socket
//! host that sends the PDU sequences of the `tests` crate's NVMe/TCP
//! tests (Identify, Get Log Page, features, Property Get/Set, Keep
//! Alive, Asynchronous Event Requests, Compare, Dataset Management,
//! Write Zeroes, Flush, Disconnect) and checks that each succeeds. Each
//! recorded connection becomes one seed: its scenario byte, then what the
//! host sent after its Connect.

#![no_main]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use io_engine::engine::{Engine, testing};
use io_engine::export::Protocol;
use io_engine::export::nvmf::nqn;
use io_engine::export::nvmf::pdu::{self, Digests, Header, flags, kind};
use io_engine::pool::leaked_pools;
use libfuzzer_sys::fuzz_target;

/// The devices, shared over NVMe-oF: (name, URI, read-only).
const DEVICES: [(&str, &str, bool); 2] = [
    ("disk0", "malloc:///disk0?size_mb=1&blk_size=512", false),
    ("null0", "null:///null0?size_mb=1024&blk_size=4096", true),
];
const HOST_NQN: &str = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-00000000f022";
/// The CID of the harness's Connect.
const CONNECT_CID: u16 = 0xC0;
/// SQSIZE of every queue the harness connects (0-based: 32 entries).
const SQSIZE: u16 = 31;
/// How long the target may take to close after the host's EOF.
const CLOSE_BOUND: Duration = Duration::from_secs(5);
/// How long the counters may take to settle once the connection closed.
const SETTLE_BOUND: Duration = Duration::from_secs(1);
/// The largest C2HData payload the target sends (its MDTS, by default).
const MAX_TRANSFER: usize = 128 << 10;

/// What the target looks like with no input connected.
#[derive(Debug, PartialEq, Eq)]
struct Counters {
    connections: usize,
    controllers: usize,
    /// I/O queues attached to each share.
    attached: Vec<usize>,
    io_pool_in_use: u64,
    leaked_pools: u64,
}

/// The engine and the held admin queues, made by the first input.
struct Fixture {
    engine: Arc<Engine>,
    addr: SocketAddr,
    /// Per device, the held admin queue's controller ID.
    cntlids: [u16; 2],
    /// The held admin queues (open while the process lives).
    _admins: Vec<TcpStream>,
    baseline: Counters,
}

impl Fixture {
    fn start() -> Fixture {
        if std::env::var_os("RUST_LOG").is_some() {
            io_engine::env::logging::init("info", false);
        }
        let engine = Arc::new(testing::start_engine());
        for (name, uri, read_only) in DEVICES {
            engine.registry().create(uri).expect("create a device");
            engine
                .share(name, Protocol::Nvmf, read_only, None)
                .expect("share a device");
        }
        let addr = testing::serve_nvmf(&engine).expect("listen for NVMe/TCP");
        let mut admins = Vec::new();
        let mut cntlids = [0; 2];
        for (i, (name, ..)) in DEVICES.iter().enumerate() {
            let (sock, cntlid) = hold_admin(addr, &nqn::nqn_of(name));
            admins.push(sock);
            cntlids[i] = cntlid;
        }
        let mut fx = Fixture {
            engine,
            addr,
            cntlids,
            _admins: admins,
            baseline: Counters {
                connections: 0,
                controllers: 0,
                attached: Vec::new(),
                io_pool_in_use: 0,
                leaked_pools: 0,
            },
        };
        fx.baseline = fx.counters();
        assert_eq!(fx.baseline.connections, 2, "{:?}", fx.baseline);
        assert_eq!(fx.baseline.io_pool_in_use, 0, "{:?}", fx.baseline);
        fx
    }

    fn counters(&self) -> Counters {
        let target = self.engine.nvmf();
        let shares = self.engine.exports().list();
        Counters {
            connections: target.connections(),
            controllers: target.controllers.len(),
            attached: shares.iter().map(|s| s.connections).collect(),
            io_pool_in_use: self.engine.registry().io_pool_stats().in_use,
            leaked_pools: leaked_pools(),
        }
    }

    /// Waits for the counters to return to the baseline.
    fn settle(&self) {
        let deadline = Instant::now() + SETTLE_BOUND;
        loop {
            let now = self.counters();
            if now == self.baseline {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{SETTLE_BOUND:?} after the connection closed: {now:?}, baseline {:?}",
                self.baseline
            );
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(Fixture::start)
}

/// An ICReq asking for `digests`.
fn ic_req(digests: Digests) -> Vec<u8> {
    let mut req = vec![0u8; pdu::IC_HLEN];
    req[..8].copy_from_slice(&[kind::IC_REQ, 0, 128, 0, 128, 0, 0, 0]);
    req[11] = digests.header as u8 | (digests.data as u8) << 1;
    req[12..16].copy_from_slice(&15u32.to_le_bytes()); // MAXR2T 16
    req
}

/// A command capsule for `sqe` with `data` in the capsule.
fn capsule(sqe: &[u8; 64], data: &[u8], digests: Digests) -> Vec<u8> {
    let hlen = pdu::CAPSULE_CMD_HLEN;
    let hd = if digests.header { 4 } else { 0 };
    let dd = if digests.data && !data.is_empty() {
        4
    } else {
        0
    };
    let pdo = if data.is_empty() { 0 } else { hlen + hd };
    let plen = hlen + hd + data.len() + dd;
    let mut f = if digests.header { flags::HDGSTF } else { 0 };
    if dd != 0 {
        f |= flags::DDGSTF;
    }
    let mut b = vec![kind::CAPSULE_CMD, f, hlen as u8, pdo as u8];
    b.extend_from_slice(&(plen as u32).to_le_bytes());
    b.extend_from_slice(sqe);
    if digests.header {
        b.extend_from_slice(&pdu::crc32c(0, &b[..hlen]).to_le_bytes());
    }
    b.extend_from_slice(data);
    if dd != 0 {
        b.extend_from_slice(&pdu::crc32c(0, data).to_le_bytes());
    }
    b
}

/// A fabrics command of type `fctype` with CID `cid`.
fn fabrics(fctype: u8, cid: u16) -> [u8; 64] {
    let mut sqe = [0u8; 64];
    sqe[0] = 0x7F;
    sqe[2..4].copy_from_slice(&cid.to_le_bytes());
    sqe[4] = fctype;
    sqe
}

/// A Connect capsule of queue `qid` to controller `cntlid` of `subnqn`.
fn connect(qid: u16, cntlid: u16, subnqn: &str, digests: Digests) -> Vec<u8> {
    let mut sqe = fabrics(0x01, CONNECT_CID);
    sqe[32..36].copy_from_slice(&1024u32.to_le_bytes());
    sqe[39] = 0x01; // SGL: data block in the capsule
    sqe[42..44].copy_from_slice(&qid.to_le_bytes());
    sqe[44..46].copy_from_slice(&SQSIZE.to_le_bytes());
    let mut data = [0u8; 1024];
    data[16..18].copy_from_slice(&cntlid.to_le_bytes());
    data[256..256 + subnqn.len()].copy_from_slice(subnqn.as_bytes());
    data[512..512 + HOST_NQN.len()].copy_from_slice(HOST_NQN.as_bytes());
    capsule(&sqe, &data, digests)
}

/// Reads one PDU from a blocking socket.
fn recv_pdu(sock: &mut TcpStream) -> Vec<u8> {
    let mut b = vec![0u8; pdu::COMMON_HEADER];
    sock.read_exact(&mut b).expect("a PDU header");
    let plen = Header::parse(&b).plen as usize;
    b.resize(plen, 0);
    sock.read_exact(&mut b[pdu::COMMON_HEADER..])
        .expect("a PDU");
    b
}

/// Sends `capsule` and returns its completion's DW0 (status checked).
fn exec(sock: &mut TcpStream, capsule: &[u8]) -> u32 {
    sock.write_all(capsule).expect("send a capsule");
    let resp = recv_pdu(sock);
    assert_eq!(resp[0], kind::CAPSULE_RESP, "{resp:?}");
    let status = u16::from_le_bytes([resp[22], resp[23]]) >> 1;
    assert_eq!(status, 0, "the held admin queue's command failed: {resp:?}");
    u32::from_le_bytes(resp[8..12].try_into().expect("4 bytes"))
}

/// Connects an admin queue to `subnqn`, enables its controller and asks
/// for 64 I/O queues; returns the socket and the controller ID.
fn hold_admin(addr: SocketAddr, subnqn: &str) -> (TcpStream, u16) {
    let mut sock = TcpStream::connect(addr).expect("connect to the target");
    sock.set_read_timeout(Some(CLOSE_BOUND)).expect("a timeout");
    let none = Digests::default();
    sock.write_all(&ic_req(none)).expect("send an ICReq");
    assert_eq!(recv_pdu(&mut sock)[0], kind::IC_RESP);
    let cntlid = exec(&mut sock, &connect(0, 0xFFFF, subnqn, none)) as u16;
    // Property Set CC: EN, IOSQES 6, IOCQES 4.
    let mut set_cc = fabrics(0x00, 1);
    set_cc[44..48].copy_from_slice(&0x14u32.to_le_bytes());
    set_cc[48..56].copy_from_slice(&(1u64 | 6 << 16 | 4 << 20).to_le_bytes());
    exec(&mut sock, &capsule(&set_cc, &[], none));
    // Set Features, Number of Queues: 64 submission and completion.
    let mut queues = [0u8; 64];
    queues[0] = 0x09;
    queues[2..4].copy_from_slice(&2u16.to_le_bytes());
    queues[40..44].copy_from_slice(&7u32.to_le_bytes());
    queues[44..48].copy_from_slice(&(63u32 | 63 << 16).to_le_bytes());
    exec(&mut sock, &capsule(&queues, &[], none));
    (sock, cntlid)
}

/// What the first input byte says.
struct Scenario {
    /// 0: discovery admin queue; 1: the device's admin queue; 2: an I/O
    /// queue.
    queue: u8,
    digests: Digests,
    device: usize,
    fix_digests: bool,
}

impl Scenario {
    fn of(b: u8) -> Scenario {
        Scenario {
            queue: (b & 3).min(2),
            digests: Digests {
                header: b & 4 != 0,
                data: b & 8 != 0,
            },
            device: ((b >> 4) & 1) as usize,
            fix_digests: b & 0x20 != 0,
        }
    }

    fn qid(&self) -> u16 {
        (self.queue == 2) as u16
    }

    /// The valid ICReq and Connect the host starts with.
    fn preamble(&self, fx: &Fixture) -> Vec<u8> {
        let mut out = ic_req(self.digests);
        let device = nqn::nqn_of(DEVICES[self.device].0);
        let (subnqn, cntlid) = match self.queue {
            0 => (nqn::DISCOVERY_NQN, 0xFFFF),
            1 => (device.as_str(), 0xFFFF),
            _ => (device.as_str(), fx.cntlids[self.device]),
        };
        out.extend_from_slice(&connect(self.qid(), cntlid, subnqn, self.digests));
        out
    }
}

/// Recomputes the digests of every PDU of `b` that can be framed (PLEN
/// within the rest), in place.
fn fix_digests(b: &mut [u8], digests: Digests) {
    let mut pos = 0;
    while b.len() - pos >= pdu::COMMON_HEADER {
        let h = Header::parse(&b[pos..]);
        let (hlen, pdo, plen) = (h.hlen as usize, h.pdo as usize, h.plen as usize);
        if plen < pdu::COMMON_HEADER || plen > b.len() - pos {
            return;
        }
        let p = &mut b[pos..pos + plen];
        let carries = h.kind == kind::CAPSULE_CMD || h.kind == kind::H2C_DATA;
        if digests.data && carries && pdo != 0 && pdo + 4 <= plen {
            let crc = pdu::crc32c(0, &p[pdo..plen - 4]);
            p[plen - 4..].copy_from_slice(&crc.to_le_bytes());
        }
        let headed = h.kind != kind::IC_REQ && h.kind != kind::H2C_TERM_REQ;
        if digests.header && headed && hlen + 4 <= plen {
            let crc = pdu::crc32c(0, &p[..hlen]);
            p[hlen..hlen + 4].copy_from_slice(&crc.to_le_bytes());
        }
        pos += plen;
    }
}

/// Sends `input` on a new connection, then EOF; returns what the target
/// sent until it closed, and whether it closed with a reset.
fn exchange(addr: SocketAddr, input: &[u8]) -> (Vec<u8>, bool) {
    let mut sock = connect_retrying(addr);
    let mut writer = sock.try_clone().expect("clone the socket");
    writer
        .set_write_timeout(Some(CLOSE_BOUND))
        .expect("a timeout");
    let deadline = Instant::now() + CLOSE_BOUND;
    std::thread::scope(|s| {
        s.spawn(move || {
            // The target may close before it has read everything.
            let _ = writer.write_all(input);
            let _ = writer.shutdown(Shutdown::Write);
        });
        let mut out = Vec::new();
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the target kept the connection open {CLOSE_BOUND:?} after the host's EOF \
                 ({} bytes received)",
                out.len()
            );
            sock.set_read_timeout(Some(left)).expect("a timeout");
            match sock.read(&mut buf) {
                Ok(0) => return (out, false),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return (out, true),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => panic!("reading from the target: {e}"),
            }
        }
    })
}

/// Connects, retrying briefly (loopback ports in TIME_WAIT).
fn connect_retrying(addr: SocketAddr) -> TcpStream {
    let mut tries = 0;
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return s;
            }
            Err(e) if tries < 100 => {
                tries += 1;
                if tries == 100 {
                    panic!("cannot connect to the target: {e}");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("cannot connect to the target: {e}"),
        }
    }
}

/// Checks the header digest of PDU `p` (header length `hlen`).
fn check_header_digest(p: &[u8], hlen: usize) {
    let want = u32::from_le_bytes(p[hlen..hlen + 4].try_into().expect("4 bytes"));
    assert_eq!(pdu::crc32c(0, &p[..hlen]), want, "header digest of {p:?}");
}

/// Checks what the target sent: well-formed PDUs, in an order a target
/// may send them.
fn check_replies(out: &[u8], reset: bool, s: &Scenario) {
    let hd = if s.digests.header { 4 } else { 0 };
    let dd = if s.digests.data { 4 } else { 0 };
    let hdgstf = if s.digests.header { flags::HDGSTF } else { 0 };
    let mut pos = 0;
    let mut n = 0;
    while pos < out.len() {
        let b = &out[pos..];
        if b.len() < pdu::COMMON_HEADER {
            assert!(reset, "{} bytes after the last whole PDU", b.len());
            break;
        }
        let h = Header::parse(b);
        let (hlen, pdo, plen) = (h.hlen as usize, h.pdo as usize, h.plen as usize);
        assert!(plen >= hlen && hlen >= pdu::COMMON_HEADER, "PDU {n}: {h:?}");
        if b.len() < plen {
            assert!(reset, "PDU {n} ({h:?}) cut short at {} bytes", b.len());
            break;
        }
        let p = &b[..plen];
        assert!(n > 0 || h.kind == kind::IC_RESP, "the first PDU is {h:?}");
        match h.kind {
            kind::IC_RESP => {
                assert_eq!(n, 0, "an ICResp as PDU {n}");
                assert_eq!((hlen, pdo, plen), (pdu::IC_HLEN, 0, pdu::IC_HLEN));
                assert_eq!(u16::from_le_bytes([p[8], p[9]]), 0, "ICResp PFV");
                let dgst = s.digests.header as u8 | (s.digests.data as u8) << 1;
                assert_eq!(p[11], dgst, "ICResp digests");
            }
            kind::CAPSULE_RESP => {
                assert_eq!((hlen, pdo), (pdu::CAPSULE_RESP_HLEN, 0), "{h:?}");
                assert_eq!(plen, hlen + hd, "{h:?}");
                assert_eq!(h.flags, hdgstf, "{h:?}");
                if hd != 0 {
                    check_header_digest(p, hlen);
                }
                let sqid = u16::from_le_bytes([p[18], p[19]]);
                assert_eq!(sqid, s.qid(), "SQID of {p:?}");
                if n == 1 {
                    let cid = u16::from_le_bytes([p[20], p[21]]);
                    let status = u16::from_le_bytes([p[22], p[23]]) >> 1;
                    assert_eq!((cid, status), (CONNECT_CID, 0), "the Connect's answer");
                }
            }
            kind::C2H_DATA => {
                assert_eq!((hlen, pdo), (pdu::DATA_HLEN, pdu::DATA_HLEN + hd), "{h:?}");
                let datal = u32::from_le_bytes(p[16..20].try_into().expect("4 bytes")) as usize;
                assert!(datal > 0 && datal <= MAX_TRANSFER, "C2HData DATAL {datal}");
                assert_eq!(plen, pdo + datal + dd, "{h:?} DATAL {datal}");
                let mut f = flags::LAST_PDU | hdgstf;
                if dd != 0 {
                    f |= flags::DDGSTF;
                }
                assert_eq!(h.flags, f, "{h:?}");
                if hd != 0 {
                    check_header_digest(p, hlen);
                }
                if dd != 0 {
                    let data = &p[pdo..pdo + datal];
                    let want = u32::from_le_bytes(p[plen - 4..].try_into().expect("4 bytes"));
                    assert_eq!(pdu::crc32c(0, data), want, "C2HData data digest");
                }
            }
            kind::R2T => {
                assert_eq!(s.queue, 2, "an R2T on an admin queue");
                assert_eq!((hlen, pdo), (pdu::DATA_HLEN, 0), "{h:?}");
                assert_eq!(plen, hlen + hd, "{h:?}");
                assert_eq!(h.flags, hdgstf, "{h:?}");
                if hd != 0 {
                    check_header_digest(p, hlen);
                }
                let r2tl = u32::from_le_bytes(p[16..20].try_into().expect("4 bytes")) as usize;
                assert!(r2tl > 0 && r2tl <= MAX_TRANSFER, "R2T length {r2tl}");
            }
            kind::C2H_TERM_REQ => {
                // The data quotes (at most HLEN bytes of) the offending
                // PDU's header.
                assert_eq!((hlen, pdo, h.flags), (pdu::TERM_HLEN, pdu::TERM_HLEN, 0));
                assert!(plen - hlen <= pdu::TERM_MAX_DATA, "{h:?}");
                assert_eq!(pos + plen, out.len(), "PDUs after a C2HTermReq");
            }
            k => panic!("PDU type {k:#x} from the target: {h:?}"),
        }
        n += 1;
        pos += plen;
    }
    assert!(n >= 2, "no answer to the Connect ({} bytes)", out.len());
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let fx = fixture();
    let s = Scenario::of(first);
    let mut input = s.preamble(fx);
    let at = input.len();
    input.extend_from_slice(rest);
    if s.fix_digests && (s.digests.header || s.digests.data) {
        fix_digests(&mut input[at..], s.digests);
    }
    let (out, reset) = exchange(fx.addr, &input);
    check_replies(&out, reset, &s);
    fx.settle();
});
