//! Fuzzes the NVMe/TCP target's queue pairs in-process: arbitrary host
//! bytes, after a valid ICReq and Connect, fed to the sans-IO core
//! (`export::nvmf::QueuePair`) through the same test fixture as its unit
//! tests (`export::nvmf::testing`): RAM disks stand in for the devices,
//! the harness runs the IOs the queue hands out and reads what it sends,
//! in the order the input says.
//!
//! Thread: libFuzzer's, alone: no reactor, no socket, no thread.
//!
//! Once per process a target starts (transfers up to 512 KiB) with three
//! devices shared over NVMe-oF (`testing::DEVICES`: `disk0`, writable,
//! 512-byte blocks; `null0`, read-only, 4 KiB blocks; `sec0`, whose host
//! must authenticate with DH-HMAC-CHAP), and for each an admin queue connects (and
//! authenticates), enables its controller, asks for 64 I/O queues, and
//! stays for the life of the process, so that inputs can connect I/O
//! queues to it.
//!
//! The first input byte chooses the scenario:
//! - bits 1:0: the queue: 0 the discovery controller's admin queue, 1 an
//!   admin queue of the device's subsystem, 2 and 3 an I/O queue (QID 1)
//!   of the device's held controller;
//! - bit 2: header digests, bit 3: data digests (asked in the ICReq);
//! - bit 4: the device, `disk0` or `null0`; bit 6: `sec0` instead (the
//!   queue must authenticate; the fuzzer has no secret, so it can only try
//!   what a host without one can: negotiate, fail, claim to be another);
//! - bit 5: fix the digests up: the harness recomputes the header and
//!   data digests of every PDU of the stream it can frame;
//! - bit 7: scheduled: bytes 1-2 are the stream's length (little-endian),
//!   the stream follows, and the bytes after it are a schedule: its first
//!   bytes pick the HPDA and whether data digests of large PDUs are
//!   computed off the core (and whether that engine fails them); each
//!   step feeds a piece of the stream, runs one of the IOs or off-core
//!   digests in flight (in any order), reads part of the output (a host that reads slowly or
//!   not at all), or moves the clock (deadlines, keep alive). Without it
//!   the rest of the input is the stream, fed as it is taken, its IOs run
//!   in order and the output read whole.
//!
//! Seeds (`corpus/nvmf_queue_pair/`) are real host traffic, recorded by
//! `fuzz/capture_nvmf_seeds.py` (see the README): a scenario byte, then
//! what the host sent after its Connect.
//!
//! Asserted for every input:
//! - nothing panics;
//! - the queue pair's memory (its input buffer and its output) stays
//!   within its bound at every step, whatever the host does;
//! - what it sent is a sequence of well-formed PDUs of the types a target
//!   sends: an ICResp first (echoing the digests), the Connect's
//!   successful response second, then response capsules (of this queue's
//!   SQID), C2HData (data at the offset the host's HPDA asks) and R2T PDUs
//!   with consistent HLEN, PDO, PLEN, flags and correct digests, and at
//!   most one C2HTermReq, as the last PDU;
//! - once the host is gone and the IOs in flight have ended, the queue
//!   may close; after it closes, the target's connections, controllers,
//!   hosts' queue counts and the shares' attached queues are back at
//!   their baseline, and the held controllers are all alive (no input on
//!   one queue tears down another host's controller).

#![no_main]

use std::cell::RefCell;

use io_engine::env::tsc;
use io_engine::export::nvmf::pdu::{self, DataAlignment, Digests, Header, flags, kind};
use io_engine::export::nvmf::testing::{DigestEngine, Ended, Fixture, HOST, Held, Pdu, TestHost};
use io_engine::export::nvmf::{CONNECT_DEADLINE, INPUT_BYTES, Limits, OUTPUT_CAP, QueuePair, nqn};
use libfuzzer_sys::fuzz_target;

/// The devices the scenario picks from, by index into `testing::DEVICES`.
const DISK0: usize = 0;
const NULL0: usize = 1;
const SEC0: usize = 2;
/// SQSIZE of every queue the harness connects (0-based: 32 entries).
const SQSIZE: u16 = 31;
/// The largest answer a queue may add past its output bound (an Identify
/// or log page, with its headers), and the answers of its IOs in flight.
const LARGEST_ANSWER: usize = 64 << 10;
/// Steps of a schedule at most (each bounded).
const MAX_STEPS: usize = 4096;

/// The target and the admin queues held for the life of the process.
struct Harness {
    fx: Fixture,
    /// Per device, the held admin queue and its controller ID.
    admins: Vec<(TestHost, u16)>,
    baseline: Held,
}

impl Harness {
    fn start() -> Harness {
        if std::env::var_os("RUST_LOG").is_some() {
            io_engine::env::logging::init("info", false);
        }
        // Transfers up to 512 KiB (IO buffers of their own beyond 128 KiB),
        // and no wait for DH computations, so that an input runs the same
        // whatever ran before it (the unit tests cover the budget).
        let limits = Limits::new(8192, 512 << 10, 128)
            .expect("valid limits")
            .with_dh_budget(u32::MAX, u32::MAX);
        let fx = Fixture::with_limits(limits);
        let mut admins = Vec::new();
        for (name, ..) in io_engine::export::nvmf::testing::DEVICES {
            let mut h = fx.host();
            let e = h.admin(Some(name), HOST);
            assert_eq!(e.status(), 0, "the held admin queue of {name}");
            let cntlid = e.cqe().dw0() as u16;
            if e.cqe().dw0() & 1 << 17 != 0 {
                let s = h.authenticate(HOST, &nqn::nqn_of(name));
                assert_eq!(s[1], 0x03, "Success1");
            }
            assert_eq!(
                h.set_cc(io_engine::export::nvmf::testing::CC_ENABLE)
                    .status(),
                0
            );
            assert_eq!(h.set_queues(64).status(), 0);
            admins.push((h, cntlid));
        }
        let baseline = fx.held();
        Harness {
            fx,
            admins,
            baseline,
        }
    }
}

thread_local! {
    static HARNESS: RefCell<Option<Harness>> = const { RefCell::new(None) };
}

/// What the first input byte says.
struct Scenario {
    /// 0: discovery admin queue; 1: the device's admin queue; 2: an I/O
    /// queue.
    queue: u8,
    digests: Digests,
    device: usize,
    fix_digests: bool,
    scheduled: bool,
}

impl Scenario {
    fn of(b: u8) -> Scenario {
        Scenario {
            queue: (b & 3).min(2),
            digests: Digests {
                header: b & 4 != 0,
                data: b & 8 != 0,
            },
            device: if b & 0x40 != 0 {
                SEC0
            } else if b & 0x10 != 0 {
                NULL0
            } else {
                DISK0
            },
            fix_digests: b & 0x20 != 0,
            scheduled: b & 0x80 != 0,
        }
    }

    fn qid(&self) -> u16 {
        (self.queue == 2) as u16
    }
}

/// The bytes of a schedule, read one decision at a time (zeroes once
/// they run out).
struct Schedule<'a>(&'a [u8]);

impl Schedule<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn done(&self) -> bool {
        self.0.is_empty()
    }
}

/// Recomputes the digests of every PDU of `b` that can be framed (PLEN
/// within the rest), in place.
fn fix_digests(b: &mut [u8], digests: Digests) {
    let mut pos = 0;
    while let Some(h) = Header::parse(&b[pos..]) {
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

/// Checks the header digest of PDU `p` (header length `hlen`).
fn check_header_digest(p: &[u8], hlen: usize) {
    let want = u32::from_le_bytes(p[hlen..hlen + 4].try_into().unwrap());
    assert_eq!(pdu::crc32c(0, &p[..hlen]), want, "header digest of {p:?}");
}

/// What the queue pair sent, checked as it comes: well-formed PDUs, in an
/// order a target may send them.
struct Replies {
    s: Scenario,
    align: DataAlignment,
    max_transfer: usize,
    n: usize,
    terminated: bool,
}

impl Replies {
    fn check(&mut self, pdus: Vec<Pdu>) {
        let d = self.s.digests;
        let hd = if d.header { 4 } else { 0 };
        let dd = if d.data { 4 } else { 0 };
        let hdgstf = if d.header { flags::HDGSTF } else { 0 };
        for p in pdus {
            assert!(!self.terminated, "a PDU after the C2HTermReq: {p:?}");
            let h = p.header;
            let b = &p.bytes;
            let (hlen, pdo, plen) = (h.hlen as usize, h.pdo as usize, h.plen as usize);
            assert!(
                plen >= hlen && hlen >= pdu::COMMON_HEADER,
                "PDU {}: {h:?}",
                self.n
            );
            match h.kind {
                kind::IC_RESP => {
                    assert_eq!(self.n, 0, "an ICResp as PDU {}", self.n);
                    assert_eq!((hlen, pdo, plen), (pdu::IC_HLEN, 0, pdu::IC_HLEN));
                    assert_eq!(u16::from_le_bytes([b[8], b[9]]), 0, "ICResp PFV");
                    assert_eq!(b[10], 0, "ICResp CPDA");
                    assert_eq!(
                        b[11],
                        d.header as u8 | (d.data as u8) << 1,
                        "ICResp digests"
                    );
                }
                kind::CAPSULE_RESP => {
                    assert!(self.n > 0, "a CapsuleResp before the ICResp");
                    assert_eq!((hlen, pdo), (pdu::CAPSULE_RESP_HLEN, 0), "{h:?}");
                    assert_eq!((plen, h.flags), (hlen + hd, hdgstf), "{h:?}");
                    if hd != 0 {
                        check_header_digest(b, hlen);
                    }
                    let cqe = p.cqe();
                    if self.n > 1 {
                        assert_eq!(cqe.sqid(), self.s.qid(), "SQID of {p:?}");
                    }
                }
                kind::C2H_DATA => {
                    assert!(self.n > 1, "data before the Connect's answer");
                    assert_eq!(hlen, pdu::DATA_HLEN, "{h:?}");
                    assert_eq!(
                        pdo,
                        self.align.pdo(hlen + hd),
                        "C2HData PDO: the host's HPDA"
                    );
                    let datal = p.u32_at(16) as usize;
                    assert!(
                        datal > 0 && datal <= self.max_transfer,
                        "C2HData DATAL {datal}"
                    );
                    assert_eq!(plen, pdo + datal + dd, "{h:?} DATAL {datal}");
                    let end = h.flags & (flags::LAST_PDU | flags::SUCCESS);
                    assert_ne!(end & flags::LAST_PDU, 0, "{h:?}");
                    let mut f = end | hdgstf;
                    if dd != 0 {
                        f |= flags::DDGSTF;
                    }
                    assert_eq!(h.flags, f, "{h:?}");
                    assert!(b[hlen + hd..pdo].iter().all(|&x| x == 0), "padding");
                    if hd != 0 {
                        check_header_digest(b, hlen);
                    }
                    if dd != 0 {
                        let want = p.u32_at(plen - 4);
                        assert_eq!(pdu::crc32c(0, &b[pdo..pdo + datal]), want);
                    }
                }
                kind::R2T => {
                    assert_eq!(self.s.queue, 2, "an R2T on an admin queue");
                    assert_eq!((hlen, pdo), (pdu::DATA_HLEN, 0), "{h:?}");
                    assert_eq!((plen, h.flags), (hlen + hd, hdgstf), "{h:?}");
                    if hd != 0 {
                        check_header_digest(b, hlen);
                    }
                    let r2tl = p.u32_at(16) as usize;
                    assert!(r2tl > 0 && r2tl <= self.max_transfer, "R2T length {r2tl}");
                }
                kind::C2H_TERM_REQ => {
                    // The data quotes (at most HLEN bytes of) the offending
                    // PDU's header.
                    assert_eq!((hlen, pdo, h.flags), (pdu::TERM_HLEN, pdu::TERM_HLEN, 0));
                    assert!(plen - hlen <= pdu::TERM_MAX_DATA, "{h:?}");
                    self.terminated = true;
                }
                k => panic!("PDU type {k:#x} from the target: {h:?}"),
            }
            self.n += 1;
        }
    }
}

/// The queue pair's memory is within its bound (the output's heap grows
/// by doubling).
fn bounded(qp: &QueuePair) {
    let m = qp.memory();
    let most = INPUT_BYTES + 2 * (OUTPUT_CAP + LARGEST_ANSWER);
    assert!(m <= most, "{m} bytes held for one host");
}

/// One input.
fn run(h: &mut Harness, data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let s = Scenario::of(first);
    let (mut stream, mut schedule) = if s.scheduled {
        let Some((len, rest)) = rest.split_first_chunk::<2>() else {
            return;
        };
        let len = (u16::from_le_bytes(*len) as usize).min(rest.len());
        let (stream, schedule) = rest.split_at(len);
        (stream.to_vec(), Schedule(schedule))
    } else {
        (rest.to_vec(), Schedule(&[]))
    };
    if s.fix_digests && (s.digests.header || s.digests.data) {
        fix_digests(&mut stream, s.digests);
    }
    let mut host = h.fx.host();
    host.hpda = if s.scheduled { schedule.byte() % 32 } else { 0 };
    if s.scheduled {
        // Data digests of PDUs of 4 KiB and more handed out to compute off
        // the core (bit 0), failed by the harness's engine (bit 1: the
        // queue pair then computes them itself).
        let b = schedule.byte();
        if b & 1 != 0 {
            host.qp.offload_digests(4096, usize::MAX);
        }
        if b & 2 != 0 {
            host.digest_engine = DigestEngine::Fails;
        }
    }
    let mut replies = Replies {
        align: DataAlignment::from_hpda(host.hpda).unwrap(),
        s,
        max_transfer: h.fx.target.limits.max_transfer,
        n: 0,
        terminated: false,
    };
    // The valid ICReq and Connect.
    let ic = host.ic(replies.s.digests, host.hpda);
    replies.check(ic);
    let device = io_engine::export::nvmf::testing::DEVICES[replies.s.device].0;
    let subnqn = match replies.s.queue {
        0 => nqn::DISCOVERY_NQN.to_string(),
        _ => nqn::nqn_of(device),
    };
    let cntlid = match replies.s.queue {
        2 => h.admins[replies.s.device].1,
        _ => 0xFFFF,
    };
    let connected = host.connect(replies.s.qid(), SQSIZE, cntlid, &subnqn, HOST);
    let Ended::Cqe(cqe, _) = connected else {
        panic!("the Connect: {connected:?}")
    };
    assert_eq!(cqe.status(), 0, "the Connect");
    replies.n += 1;
    // The stream, as the schedule says.
    let mut at = 0;
    let mut steps = 0;
    while steps < MAX_STEPS {
        steps += 1;
        if !replies.s.scheduled || schedule.done() {
            // The rest as it is taken: IOs in order, the output read whole.
            let n = host.send(&stream[at..]);
            at += n;
            host.run_ios();
            replies.check(host.pdus());
            bounded(&host.qp);
            if n == 0 {
                break;
            }
            continue;
        }
        match schedule.byte() % 8 {
            0..=2 => {
                let len = (schedule.u16() as usize % 8192 + 1).min(stream.len() - at);
                at += host.send(&stream[at..at + len]);
            }
            3 => {
                if !host.ios.is_empty() {
                    let i = schedule.byte() as usize % host.ios.len();
                    host.run_io(i);
                }
            }
            4 => {
                // A digest computed off the core ends (in any order), else
                // an IO.
                if !host.digest_jobs.is_empty() {
                    let i = schedule.byte() as usize % host.digest_jobs.len();
                    host.run_digest(i);
                } else if !host.ios.is_empty() {
                    let i = schedule.byte() as usize % host.ios.len();
                    host.run_io(i);
                }
            }
            5 => {
                let max = schedule.u16() as usize * 64;
                let pdus = host.read(max);
                replies.check(pdus);
            }
            6 => host.advance(tsc::ns_to_ticks(schedule.byte() as u64 * 1_000_000)),
            _ => host.advance(tsc::ns_to_ticks(CONNECT_DEADLINE.as_nanos() as u64) + 1),
        }
        bounded(&host.qp);
    }
    // The host goes: the IOs in flight end, then the queue may close.
    host.qp.host_gone();
    host.run_ios();
    replies.check(host.pdus());
    assert_eq!(host.pending_bytes(), 0, "a PDU cut short");
    assert!(
        host.qp.should_close(),
        "the queue closes once the host is gone"
    );
    host.qp.close();
    drop(host);
    assert_eq!(h.fx.held(), h.baseline, "back at the baseline");
    for (_, cntlid) in &h.admins {
        assert!(
            h.fx.target.controllers.get(*cntlid).is_some(),
            "a held controller was torn down"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    HARNESS.with(|cell| {
        let mut h = cell.borrow_mut();
        let h = h.get_or_insert_with(Harness::start);
        run(h, data);
    });
});
