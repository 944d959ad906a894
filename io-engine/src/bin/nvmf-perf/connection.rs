//! One I/O queue (one TCP connection) under load: up to `-q` commands in
//! flight, their capsules batched into one write, the target's PDUs read
//! in big chunks and handled in place (CapsuleResp, C2HData, R2T answered
//! with H2CData), latency taken from the cycle clock. Every buffer is
//! allocated when the connection is made: nothing is allocated per
//! command.
//!
//! Thread: the worker it was given to, which busy-polls its non-blocking
//! socket.

use std::io::{self, Read, Write};
use std::net::TcpStream;

use io_engine::env::tsc;
use io_engine::env::xorshift::XorShift;
use io_engine::export::nvmf::command::{Command, io as nvm, sgl};
use io_engine::export::nvmf::pdu::{self, flags, kind};

use super::conn_stats::ConnStats;
use super::copy;
use super::plan::Plan;
use super::region::{Content, Region};
use super::wire;
use super::workload::Workload;
use io_engine::export::nvmf::Cqe;

/// Bytes read from the socket per call, at least.
const READ_CHUNK: usize = 1 << 20;

/// A command in flight, by CID.
struct Slot {
    busy: bool,
    op: u8,
    unit: u32,
    src: u32,
    start: u64,
    /// What a write puts in its unit.
    content: Option<Content>,
    /// Data bytes received (reads) and a C2HData digest mismatch.
    got: usize,
    bad_digest: bool,
    buf: Vec<u8>,
}

/// One queue pair and its figures.
pub struct Connection {
    sock: TcpStream,
    /// The queue's ID.
    pub qid: u16,
    plan: Plan,
    nlb: u32,
    maxh2cdata: usize,
    out: Vec<u8>,
    out_at: usize,
    inp: Vec<u8>,
    in_start: usize,
    in_end: usize,
    slots: Vec<Slot>,
    free: Vec<u16>,
    region: Region,
    rng: XorShift,
    /// The figures so far.
    pub stats: ConnStats,
    /// Why the connection stopped working, if it did.
    pub broken: Option<String>,
}

impl Connection {
    /// A connected I/O queue `qid` on `sock` (non-blocking) working on
    /// `region`.
    pub fn new(
        sock: TcpStream,
        qid: u16,
        plan: Plan,
        maxh2cdata: u32,
        region: Region,
    ) -> Connection {
        let mut rng = XorShift::new(tsc::now() ^ (qid as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let slots = (0..plan.depth)
            .map(|_| {
                let mut buf = vec![0u8; plan.io_size];
                rng.fill(&mut buf);
                Slot {
                    busy: false,
                    op: 0,
                    unit: 0,
                    src: 0,
                    start: 0,
                    content: None,
                    got: 0,
                    bad_digest: false,
                    buf,
                }
            })
            .collect();
        let max_pdu = wire::max_pdu(plan.io_size.max(8192));
        let per_cmd = 128 + plan.io_size.min(plan.in_capsule.max(32)) + 8;
        Connection {
            sock,
            qid,
            plan,
            nlb: (plan.io_size / plan.block_size) as u32,
            maxh2cdata: maxh2cdata as usize,
            out: Vec::with_capacity(plan.depth as usize * per_cmd + max_pdu),
            out_at: 0,
            inp: vec![0u8; (2 * max_pdu).max(READ_CHUNK)],
            in_start: 0,
            in_end: 0,
            slots,
            free: (0..plan.depth).rev().collect(),
            region,
            rng,
            stats: ConnStats::new(),
            broken: None,
        }
    }

    /// Commands in flight.
    pub fn in_flight(&self) -> usize {
        self.plan.depth as usize - self.free.len()
    }

    /// Stops using the connection: what is in flight counts as failed.
    fn break_with(&mut self, why: String) {
        if self.broken.is_none() {
            let n = self.in_flight() as u64;
            let qid = self.qid;
            self.stats
                .fail(n.max(1), || format!("I/O queue {qid}: {why}"));
            self.broken = Some(why);
            self.free = (0..self.plan.depth).rev().collect();
        }
    }

    /// Fills the free slots with new commands.
    pub fn submit(&mut self, now: u64) {
        while let Some(cid) = self.free.pop() {
            if !self.start(cid, now) {
                self.free.push(cid);
                return;
            }
        }
    }

    /// Builds command `cid` into the output; false when no unit is free.
    fn start(&mut self, cid: u16, now: u64) -> bool {
        let plan = self.plan;
        let mut op = match plan.workload {
            Workload::Read | Workload::Randread => nvm::READ,
            Workload::Write | Workload::Randwrite => nvm::WRITE,
            Workload::Randrw => {
                if self.rng.below(100) < plan.read_percent as u64 {
                    nvm::READ
                } else {
                    nvm::WRITE
                }
            }
            Workload::Copy => nvm::COPY,
        };
        let random = plan.workload.random();
        let Some(mut unit) = self.region.pick(&mut self.rng, random, None) else {
            return false;
        };
        let mut src = unit;
        if op == nvm::COPY && plan.verify && self.region.copied(unit) {
            // A Copy's destination is read back before it is copied over.
            op = nvm::READ;
        } else if op == nvm::COPY {
            let Some(s) = self.region.pick(&mut self.rng, true, Some(unit)) else {
                self.region.release(unit);
                return false;
            };
            src = s;
            if plan.verify && self.region.content(src).is_none() {
                // Nothing known to copy yet: write the source first.
                self.region.release(unit);
                (op, unit) = (nvm::WRITE, src);
            }
        } else if op == nvm::READ && plan.verify && self.region.content(unit).is_none() {
            // Nothing known to read back yet: write it first.
            op = nvm::WRITE;
        }
        let slot = &mut self.slots[cid as usize];
        slot.busy = true;
        slot.op = op;
        slot.unit = unit;
        slot.src = src;
        slot.got = 0;
        slot.bad_digest = false;
        slot.content = None;
        let lba = self.region.lba(unit);
        let digests = plan.digests;
        match op {
            nvm::READ => {
                let mut s = Command::rw(nvm::READ, plan.nsid, lba, self.nlb);
                s.set_cid(cid);
                s.set_sgl(plan.io_size as u32, sgl::TRANSPORT);
                wire::put_capsule(&mut self.out, &s, &[], digests);
            }
            nvm::WRITE => {
                if plan.verify {
                    slot.content = Some(self.region.fill(unit, &mut slot.buf));
                }
                let mut s = Command::rw(nvm::WRITE, plan.nsid, lba, self.nlb);
                s.set_cid(cid);
                if plan.io_size <= plan.in_capsule {
                    s.set_sgl(plan.io_size as u32, sgl::IN_CAPSULE);
                    wire::put_capsule(&mut self.out, &s, &slot.buf, digests);
                } else {
                    s.set_sgl(plan.io_size as u32, sgl::TRANSPORT);
                    wire::put_capsule(&mut self.out, &s, &[], digests);
                }
            }
            _ => {
                let mut s = copy::command(plan.nsid, lba);
                s.set_cid(cid);
                s.set_sgl(32, sgl::IN_CAPSULE);
                let range = copy::range(self.region.lba(src), self.nlb);
                wire::put_capsule(&mut self.out, &s, &range, digests);
            }
        }
        slot.start = now;
        true
    }

    /// Writes what it can of the output; false once the connection broke.
    pub fn flush(&mut self) -> bool {
        while self.out_at < self.out.len() {
            match self.sock.write(&self.out[self.out_at..]) {
                Ok(0) => {
                    self.break_with("the target closed the connection".into());
                    return false;
                }
                Ok(n) => self.out_at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.break_with(format!("sending: {e}"));
                    return false;
                }
            }
        }
        self.out.clear();
        self.out_at = 0;
        true
    }

    /// Reads what has come and handles every whole PDU; completions are
    /// stamped with the time the read returned.
    pub fn receive(&mut self) {
        if self.in_start == self.in_end {
            self.in_start = 0;
            self.in_end = 0;
        }
        if self.in_end == self.inp.len() {
            return;
        }
        match self.sock.read(&mut self.inp[self.in_end..]) {
            Ok(0) => return self.break_with("the target closed the connection".into()),
            Ok(n) => self.in_end += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return,
            Err(e) => return self.break_with(format!("receiving: {e}")),
        }
        let now = tsc::now();
        let inp = std::mem::take(&mut self.inp);
        while self.broken.is_none() && self.in_end - self.in_start >= wire::HEADER {
            let s = self.in_start;
            let plen = u32::from_le_bytes(inp[s + 4..s + 8].try_into().expect("4 bytes")) as usize;
            if plen < wire::HEADER || plen > inp.len() / 2 {
                self.break_with(format!("the target sent a PDU of PLEN {plen}"));
                break;
            }
            if self.in_end - s < plen {
                break;
            }
            self.handle(&inp[s..s + plen], now);
            self.in_start += plen;
        }
        self.inp = inp;
        // Room for the rest of a PDU whose start is buffered.
        if self.in_start > 0 && self.inp.len() - self.in_start < self.inp.len() / 2 {
            self.inp.copy_within(self.in_start..self.in_end, 0);
            self.in_end -= self.in_start;
            self.in_start = 0;
        }
    }

    /// The busy slot of command `cid` doing `op`, if there is one.
    fn slot_of(&self, cid: u16, op: Option<u8>) -> Option<usize> {
        let slot = self.slots.get(cid as usize)?;
        (slot.busy && op.is_none_or(|o| o == slot.op)).then_some(cid as usize)
    }

    fn handle(&mut self, b: &[u8], now: u64) {
        let digests = self.plan.digests;
        let (at, len) = match wire::received(b, digests) {
            Ok(r) => r,
            Err(e) => return self.break_with(e),
        };
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at =
            |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes")) as usize;
        match b[0] {
            kind::CAPSULE_RESP => {
                let Some(cqe) = Cqe::from_slice(&b[8..]) else {
                    return self.break_with("a response capsule cut short".into());
                };
                match self.slot_of(cqe.cid(), None) {
                    Some(i) => self.complete(i, cqe.status(), now),
                    None => {
                        self.break_with(format!("a completion for CID {} not in flight", cqe.cid()))
                    }
                }
            }
            kind::C2H_DATA => {
                let (cid, off, datal) = (u16_at(8), u32_at(12), u32_at(16));
                let Some(i) = self.slot_of(cid, Some(nvm::READ)) else {
                    return self.break_with(format!("C2HData for CID {cid}, not a read in flight"));
                };
                if datal != len || off + len > self.plan.io_size {
                    return self
                        .break_with(format!("C2HData of {len} bytes at {off} for CID {cid}"));
                }
                let ok = wire::data_digest_ok(b, at, len, digests);
                let verify = self.plan.verify;
                let slot = &mut self.slots[i];
                if verify {
                    slot.buf[off..off + len].copy_from_slice(&b[at..at + len]);
                }
                slot.got += len;
                slot.bad_digest |= !ok;
                if b[1] & flags::SUCCESS != 0 {
                    self.complete(i, 0, now);
                }
            }
            kind::R2T => {
                let (cid, ttag, off, r2tl) = (u16_at(8), u16_at(10), u32_at(12), u32_at(16));
                let Some(i) = self.slot_of(cid, Some(nvm::WRITE)) else {
                    return self.break_with(format!("R2T for CID {cid}, not a write in flight"));
                };
                if off + r2tl > self.plan.io_size || r2tl == 0 {
                    return self.break_with(format!("R2T for {r2tl} bytes at {off} of CID {cid}"));
                }
                let buf = &self.slots[i].buf;
                let mut at = off;
                while at < off + r2tl {
                    let n = (off + r2tl - at).min(self.maxh2cdata);
                    let end = if at + n == off + r2tl {
                        pdu::flags::LAST_PDU
                    } else {
                        0
                    };
                    let (out, ids) = (&mut self.out, (cid, ttag));
                    let range = (at as u32, n as u32);
                    let align = pdu::DataAlignment::NONE;
                    pdu::put_data_header(out, kind::H2C_DATA, ids, range, end, digests, align);
                    wire::put_data(out, &buf[at..at + n], digests);
                    at += n;
                }
            }
            kind::C2H_TERM_REQ => self.break_with(wire::term_req(b)),
            k => self.break_with(format!("the target sent PDU type {k:#x} on an I/O queue")),
        }
    }

    /// Command in slot `i` completed with `status`.
    fn complete(&mut self, i: usize, status: u16, now: u64) {
        let ns = tsc::ticks_to_ns_fast(now.saturating_sub(self.slots[i].start));
        let verify = self.plan.verify;
        let io_size = self.plan.io_size;
        let slot = &mut self.slots[i];
        slot.busy = false;
        let (op, unit, src) = (slot.op, slot.unit, slot.src);
        let failure = if status != 0 {
            Some(format!("status {status:#x}"))
        } else if slot.bad_digest {
            Some("data digest mismatch in C2HData".to_string())
        } else if op == nvm::READ && slot.got != io_size {
            Some(format!("{} of {io_size} bytes read", slot.got))
        } else {
            None
        };
        let qid = self.qid;
        let lba = self.region.lba(unit);
        match failure {
            Some(why) => {
                let name = match op {
                    nvm::READ => "Read",
                    nvm::WRITE => "Write",
                    _ => "Copy",
                };
                self.stats
                    .fail(1, || format!("I/O queue {qid}: {name} at LBA {lba}: {why}"));
                if verify && op != nvm::READ {
                    self.region.set_content(unit, None, false);
                }
            }
            None => {
                if verify {
                    match op {
                        nvm::READ => {
                            self.region.checked(unit);
                            if let Some(c) = self.region.content(unit) {
                                self.stats.verified += 1;
                                if let Err(bad) = self.region.check(c, &slot.buf) {
                                    self.stats.miscompares += 1;
                                    self.stats.fail(0, || {
                                        format!("I/O queue {qid}: miscompare at LBA {bad}")
                                    });
                                }
                            }
                        }
                        nvm::WRITE => self.region.set_content(unit, slot.content, false),
                        _ => {
                            let c = self.region.content(src);
                            self.region.set_content(unit, c, true);
                        }
                    }
                }
                self.stats.done(io_size as u64, ns);
            }
        }
        self.region.release(unit);
        if op == nvm::COPY {
            self.region.release(src);
        }
        self.free.push(i as u16);
    }

    /// Gives up on what is still in flight (the run is over).
    pub fn abandon(&mut self) {
        let n = self.in_flight();
        if n > 0 && self.broken.is_none() {
            self.break_with(format!("{n} commands did not complete"));
        }
    }
}
