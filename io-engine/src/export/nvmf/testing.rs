//! A target and its hosts in memory, for the queue pair's unit tests and
//! the NVMe/TCP fuzz target: a [`Fixture`] with devices shared over
//! NVMe-oF, and [`TestHost`]s, each a [`QueuePair`] driven as its
//! transport would drive it, with a RAM disk standing in for its device
//! (the IOs the queue hands out run on the disk when the host says so, in
//! the order it says), a clock it moves by hand, and a host's side of the
//! protocol (ICReq, Connect, commands with their data, PDUs parsed).
//!
//! Thread: the test's (or fuzzer's) thread; no reactor, no socket.

// Test support: a broken expectation here is a failed test, and its
// indexing is over buffers it built itself.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs
)]

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use base64::Engine as _;

use super::auth::{DhchapKeys, Hash, HostSecrets, Secret, message as m};
use super::command::{self, Command, fctype, sgl};
use super::pdu::{self, DataAlignment, Digests, Header, kind};
use super::{Cqe, IoOutcome, Limits, QueuePair, ShareOptions, Target, nqn};
use crate::bdev::{BdevRegistry, IoPoolConfig, IoRequest, IoType};
use crate::env::tsc;
use crate::export::{Exports, HandshakeSlot, Protocol};

/// The host NQN hosts connect as by default.
pub const HOST: &str = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-000000000001";
/// Another host's NQN.
pub const OTHER_HOST: &str = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-000000000002";
/// CC with EN set and the queue entry sizes a host sets.
pub const CC_ENABLE: u32 = 1 | 6 << 16 | 4 << 20;
/// The devices: (name, URI, read-only, host that must authenticate).
/// `disk0`: 1 MiB of 512-byte blocks, any host; `null0`: 1 GiB of 4 KiB
/// blocks (zeroes, never written: its RAM disk takes no memory), read-only; `sec0`: 1 MiB of 4 KiB blocks, [`HOST`] only, with
/// the DH-HMAC-CHAP secret [`SECRET`].
pub const DEVICES: [(&str, &str, bool, bool); 3] = [
    (
        "disk0",
        "null:///disk0?size_mb=1&blk_size=512",
        false,
        false,
    ),
    (
        "null0",
        "null:///null0?size_mb=16&blk_size=4096",
        true,
        false,
    ),
    ("sec0", "null:///sec0?size_mb=1&blk_size=4096", false, true),
];

/// The secret of [`HOST`] on `sec0`: a 32-byte key, not transformed.
pub fn secret() -> String {
    let key = [0x21u8; 32];
    let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32IsoHdlc, &key) as u32;
    let mut raw = key.to_vec();
    raw.extend_from_slice(&crc.to_le_bytes());
    format!(
        "DHHC-1:00:{}:",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

/// What a target holds for its hosts, to compare with its baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub connections: usize,
    pub controllers: usize,
    pub hosts: usize,
    /// Connections attached to each share.
    pub attached: Vec<usize>,
    /// IO objects of the device pool in use.
    pub io_pool_in_use: u64,
}

/// A target with the [`DEVICES`] shared over NVMe-oF.
pub struct Fixture {
    pub target: Arc<Target>,
    pub registry: Arc<BdevRegistry>,
    /// The RAM disks behind the devices, by name.
    disks: Rc<RefCell<BTreeMap<String, Vec<u8>>>>,
}

impl Fixture {
    /// The fixture with the target's default limits.
    pub fn new() -> Fixture {
        Fixture::with_limits(Limits::default())
    }

    /// The fixture with `limits`.
    pub fn with_limits(limits: Limits) -> Fixture {
        let registry = Arc::new(
            BdevRegistry::new(IoPoolConfig {
                size: 256,
                cache: 0,
                cores: 1,
            })
            .unwrap(),
        );
        let exports = Exports::new(64);
        let target = Target::new(exports.clone(), 0, 0, limits, None);
        let mut disks = BTreeMap::new();
        for (name, uri, read_only, auth) in DEVICES {
            let info = registry.create(uri).unwrap();
            let mut options = ShareOptions::default();
            if auth {
                let keys = DhchapKeys::parse(&secret(), None).unwrap();
                options.allowed_hosts = vec![HOST.to_string()];
                options.dhchap = HostSecrets::new([(HOST.to_string(), keys)]);
            }
            let share = || -> Result<_, Box<dyn std::error::Error>> {
                Ok(exports.share(&registry, name, Protocol::Nvmf, read_only)?)
            };
            target
                .subsystems
                .add(options.subsystem(name), share)
                .unwrap();
            disks.insert(name.to_string(), vec![0u8; info.size_bytes as usize]);
        }
        Fixture {
            target,
            registry,
            disks: Rc::new(RefCell::new(disks)),
        }
    }

    /// A new connection's host, its queue pair accepted now.
    pub fn host(&self) -> TestHost {
        self.host_in(None)
    }

    /// A new connection's host whose queue holds `slot` among its
    /// listener's connections not established yet.
    pub fn host_in(&self, slot: Option<HandshakeSlot>) -> TestHost {
        let now = tsc::now();
        TestHost {
            qp: QueuePair::new(self.target.clone(), "test".into(), slot, now),
            disks: self.disks.clone(),
            now,
            received: Vec::new(),
            ios: VecDeque::new(),
            digest_jobs: VecDeque::new(),
            digests_offloaded: 0,
            digest_engine: DigestEngine::Computes,
            digests: Digests::default(),
            hpda: 0,
            kato: 0,
            cattr: 0,
            next_cid: 1,
        }
    }

    /// What the target holds now.
    pub fn held(&self) -> Held {
        let t = &self.target;
        Held {
            connections: t.connections(),
            controllers: t.controllers.len(),
            hosts: t.host_queues.hosts(),
            attached: DEVICES
                .iter()
                .map(|d| t.exports.get(d.0).map_or(0, |s| s.connections))
                .collect(),
            io_pool_in_use: self.registry.io_pool_stats().in_use,
        }
    }

    /// The bytes of device `name`'s disk at `offset`.
    pub fn disk(&self, name: &str, offset: usize, len: usize) -> Vec<u8> {
        self.disks.borrow()[name][offset..offset + len].to_vec()
    }
}

impl Default for Fixture {
    fn default() -> Self {
        Fixture::new()
    }
}

/// A PDU the target sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pdu {
    pub header: Header,
    /// The whole PDU.
    pub bytes: Vec<u8>,
}

impl Pdu {
    pub fn u16_at(&self, at: usize) -> u16 {
        u16::from_le_bytes([self.bytes[at], self.bytes[at + 1]])
    }

    pub fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().unwrap())
    }

    /// A CapsuleResp's completion.
    pub fn cqe(&self) -> Cqe {
        assert_eq!(self.header.kind, kind::CAPSULE_RESP, "{self:?}");
        Cqe::from_slice(&self.bytes[8..]).unwrap()
    }
}

/// How a command ended, as [`TestHost::exec`] saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Its completion, and the data the target sent for it.
    Cqe(Cqe, Vec<u8>),
    /// A read answered by a C2HData with SUCCESS and no completion.
    Success(Vec<u8>),
    /// The target terminated the connection: the C2HTermReq.
    Terminated(Pdu),
    /// No answer (yet).
    Silent,
}

impl Ended {
    /// The completion's status (panics on anything else).
    pub fn status(&self) -> u16 {
        match self {
            Ended::Cqe(c, _) => c.status(),
            Ended::Success(_) => 0,
            e => panic!("no completion: {e:?}"),
        }
    }

    /// The completion (panics on anything else).
    pub fn cqe(&self) -> Cqe {
        match self {
            Ended::Cqe(c, _) => *c,
            e => panic!("no completion: {e:?}"),
        }
    }

    /// The data read.
    pub fn data(&self) -> &[u8] {
        match self {
            Ended::Cqe(_, d) | Ended::Success(d) => d,
            e => panic!("no data: {e:?}"),
        }
    }
}

/// How the harness ends the digests a queue pair hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestEngine {
    /// With their CRC-32C.
    Computes,
    /// Failed: the queue pair computes them itself.
    Fails,
}

/// One host's connection to the target, in memory.
pub struct TestHost {
    /// IOs handed out and not run yet (declared first: dropped before the
    /// queue pair, whose pools their buffers go back to).
    pub ios: VecDeque<IoRequest>,
    /// Digests handed out to compute off the core and not done yet: their
    /// numbers and the CRC-32C of their data when handed out.
    pub digest_jobs: VecDeque<(u32, u32)>,
    /// Digests handed out so far.
    pub digests_offloaded: usize,
    /// How the harness's digest engine ends them.
    pub digest_engine: DigestEngine,
    pub qp: QueuePair,
    disks: Rc<RefCell<BTreeMap<String, Vec<u8>>>>,
    /// The clock the queue pair is driven with (TSC ticks).
    pub now: u64,
    /// Bytes the target sent that are not parsed yet.
    received: Vec<u8>,
    pub digests: Digests,
    /// The HPDA its ICReqs ask for.
    pub hpda: u8,
    /// The KATO (ms) and CATTR its Connects send.
    pub kato: u32,
    pub cattr: u8,
    next_cid: u16,
}

impl TestHost {
    /// Sends `bytes` (as much as the queue takes now); returns how many
    /// it took. The IOs it handed out are collected, not run.
    pub fn send(&mut self, bytes: &[u8]) -> usize {
        let n = self.qp.feed(bytes, self.now);
        self.collect_ios();
        n
    }

    /// Moves the clock by `ticks` and runs the queue's timers.
    pub fn advance(&mut self, ticks: u64) {
        self.now += ticks;
        self.qp.tick(self.now);
        if self.qp.has_work(self.now) {
            self.qp.process(self.now);
        }
        self.collect_ios();
    }

    fn collect_ios(&mut self) {
        while let Some(io) = self.qp.next_io() {
            self.ios.push_back(io);
        }
        while let Some((id, data, seed)) = self.qp.next_digest() {
            let crc = pdu::crc32c(seed, data);
            self.digest_jobs.push_back((id, crc));
            self.digests_offloaded += 1;
        }
    }

    /// Ends the digest at `index` of those handed out as the digest engine
    /// does; returns whether there was one.
    pub fn run_digest(&mut self, index: usize) -> bool {
        let Some((id, crc)) = self.digest_jobs.remove(index) else {
            return false;
        };
        let crc = match self.digest_engine {
            DigestEngine::Computes => Some(crc),
            DigestEngine::Fails => None,
        };
        self.qp.digest_done(id, crc);
        if self.qp.waits_for_buffer() {
            self.qp.process(self.now);
        }
        self.collect_ios();
        true
    }

    /// Runs the IO at `index` of those handed out on the RAM disk and
    /// hands it back; returns whether there was one.
    pub fn run_io(&mut self, index: usize) -> bool {
        let Some(io) = self.ios.remove(index) else {
            return false;
        };
        let name = self.qp.device().map(|d| d.bdev().name().to_string());
        let outcome = match name {
            Some(name) => {
                let mut disks = self.disks.borrow_mut();
                let disk = disks.get_mut(&name).unwrap();
                execute(disk, io)
            }
            None => IoOutcome::failed(io, crate::bdev::IoError::Device(5)),
        };
        self.qp.complete(outcome);
        if self.qp.waits_for_buffer() {
            self.qp.process(self.now);
        }
        self.collect_ios();
        true
    }

    /// Runs every IO and digest handed out (and those they lead to).
    pub fn run_ios(&mut self) {
        while self.run_io(0) || self.run_digest(0) {}
    }

    /// Reads at most `max` bytes of what the target sent; returns the
    /// whole PDUs among what was read so far.
    pub fn read(&mut self, max: usize) -> Vec<Pdu> {
        self.qp.drain_output(&mut self.received, max);
        if self.qp.waits_for_buffer() || self.qp.has_work(self.now) {
            self.qp.process(self.now);
            self.collect_ios();
        }
        let mut pdus = Vec::new();
        let mut at = 0;
        while let Some(h) = Header::parse(&self.received[at..]) {
            let plen = h.plen as usize;
            if self.received.len() - at < plen || plen < pdu::COMMON_HEADER {
                break;
            }
            pdus.push(Pdu {
                header: h,
                bytes: self.received[at..at + plen].to_vec(),
            });
            at += plen;
        }
        self.received.drain(..at);
        pdus
    }

    /// Bytes the target sent that are not a whole PDU yet.
    pub fn pending_bytes(&self) -> usize {
        self.received.len()
    }

    /// Everything the target sent until now, parsed.
    pub fn pdus(&mut self) -> Vec<Pdu> {
        self.read(usize::MAX)
    }

    /// Sends an ICReq asking for `digests` and HPDA `hpda`; returns the
    /// answer.
    pub fn ic(&mut self, digests: Digests, hpda: u8) -> Vec<Pdu> {
        let mut b = Vec::new();
        pdu::put_ic_req(&mut b, digests, hpda, 0);
        self.send(&b);
        let pdus = self.pdus();
        if let Some(p) = pdus.first()
            && p.header.kind == kind::IC_RESP
        {
            self.digests = Digests {
                header: p.bytes[11] & 1 != 0,
                data: p.bytes[11] & 2 != 0,
            };
        }
        pdus
    }

    /// A command capsule for `sqe` with `data` in it, with the digests in
    /// use (`bad_data_digest`: a wrong one).
    pub fn capsule(&self, sqe: &Command, data: &[u8], bad_data_digest: bool) -> Vec<u8> {
        let d = self.digests;
        let hd = if d.header { 4 } else { 0 };
        let dd = if d.data && !data.is_empty() { 4 } else { 0 };
        let pdo = if data.is_empty() {
            0
        } else {
            pdu::CAPSULE_CMD_HLEN + hd
        };
        let mut flags = 0;
        if d.header {
            flags |= pdu::flags::HDGSTF;
        }
        if dd != 0 {
            flags |= pdu::flags::DDGSTF;
        }
        let plen = pdu::CAPSULE_CMD_HLEN + hd + data.len() + dd;
        let mut b = Vec::with_capacity(plen);
        pdu::put_common(
            &mut b,
            kind::CAPSULE_CMD,
            flags,
            pdu::CAPSULE_CMD_HLEN,
            pdo,
            plen,
        );
        b.extend_from_slice(&sqe.0);
        pdu::put_hdgst(&mut b, 0, d);
        b.extend_from_slice(data);
        if dd != 0 {
            let crc = pdu::crc32c(0, data) ^ u32::from(bad_data_digest);
            b.extend_from_slice(&crc.to_le_bytes());
        }
        b
    }

    /// An H2CData PDU for command `cccid`, transfer tag `ttag`, carrying
    /// `data` at `offset`.
    pub fn h2c_data(&self, cccid: u16, ttag: u16, offset: u32, data: &[u8], last: bool) -> Vec<u8> {
        let mut b = Vec::new();
        let end = if last { pdu::flags::LAST_PDU } else { 0 };
        let range = (offset, data.len() as u32);
        let align = DataAlignment::NONE;
        pdu::put_data_header(
            &mut b,
            kind::H2C_DATA,
            (cccid, ttag),
            range,
            end,
            self.digests,
            align,
        );
        b.extend_from_slice(data);
        if self.digests.data {
            b.extend_from_slice(&pdu::crc32c(0, data).to_le_bytes());
        }
        b
    }

    /// A CID for the next command.
    pub fn cid(&mut self) -> u16 {
        let c = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1).max(1);
        c
    }

    /// Runs one command to its end: sends it (its CID set, `in_capsule`
    /// data in the capsule with an in-capsule SGL, else a transport SGL
    /// of the SGL length the command has), runs the IOs it hands out,
    /// answers an R2T with `write` data, gathers C2HData.
    pub fn exec(&mut self, mut sqe: Command, in_capsule: &[u8], write: &[u8]) -> Ended {
        let cid = self.cid();
        sqe.set_cid(cid);
        if !in_capsule.is_empty() {
            sqe.set_sgl(in_capsule.len() as u32, sgl::IN_CAPSULE);
        } else if sqe.0[39] == 0 {
            sqe.set_sgl(sqe.sgl().1, sgl::TRANSPORT);
        }
        let capsule = self.capsule(&sqe, in_capsule, false);
        self.send(&capsule);
        self.finish(cid, write)
    }

    /// Waits for command `cid`'s end: runs IOs, answers R2Ts with `write`,
    /// gathers C2HData (bounded: a command that gets no answer is
    /// [`Ended::Silent`]).
    pub fn finish(&mut self, cid: u16, write: &[u8]) -> Ended {
        let mut read = Vec::new();
        for _ in 0..1000 {
            self.run_ios();
            let pdus = self.pdus();
            if pdus.is_empty() && self.ios.is_empty() {
                return Ended::Silent;
            }
            for p in pdus {
                match p.header.kind {
                    kind::CAPSULE_RESP => {
                        let cqe = p.cqe();
                        assert_eq!(cqe.cid(), cid, "the answer of another command: {p:?}");
                        return Ended::Cqe(cqe, read);
                    }
                    kind::C2H_DATA => {
                        assert_eq!(p.u16_at(8), cid);
                        let (off, len) = (p.u32_at(12) as usize, p.u32_at(16) as usize);
                        let pdo = p.header.pdo as usize;
                        if read.len() < off + len {
                            read.resize(off + len, 0);
                        }
                        read[off..off + len].copy_from_slice(&p.bytes[pdo..pdo + len]);
                        if self.digests.data {
                            let want = p.u32_at(pdo + len);
                            assert_eq!(pdu::crc32c(0, &p.bytes[pdo..pdo + len]), want);
                        }
                        if p.header.flags & pdu::flags::SUCCESS != 0 {
                            return Ended::Success(read);
                        }
                    }
                    kind::R2T => {
                        let (cccid, ttag) = (p.u16_at(8), p.u16_at(10));
                        let (off, len) = (p.u32_at(12) as usize, p.u32_at(16) as usize);
                        let pdu =
                            self.h2c_data(cccid, ttag, off as u32, &write[off..off + len], true);
                        self.send(&pdu);
                    }
                    kind::C2H_TERM_REQ => return Ended::Terminated(p),
                    k => panic!("unexpected PDU type {k:#x}: {p:?}"),
                }
            }
        }
        Ended::Silent
    }

    /// Connect of queue `qid` (SQSIZE `sqsize`, 0-based) to `subnqn` as
    /// `hostnqn`, controller `cntlid` (0xFFFF: a new one, for an admin
    /// queue).
    pub fn connect(
        &mut self,
        qid: u16,
        sqsize: u16,
        cntlid: u16,
        subnqn: &str,
        hostnqn: &str,
    ) -> Ended {
        let data = command::connect_data(cntlid, subnqn, hostnqn);
        let sqe = Command::connect(qid, sqsize, self.cattr, self.kato);
        self.exec(sqe, &data, &[])
    }

    /// ICReq, then Connect of an admin queue to device `device`'s
    /// subsystem (or the discovery subsystem for `None`) as `hostnqn`;
    /// returns the Connect's end.
    pub fn admin(&mut self, device: Option<&str>, hostnqn: &str) -> Ended {
        self.ic(Digests::default(), self.hpda);
        let subnqn = device.map_or(nqn::DISCOVERY_NQN.to_string(), nqn::nqn_of);
        self.connect(0, 31, 0xFFFF, &subnqn, hostnqn)
    }

    /// Property Set of CC.
    pub fn set_cc(&mut self, cc: u32) -> Ended {
        let sqe = Command::fabrics(fctype::PROPERTY_SET)
            .with_bytes(44, &0x14u32.to_le_bytes())
            .with_bytes(48, &(cc as u64).to_le_bytes());
        self.exec(sqe, &[], &[])
    }

    /// Set Features, Number of Queues: `n` I/O queues.
    pub fn set_queues(&mut self, n: u32) -> Ended {
        let sqe = Command::new(0x09, 0)
            .with_cdw(10, 0x07)
            .with_cdw(11, (n - 1) | (n - 1) << 16);
        self.exec(sqe, &[], &[])
    }

    /// An admin queue of `device` as `hostnqn`, enabled, with `queues` I/O
    /// queues granted; returns the controller ID.
    pub fn enabled_admin(&mut self, device: &str, hostnqn: &str, queues: u32) -> u16 {
        let e = self.admin(Some(device), hostnqn);
        assert_eq!(e.status(), 0, "admin Connect");
        let cntlid = e.cqe().dw0() as u16;
        assert_eq!(self.set_cc(CC_ENABLE).status(), 0);
        assert_eq!(self.set_queues(queues).status(), 0);
        cntlid
    }

    /// ICReq (with `digests`) and Connect of I/O queue `qid` of
    /// controller `cntlid` of `device` as `hostnqn`.
    pub fn io_queue(
        &mut self,
        device: &str,
        hostnqn: &str,
        cntlid: u16,
        qid: u16,
        digests: Digests,
    ) -> Ended {
        self.ic(digests, self.hpda);
        self.connect(qid, 31, cntlid, &nqn::nqn_of(device), hostnqn)
    }

    /// AUTH_Send of `msg`.
    pub fn auth_send(&mut self, msg: &[u8]) -> Ended {
        let sqe = Command::fabrics(fctype::AUTH_SEND)
            .with_bytes(41, &[m::SPSP, m::SPSP, m::SECP_DHCHAP])
            .with_bytes(44, &(msg.len() as u32).to_le_bytes());
        self.exec(sqe, msg, &[])
    }

    /// AUTH_Receive with an allocation length (and SGL) of `al` bytes.
    pub fn auth_receive(&mut self, al: u32) -> Ended {
        let mut sqe = Command::fabrics(fctype::AUTH_RECEIVE)
            .with_bytes(41, &[m::SPSP, m::SPSP, m::SECP_DHCHAP])
            .with_bytes(44, &al.to_le_bytes());
        sqe.set_sgl(al, sgl::TRANSPORT);
        self.exec(sqe, &[], &[])
    }

    /// Authenticates as `hostnqn` to `subnqn` with [`secret`]: Negotiate
    /// (SHA-256, the NULL group), Challenge, Reply; returns the last
    /// message the target gave (Success1, or Failure1).
    pub fn authenticate(&mut self, hostnqn: &str, subnqn: &str) -> Vec<u8> {
        let tid = 0x77u16;
        assert_eq!(
            self.auth_send(&m::negotiate(tid, &[1], &[m::DHGROUP_NULL]))
                .status(),
            0
        );
        let c = self.auth_receive(4096);
        assert_eq!(c.status(), 0);
        let c = c.data().to_vec();
        assert_eq!((c[0], c[1]), (m::TYPE_DHCHAP, m::CHALLENGE), "{c:?}");
        let hl = c[6] as usize;
        let s1 = u32::from_le_bytes(c[12..16].try_into().unwrap());
        let key = Secret::parse(&secret()).unwrap().transformed(hostnqn);
        let response = Hash::Sha256.hmac(
            &key,
            &[
                &c[16..16 + hl],
                &s1.to_le_bytes(),
                &tid.to_le_bytes(),
                &[0],
                b"HostHost",
                hostnqn.as_bytes(),
                &[0],
                subnqn.as_bytes(),
            ],
        );
        assert_eq!(
            self.auth_send(&m::reply(tid, &response, None, &[]))
                .status(),
            0
        );
        let s = self.auth_receive(4096);
        assert_eq!(s.status(), 0);
        s.data().to_vec()
    }

    /// A Write of `data` at `slba` of namespace 1 (in the capsule when
    /// `in_capsule`, else by R2T).
    pub fn write(&mut self, slba: u64, block: usize, data: &[u8], in_capsule: bool) -> Ended {
        let nlb = (data.len() / block) as u32;
        let mut sqe = Command::rw(0x01, 1, slba, nlb);
        if in_capsule {
            self.exec(sqe, data, &[])
        } else {
            sqe.set_sgl(data.len() as u32, sgl::TRANSPORT);
            self.exec(sqe, &[], data)
        }
    }

    /// A Read of `len` bytes at `slba` of namespace 1.
    pub fn read_blocks(&mut self, slba: u64, block: usize, len: usize) -> Ended {
        let mut sqe = Command::rw(0x02, 1, slba, (len / block) as u32);
        sqe.set_sgl(len as u32, sgl::TRANSPORT);
        self.exec(sqe, &[], &[])
    }

    /// Ends the connection as a host that goes away does: the host is
    /// gone, the IOs in flight end, and the queue lets everything go.
    pub fn close(mut self) {
        self.qp.host_gone();
        self.run_ios();
        assert!(self.qp.should_close(), "closes once its IOs have ended");
        self.qp.close();
    }
}

/// Runs `io` on `disk`.
fn execute(disk: &mut [u8], mut io: IoRequest) -> IoOutcome {
    let (off, len) = (io.offset as usize, io.len as usize);
    let in_range = off.checked_add(len).is_some_and(|e| e <= disk.len());
    let status = if !in_range {
        Err(crate::bdev::IoError::OutOfRange {
            offset: io.offset,
            len: io.len,
            size: disk.len() as u64,
        })
    } else {
        match io.op {
            IoType::Read => {
                let buf = io.buf.as_mut().unwrap();
                buf.as_mut_slice()[..len].copy_from_slice(&disk[off..off + len]);
                Ok(())
            }
            IoType::Write => {
                let buf = io.buf.as_ref().unwrap();
                disk[off..off + len].copy_from_slice(&buf.as_slice()[..len]);
                Ok(())
            }
            IoType::Flush => Ok(()),
            IoType::Unmap | IoType::WriteZeroes => {
                disk[off..off + len].fill(0);
                Ok(())
            }
            IoType::Copy => {
                let src = io.src as usize;
                if src + len <= disk.len() {
                    disk.copy_within(src..src + len, off);
                    Ok(())
                } else {
                    Err(crate::bdev::IoError::Device(22))
                }
            }
        }
    };
    IoOutcome {
        tag: io.tag,
        status,
        len: io.len,
        zeroes: false,
        buf: io.buf,
    }
}
