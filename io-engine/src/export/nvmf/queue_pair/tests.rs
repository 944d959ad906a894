//! The queue pair's core driven from memory (`testing`): every PDU type a
//! host sends, the commands of each queue type, and every hostile input
//! that once panicked, aborted, starved or locked out the target.

use std::time::Duration;

use super::super::auth::message as m;
use super::super::command::{Command, fctype, sgl};
use super::super::pdu::{self, Digests, Fes, kind};
use super::super::testing::*;
use super::super::{Limits, nqn};
use super::{CONNECT_DEADLINE, INPUT_BYTES, OUTPUT_CAP};
use crate::env::tsc;
use crate::export::Handshakes;

const NONE: Digests = Digests {
    header: false,
    data: false,
};
const HEADER: Digests = Digests {
    header: true,
    data: false,
};
const BOTH: Digests = Digests {
    header: true,
    data: true,
};

fn ticks(d: Duration) -> u64 {
    tsc::ns_to_ticks(d.as_nanos() as u64)
}

/// An admin queue (enabled, 4 I/O queues) and I/O queue 1 of `device`,
/// no authentication.
fn pair(f: &Fixture, device: &str, digests: Digests) -> (TestHost, TestHost, u16) {
    let mut admin = f.host();
    let cntlid = admin.enabled_admin(device, HOST, 4);
    let mut io = f.host();
    assert_eq!(io.io_queue(device, HOST, cntlid, 1, digests).status(), 0);
    (admin, io, cntlid)
}

/// The FES and FEI of the C2HTermReq that ended a command, checking it
/// was the last thing sent and the queue takes nothing more.
fn terminated(h: &mut TestHost, e: &Ended) -> (u16, u32) {
    let Ended::Terminated(p) = e else {
        panic!("not terminated: {e:?}")
    };
    assert!(h.pdus().is_empty(), "a C2HTermReq is the last PDU");
    assert!(h.qp.recv_buf().is_none(), "nothing is read after it");
    assert_eq!(h.send(&[0; 64]), 0);
    (p.u16_at(8), p.u32_at(10))
}

/// The first PDU the target sent after `bytes`, which must end the
/// connection.
fn terminated_by(h: &mut TestHost, bytes: &[u8]) -> (u16, u32) {
    h.send(bytes);
    h.run_ios();
    let p = h.pdus().pop().expect("an answer");
    assert_eq!(p.header.kind, kind::C2H_TERM_REQ, "{p:?}");
    let e = Ended::Terminated(p);
    terminated(h, &e)
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn an_icreq_gets_an_icresp_with_the_digests_and_maxh2cdata() {
    let f = Fixture::new();
    let mut h = f.host();
    let pdus = h.ic(BOTH, 0);
    assert_eq!(pdus.len(), 1);
    let p = &pdus[0];
    assert_eq!(
        (p.header.kind, p.header.hlen, p.header.plen),
        (kind::IC_RESP, 128, 128)
    );
    assert_eq!(p.bytes[10], 0, "CPDA 0");
    assert_eq!(p.bytes[11], 3, "both digests");
    assert_eq!(p.u32_at(12), 128 << 10, "MAXH2CDATA: the largest transfer");
}

#[test]
fn bad_icreqs_and_pdus_out_of_sequence_are_terminated() {
    let f = Fixture::new();
    let ic = |hpda: u8, pfv: u16| {
        let mut b = Vec::new();
        pdu::put_ic_req(&mut b, NONE, hpda, 0);
        b[8..10].copy_from_slice(&pfv.to_le_bytes());
        b
    };
    {
        let mut h = f.host();
        assert_eq!(
            terminated_by(&mut h, &ic(0, 1)),
            (Fes::InvalidHeaderField as u16, 8)
        );
        let mut h = f.host();
        assert_eq!(
            terminated_by(&mut h, &ic(32, 0)),
            (Fes::InvalidHeaderField as u16, 10)
        );
        let mut h = f.host();
        let capsule = h.capsule(&Command::new(0x18, 0), &[], false);
        assert_eq!(terminated_by(&mut h, &capsule).0, Fes::PduSequence as u16);
    }
    let mut h = f.host();
    h.ic(NONE, 0);
    assert_eq!(terminated_by(&mut h, &ic(0, 0)).0, Fes::PduSequence as u16);
    // A terminated queue closes once its C2HTermReq is sent.
    assert!(h.qp.should_close());
    drop(h);
    assert_eq!(f.held().connections, 0);
}

#[test]
fn pdus_a_host_never_sends_and_malformed_headers_are_terminated() {
    let f = Fixture::new();
    // (header bytes, FES, FEI): type, flags, HLEN, PDO, PLEN.
    let header = |k: u8, hlen: u8, pdo: u8, plen: u32| {
        let mut b = vec![k, 0, hlen, pdo];
        b.extend_from_slice(&plen.to_le_bytes());
        b.resize(plen.max(8) as usize, 0);
        b
    };
    let field = Fes::InvalidHeaderField as u16;
    for (bytes, want) in [
        (header(kind::C2H_DATA, 24, 24, 28), (field, 0)),
        (header(kind::R2T, 24, 0, 24), (field, 0)),
        (header(kind::IC_RESP, 128, 0, 128), (field, 0)),
        (header(kind::CAPSULE_RESP, 24, 0, 24), (field, 0)),
        (header(0x42, 24, 0, 24), (field, 0)),
        (header(kind::CAPSULE_CMD, 70, 0, 70), (field, 2)),
        (header(kind::CAPSULE_CMD, 72, 0, 71), (field, 4)),
        (header(kind::CAPSULE_CMD, 72, 0, 100), (field, 4)),
        (header(kind::CAPSULE_CMD, 72, 10, 200), (field, 3)),
        (header(kind::H2C_DATA, 24, 24, 24), (field, 3)),
        (
            header(kind::CAPSULE_CMD, 72, 72, 72 + 8192 + 1),
            (Fes::DataTransferLimitExceeded as u16, 8193),
        ),
    ] {
        let mut h = f.host();
        h.ic(NONE, 0);
        assert_eq!(terminated_by(&mut h, &bytes), want, "{:?}", &bytes[..8]);
    }
    // An admin queue takes no H2CData: data in one is beyond its limit,
    // one without data is out of sequence.
    let mut h = f.host();
    assert_eq!(h.admin(Some("disk0"), HOST).status(), 0);
    let d = h.h2c_data(1, 0, 0, &[1; 512], true);
    assert_eq!(
        terminated_by(&mut h, &d).0,
        Fes::DataTransferLimitExceeded as u16
    );
    drop(h);
    let mut h = f.host();
    assert_eq!(h.admin(Some("disk0"), HOST).status(), 0);
    let mut d = h.h2c_data(1, 0, 0, &[], true);
    d[3] = 0;
    assert_eq!(terminated_by(&mut h, &d).0, Fes::PduSequence as u16);
    drop(h);
    assert_eq!((f.held().connections, f.held().controllers), (0, 0));
}

#[test]
fn an_h2c_term_req_ends_the_connection_without_an_answer() {
    let f = Fixture::new();
    let mut h = f.host();
    h.ic(NONE, 0);
    let mut b = vec![kind::H2C_TERM_REQ, 0, 24, 0, 24, 0, 0, 0];
    b.resize(24, 0);
    b[8] = 2;
    h.send(&b);
    assert!(h.pdus().is_empty());
    assert!(h.qp.should_close());
}

#[test]
fn header_and_data_digests_are_checked() {
    let f = Fixture::new();
    let (_a, mut io, _) = pair(&f, "disk0", BOTH);
    // A data digest that does not match: the command fails, the queue
    // goes on.
    let mut sqe = Command::rw(0x01, 1, 0, 8);
    let cid = io.cid();
    sqe.set_cid(cid);
    sqe.set_sgl(4096, sgl::IN_CAPSULE);
    let capsule = io.capsule(&sqe, &[7; 4096], true);
    io.send(&capsule);
    assert_eq!(io.finish(cid, &[]).status(), 0x022);
    assert_eq!(f.disk("disk0", 0, 8), [0; 8], "nothing written");
    assert_eq!(io.write(0, 512, &[9; 4096], true).status(), 0);
    assert_eq!(io.read_blocks(0, 512, 4096).data(), &[9; 4096][..]);
    // A header digest that does not match ends the connection.
    let mut capsule = io.capsule(&Command::rw(0x02, 1, 0, 1), &[], false);
    capsule[72] ^= 1;
    assert_eq!(terminated_by(&mut io, &capsule).0, Fes::HeaderDigest as u16);
}

/// Issue 8: data starts where the host's HPDA asks in every PDU the target
/// sends with data (zeroes pad the header to it).
#[test]
fn c2h_data_follows_the_hosts_data_alignment() {
    let f = Fixture::new();
    for (digests, hpda, pdo) in [
        (NONE, 0, 24),
        (HEADER, 0, 28),
        (NONE, 1, 24),
        (HEADER, 1, 32),
        (NONE, 31, 128),
        (BOTH, 31, 128),
    ] {
        let mut admin = f.host();
        let cntlid = admin.enabled_admin("disk0", HOST, 1);
        let mut io = f.host();
        io.hpda = hpda;
        assert_eq!(io.io_queue("disk0", HOST, cntlid, 1, digests).status(), 0);
        let data = pattern(hpda, 1024);
        assert_eq!(io.write(8, 512, &data, true).status(), 0);
        let mut sqe = Command::rw(0x02, 1, 8, 2);
        sqe.set_cid(77);
        sqe.set_sgl(1024, sgl::TRANSPORT);
        let capsule = io.capsule(&sqe, &[], false);
        io.send(&capsule);
        io.run_ios();
        let pdus = io.pdus();
        let c2h = pdus
            .iter()
            .find(|p| p.header.kind == kind::C2H_DATA)
            .unwrap();
        assert_eq!(c2h.header.pdo as usize, pdo, "HPDA {hpda}, {digests:?}");
        let hd = if digests.header { 4 } else { 0 };
        assert!(
            c2h.bytes[24 + hd..pdo].iter().all(|&b| b == 0),
            "zero padding"
        );
        assert_eq!(&c2h.bytes[pdo..pdo + 1024], &data[..]);
        let dd = if digests.data { 4 } else { 0 };
        assert_eq!(c2h.header.plen as usize, pdo + 1024 + dd);
        // An admin answer's data too.
        admin.hpda = hpda;
        let mut a = f.host();
        a.hpda = hpda;
        assert_eq!(a.admin(Some("disk0"), HOST).status(), 0);
        let mut sqe = Command::new(0x06, 0).with_cdw(10, 1);
        sqe.set_sgl(4096, sgl::TRANSPORT);
        let cid = a.cid();
        sqe.set_cid(cid);
        let capsule = a.capsule(&sqe, &[], false);
        a.send(&capsule);
        let pdus = a.pdus();
        let want = DataAlignment(hpda).pdo(24);
        assert_eq!(pdus[0].header.pdo as usize, want);
    }
}

/// The alignment type, for the test's expectations.
struct DataAlignment(u8);

impl DataAlignment {
    fn pdo(&self, header_end: usize) -> usize {
        pdu::DataAlignment::from_hpda(self.0)
            .unwrap()
            .pdo(header_end)
    }
}

#[test]
fn the_admin_queue_answers_its_commands() {
    let f = Fixture::new();
    let mut h = f.host();
    let e = h.admin(Some("disk0"), HOST);
    assert_eq!(e.status(), 0);
    let cntlid = e.cqe().dw0() as u16;
    assert_eq!(e.cqe().sqhd(), 1, "the Connect was entry 0");
    let get = |h: &mut TestHost, offset: u32| {
        let sqe = Command::fabrics(fctype::PROPERTY_GET).with_bytes(44, &offset.to_le_bytes());
        h.exec(sqe, &[], &[]).cqe()
    };
    let cap = get(&mut h, 0);
    assert_eq!(cap.dw0() & 0xFFFF, 127, "MQES");
    assert_eq!(get(&mut h, 8).dw0(), 0x0002_0000, "VS");
    assert_eq!(h.set_cc(CC_ENABLE).status(), 0);
    assert_eq!(get(&mut h, 0x1C).dw0() & 1, 1, "CSTS.RDY");
    let identify = |h: &mut TestHost, cns: u32, nsid: u32| {
        let mut sqe = Command::new(0x06, nsid).with_cdw(10, cns);
        sqe.set_sgl(4096, sgl::TRANSPORT);
        h.exec(sqe, &[], &[])
    };
    let c = identify(&mut h, 1, 0);
    assert_eq!(c.status(), 0);
    assert_eq!(u16::from_le_bytes([c.data()[78], c.data()[79]]), cntlid);
    assert_eq!(c.data()[111], 1, "an I/O controller");
    let ns = identify(&mut h, 0, 1);
    assert_eq!(
        u64::from_le_bytes(ns.data()[..8].try_into().unwrap()),
        2048,
        "NSZE"
    );
    assert_eq!(identify(&mut h, 0, 2).status(), 0x00B);
    assert_eq!(identify(&mut h, 2, 0).data()[..4], [1, 0, 0, 0]);
    assert_eq!(identify(&mut h, 3, 1).data()[0], 2, "NGUID first");
    assert_eq!(identify(&mut h, 9, 0).status(), 0x002);
    let log = |h: &mut TestHost, lid: u32, len: u32| {
        let mut sqe = Command::new(0x02, 0).with_cdw(10, lid | (len / 4 - 1) << 16);
        sqe.set_sgl(len, sgl::TRANSPORT);
        h.exec(sqe, &[], &[])
    };
    for (lid, len) in [(1, 64), (2, 512), (3, 512), (4, 4096), (5, 4096)] {
        let l = log(&mut h, lid, len);
        assert_eq!((l.status(), l.data().len()), (0, len as usize), "log {lid}");
    }
    assert_eq!(
        log(&mut h, 0x70, 1024).status(),
        0x109,
        "no discovery log here"
    );
    let feature = |h: &mut TestHost, op: u8, cdw10: u32, cdw11: u32| {
        h.exec(
            Command::new(op, 0).with_cdw(10, cdw10).with_cdw(11, cdw11),
            &[],
            &[],
        )
    };
    let q = feature(&mut h, 0x09, 0x07, 200 | 200 << 16).cqe();
    assert_eq!(q.dw0(), 63 | 63 << 16, "at most 64 I/O queues");
    assert_eq!(feature(&mut h, 0x0A, 0x0F, 0).cqe().dw0(), 0, "no KATO");
    assert_eq!(feature(&mut h, 0x09, 0x0F, 5000).status(), 0);
    assert_eq!(feature(&mut h, 0x0A, 0x0F, 0).cqe().dw0(), 5000);
    assert_eq!(feature(&mut h, 0x0A, 0x04, 0).cqe().dw0(), 343);
    assert_eq!(feature(&mut h, 0x09, 0x07 | 1 << 31, 0).status(), 0x10D);
    assert_eq!(feature(&mut h, 0x0A, 0x42, 0).status(), 0x002);
    // Asynchronous Event Requests are held, four at most.
    for _ in 0..4 {
        assert_eq!(h.exec(Command::new(0x0C, 0), &[], &[]), Ended::Silent);
    }
    assert_eq!(h.exec(Command::new(0x0C, 0), &[], &[]).status(), 0x105);
    assert_eq!(h.exec(Command::new(0x18, 0), &[], &[]).status(), 0);
    assert_eq!(h.exec(Command::new(0x08, 0), &[], &[]).cqe().dw0(), 1);
    assert_eq!(h.exec(Command::new(0x77, 0), &[], &[]).status(), 0x001);
    // An NVM command on the admin queue (Write's opcode) is not one it has.
    assert_eq!(h.exec(Command::new(0x01, 1), &[], &[]).status(), 0x001);
    // Disconnect ends the queue: its controller goes with it.
    assert_eq!(
        h.exec(Command::fabrics(fctype::DISCONNECT), &[], &[])
            .status(),
        0
    );
    assert!(h.qp.should_close());
    drop(h);
    assert_eq!(
        (f.held().controllers, f.held().hosts, f.held().connections),
        (0, 0, 0)
    );
}

#[test]
fn the_discovery_controller_serves_its_log_to_anyone() {
    let f = Fixture::new();
    let mut h = f.host();
    let e = h.admin(None, "nqn.2014-08.org.example:anyone");
    assert_eq!(e.status(), 0);
    let mut sqe = Command::new(0x06, 0).with_cdw(10, 1);
    sqe.set_sgl(4096, sgl::TRANSPORT);
    assert_eq!(
        h.exec(sqe, &[], &[]).data()[111],
        2,
        "a discovery controller"
    );
    let mut sqe = Command::new(0x02, 0).with_cdw(10, 0x70 | 255 << 16);
    sqe.set_sgl(1024, sgl::TRANSPORT);
    let l = h.exec(sqe, &[], &[]);
    assert_eq!(l.status(), 0);
    assert_eq!(l.data().len(), 1024);
}

#[test]
fn connects_that_cannot_be_served_get_their_status() {
    let f = Fixture::new();
    let mut h = f.host();
    h.ic(NONE, 0);
    // Unknown subsystem; a host not allowed; a bad SQSIZE; a CNTLID that
    // is not 0xFFFF on an admin queue.
    assert_eq!(
        h.connect(0, 31, 0xFFFF, "nqn.2024-12.io.io-engine:nope", HOST)
            .status(),
        0x182
    );
    assert_eq!(
        h.connect(0, 31, 0xFFFF, &nqn::nqn_of("sec0"), OTHER_HOST)
            .status(),
        0x184
    );
    assert_eq!(
        h.connect(0, 0, 0xFFFF, &nqn::nqn_of("disk0"), HOST)
            .status(),
        0x182
    );
    assert_eq!(
        h.connect(0, 31, 1, &nqn::nqn_of("disk0"), HOST).status(),
        0x182
    );
    // An I/O queue of a controller that does not exist, or not enabled.
    assert_eq!(
        h.connect(1, 31, 999, &nqn::nqn_of("disk0"), HOST).status(),
        0x182
    );
    let mut a = f.host();
    let cntlid = a.admin(Some("disk0"), HOST).cqe().dw0() as u16;
    assert_eq!(
        h.connect(1, 31, cntlid, &nqn::nqn_of("disk0"), HOST)
            .status(),
        0x00C
    );
    assert_eq!(a.set_cc(CC_ENABLE).status(), 0);
    // A QID beyond those granted (one by default).
    assert_eq!(
        h.connect(2, 31, cntlid, &nqn::nqn_of("disk0"), HOST)
            .status(),
        0x182
    );
    assert_eq!(
        h.connect(1, 31, cntlid, &nqn::nqn_of("disk0"), OTHER_HOST)
            .status(),
        0x182
    );
    assert_eq!(
        h.connect(1, 31, cntlid, &nqn::nqn_of("disk0"), HOST)
            .status(),
        0
    );
    // Connected: a second Connect on the queue is out of sequence.
    assert_eq!(
        h.connect(1, 31, cntlid, &nqn::nqn_of("disk0"), HOST)
            .status(),
        0x00C
    );
}

#[test]
fn an_io_queue_moves_data_with_every_command() {
    let f = Fixture::new();
    for digests in [NONE, BOTH] {
        let (_a, mut io, _) = pair(&f, "disk0", digests);
        let data = pattern(3, 4096);
        assert_eq!(io.write(0, 512, &data, true).status(), 0, "in the capsule");
        assert_eq!(f.disk("disk0", 0, 4096), data);
        let big = pattern(5, 64 << 10);
        assert_eq!(io.write(16, 512, &big, false).status(), 0, "by R2T");
        assert_eq!(io.read_blocks(16, 512, 64 << 10).data(), &big[..]);
        assert_eq!(io.read_blocks(0, 512, 4096).data(), &data[..]);
        // Compare: equal, then not.
        let cmp = |io: &mut TestHost, d: &[u8], in_capsule: bool| {
            let mut sqe = Command::rw(0x05, 1, 0, 8);
            if in_capsule {
                io.exec(sqe, d, &[])
            } else {
                sqe.set_sgl(d.len() as u32, sgl::TRANSPORT);
                io.exec(sqe, &[], d)
            }
        };
        assert_eq!(cmp(&mut io, &data, true).status(), 0);
        assert_eq!(cmp(&mut io, &data, false).status(), 0);
        assert_eq!(cmp(&mut io, &big[..4096], true).status(), 0x285);
        assert_eq!(
            io.exec(Command::new(0x00, 1), &[], &[]).status(),
            0,
            "flush"
        );
        let wz = Command::rw(0x08, 1, 0, 4);
        assert_eq!(io.exec(wz, &[], &[]).status(), 0);
        assert_eq!(f.disk("disk0", 0, 2048), vec![0; 2048]);
        // Dataset Management: deallocate two ranges.
        let mut ranges = vec![0u8; 32];
        ranges[4..8].copy_from_slice(&4u32.to_le_bytes());
        ranges[8..16].copy_from_slice(&4u64.to_le_bytes());
        ranges[20..24].copy_from_slice(&8u32.to_le_bytes());
        ranges[24..32].copy_from_slice(&16u64.to_le_bytes());
        let dsm = Command::new(0x09, 1).with_cdw(10, 1).with_cdw(11, 4);
        assert_eq!(io.exec(dsm, &ranges, &[]).status(), 0);
        assert_eq!(f.disk("disk0", 2048, 2048), vec![0; 2048]);
        assert_eq!(f.disk("disk0", 16 * 512, 4096), vec![0; 4096]);
        assert_eq!(f.disk("disk0", 24 * 512, 512), big[4096..4608]);
        // Copy blocks 100..108 (written first) to 200.
        assert_eq!(io.write(100, 512, &data, true).status(), 0);
        let mut range = vec![0u8; 32];
        range[8..16].copy_from_slice(&100u64.to_le_bytes());
        range[16..18].copy_from_slice(&7u16.to_le_bytes());
        let copy = Command::new(0x19, 1).with_cdw(10, 200);
        assert_eq!(io.exec(copy, &range, &[]).status(), 0);
        assert_eq!(f.disk("disk0", 200 * 512, 4096), data);
        // Refusals: out of range, another namespace, an unknown opcode,
        // a Copy onto itself.
        assert_eq!(io.read_blocks(2047, 512, 1024).status(), 0x080);
        let mut sqe = Command::rw(0x02, 2, 0, 1);
        sqe.set_sgl(512, sgl::TRANSPORT);
        assert_eq!(io.exec(sqe, &[], &[]).status(), 0x00B);
        assert_eq!(io.exec(Command::new(0x7E, 1), &[], &[]).status(), 0x001);
        let copy = Command::new(0x19, 1).with_cdw(10, 102);
        assert_eq!(io.exec(copy, &range, &[]).status(), 0x002);
    }
}

#[test]
fn a_read_only_share_refuses_writes() {
    let f = Fixture::new();
    let (_a, mut io, _) = pair(&f, "null0", NONE);
    assert_eq!(io.write(0, 4096, &[1; 4096], true).status(), 0x020);
    assert_eq!(
        io.exec(Command::rw(0x08, 1, 0, 1), &[], &[]).status(),
        0x020
    );
    assert_eq!(io.read_blocks(0, 4096, 8192).data(), &[0; 8192][..]);
}

#[test]
fn a_read_with_sq_flow_control_off_is_answered_by_its_data() {
    let f = Fixture::new();
    let mut admin = f.host();
    let cntlid = admin.enabled_admin("disk0", HOST, 1);
    let mut io = f.host();
    io.cattr = 0x04;
    assert_eq!(io.io_queue("disk0", HOST, cntlid, 1, NONE).status(), 0);
    assert_eq!(io.write(0, 512, &[4; 512], true).status(), 0);
    match io.read_blocks(0, 512, 512) {
        Ended::Success(d) => assert_eq!(d, vec![4; 512]),
        e => panic!("{e:?}"),
    }
}

#[test]
fn data_that_arrives_byte_by_byte_lands_whole() {
    let f = Fixture::new();
    for digests in [NONE, BOTH] {
        let (_a, mut io, _) = pair(&f, "disk0", digests);
        let data = pattern(9, 4096);
        // In the capsule, one byte at a time.
        let mut sqe = Command::rw(0x01, 1, 0, 8);
        let cid = io.cid();
        sqe.set_cid(cid);
        sqe.set_sgl(4096, sgl::IN_CAPSULE);
        let capsule = io.capsule(&sqe, &data, false);
        for b in capsule.chunks(1) {
            assert_eq!(io.send(b), 1);
        }
        assert_eq!(io.finish(cid, &[]).status(), 0);
        // By R2T, the H2CData in odd pieces.
        let data = pattern(11, 32 << 10);
        let mut sqe = Command::rw(0x01, 1, 64, 64);
        let cid = io.cid();
        sqe.set_cid(cid);
        sqe.set_sgl(32 << 10, sgl::TRANSPORT);
        let capsule = io.capsule(&sqe, &[], false);
        io.send(&capsule);
        let r2t = io.pdus().pop().unwrap();
        assert_eq!(r2t.header.kind, kind::R2T);
        let h2c = io.h2c_data(cid, r2t.u16_at(10), 0, &data, true);
        for piece in h2c.chunks(777) {
            assert_eq!(io.send(piece), piece.len());
        }
        assert_eq!(io.finish(cid, &[]).status(), 0);
        assert_eq!(io.read_blocks(64, 512, 32 << 10).data(), &data[..]);
        assert_eq!(io.read_blocks(0, 512, 4096).data(), &pattern(9, 4096)[..]);
        if digests.data {
            // A wrong data digest is caught however the PDU is cut: here
            // its last bytes come after all of its data.
            let mut sqe = Command::rw(0x01, 1, 0, 8);
            let cid = io.cid();
            sqe.set_cid(cid);
            sqe.set_sgl(4096, sgl::IN_CAPSULE);
            let capsule = io.capsule(&sqe, &[0xEE; 4096], true);
            let (head, digest) = capsule.split_at(capsule.len() - 2);
            io.send(head);
            io.send(digest);
            assert_eq!(io.finish(cid, &[]).status(), 0x022);
            assert_eq!(io.read_blocks(0, 512, 4096).data(), &pattern(9, 4096)[..]);
        }
    }
}

/// Issue 1: an H2CData for a command that awaits no data (a Compare whose
/// data is all in: in its capsule, or by its R2T) panicked the reactor
/// ("a Compare's second buffer"). Now it ends the connection, and
/// everything comes back.
#[test]
fn h2c_data_for_a_command_that_awaits_none_ends_the_connection() {
    let f = Fixture::new();
    let base = f.held();
    for by_r2t in [false, true] {
        for datal in [0usize, 512] {
            let (a, mut io, _) = pair(&f, "disk0", NONE);
            let mut sqe = Command::rw(0x05, 1, 0, 1);
            let cid = io.cid();
            sqe.set_cid(cid);
            let ttag = if by_r2t {
                sqe.set_sgl(512, sgl::TRANSPORT);
                let capsule = io.capsule(&sqe, &[], false);
                io.send(&capsule);
                let r2t = io.pdus().pop().unwrap();
                let ttag = r2t.u16_at(10);
                let d = io.h2c_data(cid, ttag, 0, &[0; 512], true);
                io.send(&d);
                ttag
            } else {
                sqe.set_sgl(512, sgl::IN_CAPSULE);
                let capsule = io.capsule(&sqe, &[0; 512], false);
                io.send(&capsule);
                0
            };
            // The Compare's device read is in flight: a data PDU for it,
            // at its end, empty or not.
            assert_eq!(io.ios.len(), 1);
            let mut d = io.h2c_data(cid, ttag, 512, &vec![1; datal], true);
            if datal == 0 {
                d.truncate(24);
                d[3] = 0; // PDO 0: no data
                d[4..8].copy_from_slice(&24u32.to_le_bytes());
            }
            io.send(&d);
            let pdus = io.pdus();
            let last = pdus.last().unwrap();
            assert_eq!(last.header.kind, kind::C2H_TERM_REQ, "{pdus:?}");
            io.run_ios();
            assert!(io.pdus().is_empty(), "nothing after the C2HTermReq");
            io.close();
            a.close();
            assert_eq!(f.held(), base, "by R2T {by_r2t}, DATAL {datal}");
        }
    }
}

#[test]
fn h2c_data_out_of_order_or_beyond_its_r2t_ends_the_connection() {
    let f = Fixture::new();
    let out_of_range = Fes::DataTransferOutOfRange as u16;
    let limit = Fes::DataTransferLimitExceeded as u16;
    for (offset, len, want) in [(512usize, 512usize, out_of_range), (0, 8192, limit)] {
        let (_a, mut io, _) = pair(&f, "disk0", NONE);
        let mut sqe = Command::rw(0x01, 1, 0, 8);
        let cid = io.cid();
        sqe.set_cid(cid);
        sqe.set_sgl(4096, sgl::TRANSPORT);
        let capsule = io.capsule(&sqe, &[], false);
        io.send(&capsule);
        let ttag = io.pdus().pop().unwrap().u16_at(10);
        let d = io.h2c_data(cid, ttag, offset as u32, &vec![1; len], true);
        assert_eq!(terminated_by(&mut io, &d).0, want);
        // A wrong tag or CID.
        let (_a, mut io, _) = pair(&f, "disk0", NONE);
        let capsule = io.capsule(&sqe, &[], false);
        io.send(&capsule);
        let ttag = io.pdus().pop().unwrap().u16_at(10);
        let d = io.h2c_data(cid + 1, ttag, 0, &[1; 512], true);
        assert_eq!(
            terminated_by(&mut io, &d),
            (Fes::InvalidHeaderField as u16, 10)
        );
    }
    assert_eq!(f.disk("disk0", 0, 4096), vec![0; 4096]);
}

/// Issue 2: a Write's capsule whose data does not match its SGL (a
/// transport SGL with data in the capsule; more data than the capsule may
/// carry) aborted the daemon when the largest transfer was above 128 KiB.
#[test]
fn capsule_data_that_does_not_match_its_sgl_is_refused() {
    let f = Fixture::with_limits(Limits::new(8192, 512 << 10, 128).unwrap());
    let (_a, mut io, _) = pair(&f, "disk0", NONE);
    // A transport SGL of 128 KiB with 8 KiB in the capsule.
    let mut sqe = Command::rw(0x01, 1, 0, 256);
    let cid = io.cid();
    sqe.set_cid(cid);
    sqe.set_sgl(128 << 10, sgl::TRANSPORT);
    let capsule = io.capsule(&sqe, &[0xAB; 8192], false);
    io.send(&capsule);
    assert_eq!(io.finish(cid, &[]).status(), 0x00F);
    // An in-capsule SGL longer than the data.
    let mut sqe = Command::rw(0x01, 1, 0, 16);
    let cid = io.cid();
    sqe.set_cid(cid);
    sqe.set_sgl(8192, sgl::IN_CAPSULE);
    let capsule = io.capsule(&sqe, &[0xAB; 4096], false);
    io.send(&capsule);
    assert_eq!(io.finish(cid, &[]).status(), 0x00F);
    // A read with data in its capsule.
    let mut sqe = Command::rw(0x02, 1, 0, 8);
    let cid = io.cid();
    sqe.set_cid(cid);
    sqe.set_sgl(4096, sgl::IN_CAPSULE);
    let capsule = io.capsule(&sqe, &[0xAB; 4096], false);
    io.send(&capsule);
    assert_eq!(io.finish(cid, &[]).status(), 0x011);
    assert_eq!(f.disk("disk0", 0, 8192), vec![0; 8192], "nothing written");
    // 512 KiB in the capsule of a 128 KiB Write: more than a capsule
    // carries, the connection ends before any of it is taken.
    let mut sqe = Command::rw(0x01, 1, 0, 256);
    sqe.set_cid(io.cid());
    sqe.set_sgl(128 << 10, sgl::TRANSPORT);
    let capsule = io.capsule(&sqe, &vec![0xCD; 512 << 10], false);
    let (fes, _) = terminated_by(&mut io, &capsule);
    assert_eq!(fes, Fes::DataTransferLimitExceeded as u16);
    assert_eq!(f.disk("disk0", 0, 8192), vec![0; 8192], "nothing written");
}

/// An admin and an I/O queue of `sec0` for [`HOST`], each authenticated,
/// the controller enabled with `queues` I/O queues.
fn authenticated_pair(f: &Fixture, queues: u32) -> (TestHost, TestHost, u16) {
    let sub = nqn::nqn_of("sec0");
    let mut admin = f.host();
    let e = admin.admin(Some("sec0"), HOST);
    assert_eq!(e.status(), 0);
    assert_ne!(e.cqe().dw0() & 1 << 17, 0, "authentication required");
    let cntlid = e.cqe().dw0() as u16;
    assert_eq!(admin.set_cc(CC_ENABLE).status(), 0x191, "not before it");
    let s = admin.authenticate(HOST, &sub);
    assert_eq!((s[0], s[1]), (m::TYPE_DHCHAP, m::SUCCESS1));
    assert_eq!(admin.set_cc(CC_ENABLE).status(), 0);
    assert_eq!(admin.set_queues(queues).status(), 0);
    let mut io = f.host();
    let e = io.io_queue("sec0", HOST, cntlid, 1, NONE);
    assert_eq!(e.status(), 0);
    assert_ne!(e.cqe().dw0() & 1 << 17, 0);
    let s = io.authenticate(HOST, &sub);
    assert_eq!((s[0], s[1]), (m::TYPE_DHCHAP, m::SUCCESS1));
    (admin, io, cntlid)
}

/// Issue 3: a queue that fails to authenticate (here an intruder that
/// claims another host's name and controller, then sends Failure2) tore
/// down that host's controller. It ends only itself now.
#[test]
fn a_failed_authentication_ends_only_its_own_queue() {
    let f = Fixture::new();
    let (mut admin, mut io, cntlid) = authenticated_pair(&f, 4);
    assert_eq!(io.write(0, 4096, &[5; 4096], true).status(), 0);
    let mut intruder = f.host();
    let e = intruder.io_queue("sec0", HOST, cntlid, 2, NONE);
    assert_eq!(e.status(), 0);
    let failure2 = m::failure(m::FAILURE2, 0, m::FAILED);
    assert_eq!(intruder.auth_send(&failure2).status(), 0);
    intruder.run_ios();
    assert!(intruder.qp.should_close(), "the intruder's queue ends");
    intruder.qp.close();
    admin.advance(1);
    io.advance(1);
    assert!(admin.qp.controller_alive() && io.qp.controller_alive());
    assert!(!admin.qp.should_close() && !io.qp.should_close());
    assert_eq!(admin.exec(Command::new(0x18, 0), &[], &[]).status(), 0);
    assert_eq!(io.read_blocks(0, 4096, 4096).data(), &[5; 4096][..]);
    // An admin queue that fails ends with the controller it made, and no
    // other.
    let mut other = f.host();
    assert_eq!(other.admin(Some("sec0"), HOST).status(), 0);
    assert_eq!(other.auth_send(&failure2).status(), 0);
    assert!(other.qp.should_close());
    assert_eq!(f.held().controllers, 1, "only the victim's is left");
    drop(other);
    assert!(admin.qp.controller_alive());
}

/// Issue 4: an I/O queue took an export slot and 4 MiB of buffers at its
/// Connect, before it authenticated. It holds nothing until it has.
#[test]
fn an_io_queue_holds_nothing_until_it_authenticates() {
    let f = Fixture::new();
    let (admin, io, cntlid) = authenticated_pair(&f, 8);
    let held = (f.held().attached, f.held().controllers);
    assert_eq!(held.0, vec![0, 0, 1]);
    assert_eq!(f.target.host_queues.count(HOST), 2);
    let mut pending: Vec<TestHost> = (2..=8)
        .map(|qid| {
            let mut h = f.host();
            assert_eq!(h.io_queue("sec0", HOST, cntlid, qid, NONE).status(), 0);
            assert!(h.qp.device().is_none());
            h
        })
        .collect();
    assert_eq!((f.held().attached, f.held().controllers), held, "no slot");
    assert_eq!(f.target.host_queues.count(HOST), 2, "no host place");
    assert_eq!(admin.qp.controller_queues(), 1);
    // Commands are refused before authentication.
    let e = pending[0].read_blocks(0, 4096, 4096);
    assert_eq!(e.status(), 0x191);
    assert!(pending[0].ios.is_empty());
    // Once it authenticates, it holds its place.
    let s = pending[0].authenticate(HOST, &nqn::nqn_of("sec0"));
    assert_eq!(s[1], m::SUCCESS1);
    assert_eq!(f.held().attached, vec![0, 0, 2]);
    assert_eq!(admin.qp.controller_queues(), 2);
    assert_eq!(pending[0].read_blocks(0, 4096, 4096).status(), 0);
    for h in pending.drain(..) {
        h.close();
    }
    io.close();
    admin.close();
    assert_eq!(f.held().attached, vec![0, 0, 0]);
    assert_eq!((f.held().controllers, f.held().hosts), (0, 0));
}

/// Issue 5: every Negotiate computed an ffdhe2048 key pair on the
/// reactor. One per transaction now, and each paid from the target's
/// budget: past it, a queue's Negotiate waits for its token.
#[test]
fn dh_computations_are_one_per_transaction_and_budgeted() {
    // A budget of one per second, two at once.
    let f = Fixture::with_limits(Limits::default().with_dh_budget(1, 2));
    // A second Negotiate fails the transaction.
    let mut h = f.host();
    assert_eq!(h.admin(Some("sec0"), HOST).status(), 0);
    let negotiate = m::negotiate(1, &[1], &[m::DHGROUP_2048]);
    assert_eq!(h.auth_send(&negotiate).status(), 0);
    assert_eq!(h.auth_send(&negotiate).status(), 0);
    let f1 = h.auth_receive(4096);
    assert_eq!((f1.data()[0], f1.data()[1]), (m::TYPE_COMMON, m::FAILURE1));
    assert!(h.qp.should_close());
    drop(h);
    // The budget: the token left, then one Negotiate waits for a token.
    let mut hosts: Vec<TestHost> = Vec::new();
    let mut waiting = None;
    for i in 0..4 {
        let mut h = f.host();
        assert_eq!(h.admin(Some("sec0"), HOST).status(), 0);
        let e = h.auth_send(&negotiate);
        if e == Ended::Silent {
            waiting = Some(i);
            hosts.push(h);
            break;
        }
        assert_eq!(e.status(), 0);
        hosts.push(h);
    }
    assert_eq!(waiting, Some(1), "the second waits");
    let h = hosts.last_mut().unwrap();
    assert!(!h.qp.has_work(h.now), "it waits");
    h.advance(ticks(Duration::from_millis(1100)));
    let answer = h.pdus().pop().expect("answered once its token is due");
    assert_eq!(answer.cqe().status(), 0);
    let c = h.auth_receive(4096);
    assert_eq!((c.data()[0], c.data()[1]), (m::TYPE_DHCHAP, m::CHALLENGE));
}

/// Issue 6: a host that never reads its answers made the target queue
/// them without bound. It stops reading that host's commands while more
/// than the bound waits, and goes on once the host reads.
#[test]
fn a_host_that_does_not_read_stops_being_read() {
    let f = Fixture::new();
    let mut h = f.host();
    assert_eq!(h.admin(None, HOST).status(), 0);
    let mut sqe = Command::new(0x02, 0).with_cdw(10, 0x70 | 1023 << 16);
    sqe.set_sgl(4096, sgl::TRANSPORT);
    let mut stream = Vec::new();
    for cid in 0..20_000u16 {
        sqe.set_cid(cid);
        stream.extend_from_slice(&h.capsule(&sqe, &[], false));
    }
    let mut at = 0;
    while at < stream.len() {
        let n = h.send(&stream[at..]);
        if n == 0 {
            break;
        }
        at += n;
    }
    assert!(at < stream.len(), "it stopped reading");
    assert!(!h.qp.takes_input());
    // The output's heap: its bound and the answer that crossed it, grown
    // by doubling.
    let most = 2 * (OUTPUT_CAP + 4096);
    assert!(h.qp.memory() <= INPUT_BYTES + most, "{}", h.qp.memory());
    // The host reads: the rest goes through, every answer in order.
    let mut answered = 0u16;
    for _ in 0..100_000 {
        if answered == 20_000 {
            break;
        }
        for p in h.read(1 << 20) {
            if p.header.kind == kind::CAPSULE_RESP {
                assert_eq!(p.cqe().cid(), answered);
                answered += 1;
            }
        }
        if at < stream.len() {
            at += h.send(&stream[at..]);
        }
        assert!(h.qp.memory() <= INPUT_BYTES + most);
    }
    assert_eq!(answered, 20_000);
}

/// Issue 7: a second Connect of a QID that is connected was accepted.
#[test]
fn a_second_connect_of_one_qid_is_refused() {
    let f = Fixture::new();
    let (_admin, mut io, cntlid) = pair(&f, "disk0", NONE);
    let mut second = f.host();
    let e = second.io_queue("disk0", HOST, cntlid, 1, NONE);
    assert_eq!(e.status(), 0x182);
    assert_eq!(e.cqe().dw0() >> 16, 42, "the QID field");
    assert_eq!(io.write(0, 512, &[1; 512], true).status(), 0);
    io.close();
    let mut third = f.host();
    assert_eq!(third.io_queue("disk0", HOST, cntlid, 1, NONE).status(), 0);
    // Two queues of one QID authenticating: the first established keeps
    // it, the other is closed when it authenticates.
    let (_a, _io, cntlid) = authenticated_pair(&f, 4);
    let mut q = [f.host(), f.host()];
    for h in &mut q {
        assert_eq!(h.io_queue("sec0", HOST, cntlid, 3, NONE).status(), 0);
    }
    for h in &mut q {
        h.authenticate(HOST, &nqn::nqn_of("sec0"));
    }
    assert!(!q[0].qp.should_close() && q[1].qp.should_close());
    assert_eq!(q[0].read_blocks(0, 4096, 4096).status(), 0);
}

/// Issue 9: an AUTH_Receive too short for its message got part of it.
#[test]
fn a_short_auth_receive_fails_its_queue() {
    let f = Fixture::new();
    let mut h = f.host();
    assert_eq!(h.admin(Some("sec0"), HOST).status(), 0);
    let negotiate = m::negotiate(1, &[1], &[m::DHGROUP_NULL]);
    assert_eq!(h.auth_send(&negotiate).status(), 0);
    // An SGL shorter than the allocation length.
    let mut sqe = Command::fabrics(fctype::AUTH_RECEIVE)
        .with_bytes(41, &[m::SPSP, m::SPSP, m::SECP_DHCHAP])
        .with_bytes(44, &4096u32.to_le_bytes());
    sqe.set_sgl(16, sgl::TRANSPORT);
    assert_eq!(h.exec(sqe, &[], &[]).status(), 0x00F);
    let e = h.auth_receive(16);
    assert_eq!(e.status(), 0x002, "not part of a message");
    assert!(e.data().is_empty());
    assert!(h.qp.should_close());
    drop(h);
    assert_eq!(f.held().controllers, 0);
}

#[test]
fn each_host_holds_at_most_its_queues() {
    let f = Fixture::with_limits(Limits::default().with_queues_per_host(2));
    let (_admin, io, cntlid) = pair(&f, "disk0", NONE);
    let mut third = f.host();
    assert_eq!(
        third.io_queue("disk0", HOST, cntlid, 2, NONE).status(),
        0x181
    );
    let mut other = f.host();
    assert_eq!(other.admin(Some("disk0"), OTHER_HOST).status(), 0);
    io.close();
    let mut again = f.host();
    assert_eq!(again.io_queue("disk0", HOST, cntlid, 2, NONE).status(), 0);
}

#[test]
fn queues_that_do_not_connect_or_authenticate_in_time_close() {
    let f = Fixture::new();
    let deadline = ticks(CONNECT_DEADLINE) + 1;
    let mut silent = f.host();
    silent.advance(deadline / 2);
    assert!(!silent.qp.should_close());
    silent.advance(deadline);
    assert!(silent.qp.should_close());
    let mut unauth = f.host();
    assert_eq!(unauth.admin(Some("sec0"), HOST).status(), 0);
    unauth.advance(deadline);
    assert!(unauth.qp.should_close());
    drop(unauth);
    assert_eq!(f.held().controllers, 0, "its controller goes with it");
    // Evicted to make room for a newcomer.
    let handshakes = Handshakes::new(1);
    let (slot, _) = handshakes.admit(0);
    let mut h = f.host_in(Some(slot));
    let (_newcomer, evicted) = handshakes.admit(0);
    assert_eq!(evicted, Some(0));
    h.advance(1);
    assert!(h.qp.should_close());
    // Established: no deadline, and it left the handshakes.
    let handshakes = Handshakes::new(0);
    let (slot, _) = handshakes.admit(0);
    let mut h = f.host_in(Some(slot));
    assert_eq!(handshakes.len(), 1);
    assert_eq!(h.admin(Some("disk0"), HOST).status(), 0);
    assert_eq!(handshakes.len(), 0);
    h.advance(deadline * 2);
    assert!(!h.qp.should_close());
}

#[test]
fn a_controller_whose_keep_alive_expires_is_torn_down() {
    let f = Fixture::new();
    let mut h = f.host();
    h.kato = 100;
    assert_eq!(h.admin(Some("disk0"), HOST).status(), 0);
    for _ in 0..3 {
        h.advance(ticks(Duration::from_millis(80)));
        assert_eq!(h.exec(Command::new(0x18, 0), &[], &[]).status(), 0);
    }
    assert!(!h.qp.should_close());
    h.advance(ticks(Duration::from_millis(150)));
    assert!(h.qp.should_close());
    drop(h);
    assert_eq!(f.held().controllers, 0);
}

#[test]
fn an_unshare_is_announced_and_ends_the_queues() {
    let f = Fixture::new();
    let (mut admin, mut io, _) = pair(&f, "disk0", NONE);
    let cid = admin.cid();
    let sqe = {
        let mut c = Command::new(0x0C, 0);
        c.set_cid(cid);
        c
    };
    let capsule = admin.capsule(&sqe, &[], false);
    admin.send(&capsule);
    assert!(admin.pdus().is_empty(), "held");
    let release = f.target.exports.unshare("disk0").unwrap();
    admin.advance(1);
    let aer = admin.pdus().pop().unwrap().cqe();
    assert_eq!((aer.cid(), aer.dw0()), (cid, 0x0004_0002));
    assert!(admin.qp.should_close());
    io.advance(1);
    assert!(io.qp.should_close());
    io.close();
    assert!(release.wait(Duration::from_secs(1)), "the device is let go");
}

#[test]
fn a_host_that_vanishes_mid_command_leaks_nothing() {
    let f = Fixture::new();
    let base = f.held();
    let (admin, mut io, _) = pair(&f, "disk0", NONE);
    // A Write awaiting its data, reads in flight.
    let mut sqe = Command::rw(0x01, 1, 0, 64);
    sqe.set_cid(io.cid());
    sqe.set_sgl(32 << 10, sgl::TRANSPORT);
    let capsule = io.capsule(&sqe, &[], false);
    io.send(&capsule);
    for slba in 0..8 {
        let mut sqe = Command::rw(0x02, 1, slba * 8, 8);
        sqe.set_cid(io.cid());
        sqe.set_sgl(4096, sgl::TRANSPORT);
        let capsule = io.capsule(&sqe, &[], false);
        io.send(&capsule);
    }
    assert_eq!(io.qp.in_flight(), 8);
    io.qp.host_gone();
    assert!(!io.qp.should_close(), "not with IO in flight");
    io.close();
    admin.close();
    assert_eq!(f.held(), base);
}

#[test]
fn commands_beyond_the_queue_or_its_buffers() {
    let f = Fixture::new();
    let mut admin = f.host();
    let cntlid = admin.enabled_admin("disk0", HOST, 1);
    let mut io = f.host();
    io.ic(NONE, 0);
    // A queue of 64 entries: 33 reads of 128 KiB wait for the 32 buffers
    // (the 33rd waits), then more than the queue holds is refused.
    assert_eq!(
        io.connect(1, 63, cntlid, &nqn::nqn_of("disk0"), HOST)
            .status(),
        0
    );
    let read = |io: &mut TestHost, cid: u16| {
        let mut sqe = Command::rw(0x02, 1, 0, 256);
        sqe.set_cid(cid);
        sqe.set_sgl(128 << 10, sgl::TRANSPORT);
        let c = io.capsule(&sqe, &[], false);
        io.send(&c);
    };
    for cid in 0..33 {
        read(&mut io, cid);
    }
    assert_eq!(io.ios.len(), 32);
    assert!(io.qp.waits_for_buffer());
    io.run_ios();
    // The answers hold the buffers until the host reads them.
    let mut answered = 0;
    for _ in 0..10 {
        for p in io.pdus() {
            answered += usize::from(p.header.kind == kind::CAPSULE_RESP);
        }
        io.run_ios();
    }
    assert_eq!(answered, 33);
    // 64 flushes in flight fill the queue: the 65th is refused.
    for cid in 100..165 {
        let mut sqe = Command::new(0x00, 1);
        sqe.set_cid(cid);
        let c = io.capsule(&sqe, &[], false);
        io.send(&c);
    }
    let refused = io.pdus();
    assert_eq!(refused.len(), 1);
    assert_eq!(
        (refused[0].cqe().cid(), refused[0].cqe().status()),
        (164, 0x00C)
    );
    io.run_ios();
    assert_eq!(io.pdus().len(), 64);
}

/// Sends a Write of `len` bytes at 512-byte block `slba` whose data goes
/// by R2T; returns its CID and the R2T's transfer tag.
fn write_by_r2t(io: &mut TestHost, slba: u64, len: usize) -> (u16, u16) {
    let mut sqe = Command::rw(0x01, 1, slba, (len / 512) as u32);
    let cid = io.cid();
    sqe.set_cid(cid);
    sqe.set_sgl(len as u32, sgl::TRANSPORT);
    let capsule = io.capsule(&sqe, &[], false);
    io.send(&capsule);
    let r2t = io.pdus();
    assert_eq!(r2t.first().map(|p| p.header.kind), Some(kind::R2T));
    (cid, r2t[0].u16_at(10))
}

/// Data digests of large PDUs are handed out to compute off the core
/// (the transport's offload engine), small ones computed inline; either
/// way the data moves and the digests sent are right.
#[test]
fn large_pdus_digests_are_computed_off_the_core_and_small_ones_inline() {
    let f = Fixture::new();
    let (_a, mut io, _) = pair(&f, "disk0", BOTH);
    io.qp.offload_digests(16 << 10, 1 << 20);
    let small = pattern(1, 4096);
    assert_eq!(io.write(0, 512, &small, true).status(), 0);
    assert_eq!(io.read_blocks(0, 512, 4096).data(), &small[..]);
    let inline_also = pattern(6, 8 << 10);
    assert_eq!(io.write(64, 512, &inline_also, false).status(), 0);
    assert_eq!(io.digests_offloaded, 0, "PDUs under 16 KiB: inline");
    let big = pattern(2, 64 << 10);
    assert_eq!(io.write(16, 512, &big, false).status(), 0, "by R2T");
    assert_eq!(io.digests_offloaded, 1, "the H2CData's digest");
    assert_eq!(f.disk("disk0", 16 * 512, 64 << 10), big);
    // The C2HData's digest (checked by the harness) came off the core.
    assert_eq!(io.read_blocks(16, 512, 64 << 10).data(), &big[..]);
    assert_eq!(io.digests_offloaded, 2);
    // Data digests off: nothing handed out.
    let (_b, mut plain, _) = pair(&f, "disk0", HEADER);
    plain.qp.offload_digests(16 << 10, 1 << 20);
    assert_eq!(plain.write(16, 512, &big, false).status(), 0);
    assert_eq!(plain.read_blocks(16, 512, 64 << 10).data(), &big[..]);
    assert_eq!(plain.digests_offloaded, 0);
}

/// A large PDU whose digest does not match fails its command (Transient
/// Transport Error) once the digest computed off the core says so; the
/// queue goes on.
#[test]
fn a_bad_digest_checked_off_the_core_fails_its_command() {
    let f = Fixture::new();
    let (_a, mut io, _) = pair(&f, "disk0", BOTH);
    io.qp.offload_digests(16 << 10, 1 << 20);
    let data = pattern(4, 32 << 10);
    let (cid, ttag) = write_by_r2t(&mut io, 0, 32 << 10);
    let mut h2c = io.h2c_data(cid, ttag, 0, &data, true);
    let n = h2c.len();
    h2c[n - 1] ^= 0x80;
    io.send(&h2c);
    assert!(
        io.ios.is_empty(),
        "nothing goes to the device before the check"
    );
    assert_eq!(io.digest_jobs.len(), 1);
    assert_eq!(io.finish(cid, &[]).status(), 0x022);
    assert_eq!(
        f.disk("disk0", 0, 32 << 10),
        vec![0; 32 << 10],
        "nothing written"
    );
    assert_eq!(
        io.write(0, 512, &data, false).status(),
        0,
        "the queue goes on"
    );
    assert_eq!(f.disk("disk0", 0, 32 << 10), data);
}

/// A command whose data comes in several large H2CData PDUs goes to the
/// device only once every one is in and checked, whatever order the
/// checks end in; the next PDU is taken while earlier ones are checked.
#[test]
fn a_command_waits_for_all_its_digests() {
    let f = Fixture::new();
    let (_a, mut io, _) = pair(&f, "disk0", BOTH);
    io.qp.offload_digests(16 << 10, 1 << 20);
    let data = pattern(7, 64 << 10);
    let (cid, ttag) = write_by_r2t(&mut io, 32, 64 << 10);
    for (i, part) in data.chunks(16 << 10).enumerate() {
        let last = i == 3;
        let h2c = io.h2c_data(cid, ttag, (i * (16 << 10)) as u32, part, last);
        assert_eq!(io.send(&h2c), h2c.len());
    }
    assert_eq!(io.digest_jobs.len(), 4, "every PDU taken, each to check");
    assert!(io.ios.is_empty());
    assert!(io.run_digest(3) && io.run_digest(0) && io.run_digest(1));
    assert!(io.ios.is_empty(), "one check still out");
    assert!(io.run_digest(0));
    assert_eq!(io.ios.len(), 1, "the Write goes to the device");
    assert_eq!(io.finish(cid, &[]).status(), 0);
    assert_eq!(f.disk("disk0", 32 * 512, 64 << 10), data);
}

/// A digest the engine fails is computed by the queue pair itself: the
/// data still moves, checked and with the right digests.
#[test]
fn a_digest_the_engine_fails_is_computed_inline() {
    let f = Fixture::new();
    let (_a, mut io, _) = pair(&f, "disk0", BOTH);
    io.qp.offload_digests(16 << 10, 1 << 20);
    io.digest_engine = DigestEngine::Fails;
    let data = pattern(9, 128 << 10);
    assert_eq!(io.write(0, 512, &data, false).status(), 0);
    assert_eq!(io.read_blocks(0, 512, 128 << 10).data(), &data[..]);
    assert_eq!(io.digests_offloaded, 2);
    let (cid, ttag) = write_by_r2t(&mut io, 0, 32 << 10);
    let mut h2c = io.h2c_data(cid, ttag, 0, &data[..32 << 10], true);
    let n = h2c.len();
    h2c[n - 2] ^= 1;
    io.send(&h2c);
    assert_eq!(io.finish(cid, &[]).status(), 0x022, "checked inline");
}

/// A host that goes while digests are out: the queue does not close (and
/// let their buffers go) until they are done, then leaks nothing.
#[test]
fn a_host_gone_with_digests_out_closes_after_them() {
    let f = Fixture::new();
    let base = f.held();
    let (admin, mut io, _) = pair(&f, "disk0", BOTH);
    io.qp.offload_digests(16 << 10, 1 << 20);
    // A Write's data in, its check out; a Read's data read, its digest
    // out.
    let data = pattern(5, 32 << 10);
    let (cid, ttag) = write_by_r2t(&mut io, 0, 32 << 10);
    let h2c = io.h2c_data(cid, ttag, 0, &data, true);
    io.send(&h2c);
    let mut sqe = Command::rw(0x02, 1, 64, 64);
    sqe.set_cid(io.cid());
    sqe.set_sgl(32 << 10, sgl::TRANSPORT);
    let capsule = io.capsule(&sqe, &[], false);
    io.send(&capsule);
    while io.run_io(0) {}
    assert_eq!(io.digest_jobs.len(), 2);
    assert_eq!(io.qp.in_flight(), 0);
    io.qp.host_gone();
    assert!(!io.qp.should_close(), "not with digests out");
    assert!(io.run_digest(1));
    assert!(!io.qp.should_close(), "not with a digest out");
    io.close();
    admin.close();
    assert_eq!(f.held(), base);
}

/// A queue pair whose transport stops while an engine still holds a
/// digest's task leaks that command's buffer (the engine may still read
/// it): the connection's buffer pool is then kept alive, never freed or
/// reused under the engine (debug builds assert that).
#[test]
#[cfg_attr(miri, ignore = "leaks a pool on purpose")]
fn buffers_under_digests_the_engine_still_holds_are_leaked() {
    let f = Fixture::new();
    let (admin, mut io, _) = pair(&f, "disk0", BOTH);
    io.qp.offload_digests(16 << 10, 1 << 20);
    let mut sqe = Command::rw(0x02, 1, 0, 64);
    sqe.set_cid(io.cid());
    sqe.set_sgl(32 << 10, sgl::TRANSPORT);
    let capsule = io.capsule(&sqe, &[], false);
    io.send(&capsule);
    while io.run_io(0) {}
    assert_eq!(io.digest_jobs.len(), 1, "the read's digest out");
    io.qp.host_gone();
    io.qp.leak_digest_buffers();
    io.digest_jobs.clear();
    let leaked = crate::pool::leaked_pools();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        io.qp.close();
        drop(io);
    }));
    assert_eq!(r.is_err(), cfg!(debug_assertions));
    assert_eq!(
        crate::pool::leaked_pools(),
        leaked + 1,
        "the buffer's pool kept"
    );
    admin.close();
}
