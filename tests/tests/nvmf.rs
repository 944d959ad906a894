//! End-to-end tests of the daemon's NVMe/TCP target: the release
//! `io-engine` sharing malloc devices on 127.0.0.1 (kernel-chosen port),
//! driven PDU by PDU by the test library's host (`io_engine_tests::nvmf`):
//! the Connect sequence a host runs, Identify, reads and writes (in the
//! capsule and through R2T, with and without digests, data checked),
//! Write Zeroes, Dataset Management, the discovery log, the statuses of
//! wrong commands, and the malformed PDUs that end a connection with a
//! C2HTermReq (and disturb no other connection).
//!
//! Every test starts its own daemon, killed when the test ends; every
//! socket has timeouts.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use io_engine_tests::daemon::Daemon;
use io_engine_tests::nvmf::{CC_ENABLE, Cqe, DISCOVERY_NQN, HOST_NQN, Host, Sqe, crc32c, nqn_of};

const BS: usize = 4096;
/// The device: 64 MiB of 4 KiB blocks.
const BLOCKS: u64 = 16384;

fn start() -> Daemon {
    Daemon::start_quiet([
        "--bdev",
        "malloc:///m0?size_mb=64&blk_size=4096",
        "--share",
        "m0:nvmf",
    ])
}

/// An admin queue (enabled) and one I/O queue to `m0`.
fn connect(addr: SocketAddr, digests: (bool, bool)) -> (Host, Host, u16) {
    let (mut admin, cqe) = Host::admin(addr, &nqn_of("m0"), 0).unwrap();
    assert_eq!(cqe.status(), 0, "admin Connect");
    let cntlid = cqe.dw0() as u16;
    assert_eq!(admin.set_cc(CC_ENABLE).unwrap().status(), 0);
    assert_eq!(
        admin.get_property(0x1C, false).unwrap() & 1,
        1,
        "CSTS.RDY follows CC.EN"
    );
    let mut io = Host::tcp(addr).unwrap();
    io.ic(digests.0, digests.1).unwrap();
    assert_eq!(io.digests, digests, "the digests asked for are on");
    let cqe = io
        .connect(1, 127, cntlid, &nqn_of("m0"), HOST_NQN, 0)
        .unwrap();
    assert_eq!(cqe.status(), 0, "I/O queue Connect");
    (admin, io, cntlid)
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn write(io: &mut Host, slba: u64, data: &[u8]) -> Cqe {
    let nlb = (data.len() / BS) as u32;
    let sqe = Sqe::rw(0x01, 1, slba, nlb);
    if data.len() <= 8192 {
        io.exec(sqe, data, &[]).unwrap().0
    } else {
        let sqe = sqe.with_bytes(32, &(data.len() as u32).to_le_bytes());
        io.exec(sqe, &[], data).unwrap().0
    }
}

fn read(io: &mut Host, slba: u64, nlb: u32) -> (Cqe, Vec<u8>) {
    let sqe = Sqe::rw(0x02, 1, slba, nlb).with_bytes(32, &(nlb * BS as u32).to_le_bytes());
    io.exec(sqe, &[], &[]).unwrap()
}

#[test]
fn a_host_connects_identifies_writes_and_reads_back() {
    let d = start();
    let (mut admin, mut io, cntlid) = connect(d.nvmf_addr(), (false, false));

    // Identify Controller: its CNTLID is the one Connect returned.
    let (cqe, ctrl) = admin
        .read_admin(Sqe::new(0x06, 0).with_cdw(10, 1), 4096)
        .unwrap();
    assert_eq!(cqe.status(), 0);
    assert_eq!(u16::from_le_bytes([ctrl[78], ctrl[79]]), cntlid);
    assert_eq!(ctrl[77], 5, "MDTS 128 KiB");
    assert_eq!(
        &ctrl[768..768 + nqn_of("m0").len()],
        nqn_of("m0").as_bytes()
    );
    // Identify Namespace: the device's size.
    let (cqe, ns) = admin
        .read_admin(Sqe::new(0x06, 1).with_cdw(10, 0), 4096)
        .unwrap();
    assert_eq!(cqe.status(), 0);
    assert_eq!(u64::from_le_bytes(ns[0..8].try_into().unwrap()), BLOCKS);
    assert_eq!(ns[130], 12, "4 KiB blocks");

    // 4 KiB in the capsule, 128 KiB through R2T; read back.
    let small = pattern(1, BS);
    assert_eq!(write(&mut io, 10, &small).status(), 0);
    let big = pattern(2, 32 * BS);
    assert_eq!(write(&mut io, 100, &big).status(), 0);
    let (cqe, got) = read(&mut io, 10, 1);
    assert_eq!((cqe.status(), &got[..]), (0, &small[..]));
    let (cqe, got) = read(&mut io, 100, 32);
    assert_eq!(cqe.status(), 0);
    assert!(got == big, "128 KiB read back as written");

    // Write Zeroes, then the blocks read as zeroes.
    let wz = Sqe::new(0x08, 1).with_cdw(10, 100).with_cdw(12, 3);
    assert_eq!(io.exec(wz, &[], &[]).unwrap().0.status(), 0);
    let (_, got) = read(&mut io, 100, 4);
    assert!(got.iter().all(|&b| b == 0), "zeroed blocks read as zeroes");
    let (_, got) = read(&mut io, 104, 1);
    assert_eq!(got, big[4 * BS..5 * BS], "the block after is untouched");

    // Dataset Management, deallocate two ranges; flush.
    let mut ranges = vec![0u8; 32];
    ranges[4..8].copy_from_slice(&1u32.to_le_bytes());
    ranges[8..16].copy_from_slice(&10u64.to_le_bytes());
    ranges[20..24].copy_from_slice(&2u32.to_le_bytes());
    ranges[24..32].copy_from_slice(&110u64.to_le_bytes());
    let dsm = Sqe::new(0x09, 1).with_cdw(10, 1).with_cdw(11, 4);
    assert_eq!(io.exec(dsm, &ranges, &[]).unwrap().0.status(), 0);
    let (_, got) = read(&mut io, 10, 1);
    assert!(
        got.iter().all(|&b| b == 0),
        "deallocated blocks read as zeroes"
    );
    assert_eq!(io.exec(Sqe::new(0x00, 1), &[], &[]).unwrap().0.status(), 0);

    // Compare: equal data (in the capsule, and 128 KiB by R2T) succeeds,
    // different data is a Compare Failure.
    let cmp = |io: &mut Host, slba: u64, data: &[u8]| {
        let sqe = Sqe::rw(0x05, 1, slba, (data.len() / BS) as u32);
        if data.len() <= 8192 {
            io.exec(sqe, data, &[]).unwrap().0.status()
        } else {
            let sqe = sqe.with_bytes(32, &(data.len() as u32).to_le_bytes());
            io.exec(sqe, &[], data).unwrap().0.status()
        }
    };
    let (_, now) = read(&mut io, 104, 1);
    assert_eq!(cmp(&mut io, 104, &now), 0);
    assert_eq!(
        cmp(&mut io, 104, &pattern(99, BS)),
        0x285,
        "Compare Failure"
    );
    let (_, big_now) = read(&mut io, 104, 32);
    assert_eq!(cmp(&mut io, 104, &big_now), 0);
    let mut off_by_one = big_now.clone();
    off_by_one[100_000] ^= 1;
    assert_eq!(cmp(&mut io, 104, &off_by_one), 0x285);

    // Statuses: LBA out of range, invalid opcode, wrong namespace.
    let (cqe, _) = read(&mut io, BLOCKS - 1, 2);
    assert_eq!(cqe.status(), 0x080, "LBA Out of Range");
    assert_eq!(
        io.exec(Sqe::new(0x7E, 1), &[], &[]).unwrap().0.status(),
        0x001
    );
    let (cqe, _) = io
        .exec(
            Sqe::rw(0x02, 1, 0, 1)
                .with_bytes(4, &2u32.to_le_bytes())
                .with_bytes(32, &4096u32.to_le_bytes()),
            &[],
            &[],
        )
        .unwrap();
    assert_eq!(cqe.status(), 0x00B, "Invalid Namespace");
    assert_eq!(
        admin.exec(Sqe::new(0xC5, 0), &[], &[]).unwrap().0.status(),
        0x001
    );
    // Keep Alive answers; Abort says "not aborted".
    assert_eq!(
        admin.exec(Sqe::new(0x18, 0), &[], &[]).unwrap().0.status(),
        0
    );
    let (cqe, _) = admin.exec(Sqe::new(0x08, 0), &[], &[]).unwrap();
    assert_eq!((cqe.status(), cqe.dw0() & 1), (0, 1));
}

/// A Copy of `ranges` (slba, blocks) to `sdlba`.
fn copy(io: &mut Host, sdlba: u64, ranges: &[(u64, u16)]) -> Cqe {
    let mut list = vec![0u8; 32 * ranges.len()];
    for (r, &(slba, nlb)) in list.chunks_exact_mut(32).zip(ranges) {
        r[8..16].copy_from_slice(&slba.to_le_bytes());
        r[16..18].copy_from_slice(&(nlb - 1).to_le_bytes());
    }
    let sqe = Sqe::new(0x19, 1)
        .with_cdw(10, sdlba as u32)
        .with_cdw(11, (sdlba >> 32) as u32)
        .with_cdw(12, ranges.len() as u32 - 1);
    io.exec(sqe, &list, &[]).unwrap().0
}

#[test]
fn copy_moves_ranges_inside_the_device_within_its_limits() {
    let d = start();
    let (mut admin, mut io, _) = connect(d.nvmf_addr(), (false, false));
    let (_, ctrl) = admin
        .read_admin(Sqe::new(0x06, 0).with_cdw(10, 1), 4096)
        .unwrap();
    assert_ne!(
        u16::from_le_bytes([ctrl[520], ctrl[521]]) & (1 << 8),
        0,
        "ONCS: Copy"
    );
    let (_, ns) = admin
        .read_admin(Sqe::new(0x06, 1).with_cdw(10, 0), 4096)
        .unwrap();
    let mssrl = u16::from_le_bytes([ns[74], ns[75]]);
    let mcl = u32::from_le_bytes(ns[76..80].try_into().unwrap());
    let msrc = ns[80] as usize + 1;
    assert_eq!((mssrl, mcl, msrc), (256, 4096, 128));

    let a = pattern(11, 8 * BS);
    let b = pattern(12, 3 * BS);
    assert_eq!(write(&mut io, 200, &a).status(), 0);
    assert_eq!(write(&mut io, 300, &b).status(), 0);
    assert_eq!(copy(&mut io, 1000, &[(200, 8), (300, 3)]).status(), 0);
    let (cqe, got) = read(&mut io, 1000, 11);
    assert_eq!(cqe.status(), 0);
    assert!(
        got[..8 * BS] == a[..] && got[8 * BS..] == b[..],
        "the ranges landed in order"
    );
    let stats = d.ctl_json(&["stats", "io", "m0"]);
    let c = &stats["stats"][0]["copy"];
    assert_eq!(
        (c["ops"].as_u64(), c["bytes"].as_u64()),
        (Some(2), Some(11 * BS as u64)),
        "{stats}"
    );

    // Beyond the limits: Command Size Limit Exceeded; a range past the
    // end: LBA Out of Range; a range over its destination: Invalid Field.
    assert_eq!(
        copy(&mut io, 2000, &[(0, 256), (300, 1)]).status(),
        0,
        "MSSRL itself is fine"
    );
    assert_eq!(copy(&mut io, 5000, &[(0, 256); 17]).status(), 0x183, "MCL");
    let many: Vec<(u64, u16)> = (0..129).map(|i| (i, 1)).collect();
    assert_eq!(copy(&mut io, 9000, &many).status(), 0x183, "MSRC");
    assert_eq!(copy(&mut io, BLOCKS - 2, &[(0, 4)]).status(), 0x080);
    assert_eq!(copy(&mut io, 202, &[(200, 8)]).status(), 0x002);
    let (_, got) = read(&mut io, 1000, 8);
    assert!(got == a, "refused copies changed nothing");
}

#[test]
fn digests_protect_headers_and_data() {
    let d = start();
    let (_admin, mut io, _) = connect(d.nvmf_addr(), (true, true));
    let data = pattern(7, 16 * BS);
    assert_eq!(write(&mut io, 0, &data).status(), 0);
    let (cqe, got) = read(&mut io, 0, 16);
    assert_eq!(cqe.status(), 0);
    assert!(got == data);
    // A capsule whose data digest is wrong: Transient Transport Error.
    let mut sqe = Sqe::rw(0x01, 1, 0, 1);
    sqe.0[2] = 0x77;
    sqe.0[32..36].copy_from_slice(&4096u32.to_le_bytes());
    sqe.0[39] = 0x01;
    let mut pdu = io.capsule(&sqe, &pattern(9, BS));
    let n = pdu.len();
    pdu[n - 1] ^= 0xFF;
    io.send(&pdu).unwrap();
    let resp = io.recv().unwrap();
    assert_eq!(resp.kind, 0x05);
    let cqe = Cqe(resp.bytes[8..24].try_into().unwrap());
    assert_eq!(cqe.status(), 0x022);
    let (_, got) = read(&mut io, 0, 1);
    assert_eq!(got, data[..BS], "the corrupted write was not executed");
    // A header digest that does not match ends the connection: FES 3.
    let mut pdu = io.capsule(&Sqe::rw(0x02, 1, 0, 1), &[]);
    pdu[72] ^= 1;
    io.send(&pdu).unwrap();
    let term = io.recv().unwrap();
    assert_eq!((term.kind, term.u16_at(8)), (0x03, 3));
    assert!(io.closed());
}

/// Sends `bytes` in pieces cut at `cuts`, pausing between them so that
/// the target reads each piece on its own.
fn send_in_pieces(io: &mut Host, bytes: &[u8], cuts: &[usize]) {
    let mut from = 0;
    for &to in cuts.iter().chain([&bytes.len()]) {
        io.send(&bytes[from..to]).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        from = to;
    }
}

fn response(io: &mut Host) -> Cqe {
    let resp = io.recv().unwrap();
    assert_eq!(resp.kind, 0x05, "a response capsule");
    Cqe(resp.bytes[8..24].try_into().unwrap())
}

/// A Write by R2T whose H2CData arrives in pieces (header split, data
/// split, digest apart): returns its completion.
fn write_h2c_in_pieces(io: &mut Host, cid: u16, slba: u64, data: &[u8], corrupt: bool) -> Cqe {
    let sqe = Sqe::rw(0x01, 1, slba, (data.len() / BS) as u32)
        .with_bytes(2, &cid.to_le_bytes())
        .with_bytes(32, &(data.len() as u32).to_le_bytes())
        .with_bytes(39, &[0x5A]);
    io.send(&io.capsule(&sqe, &[])).unwrap();
    let r2t = io.recv().unwrap();
    assert_eq!((r2t.kind, r2t.u16_at(8)), (0x09, cid), "an R2T");
    let mut pdu = io.h2c_data(cid, r2t.u16_at(10), 0, data, true);
    let n = pdu.len();
    if corrupt {
        pdu[n - 1] ^= 0xFF;
    }
    let pdo = pdu[3] as usize;
    send_in_pieces(io, &pdu, &[10, pdo + 1000, pdo + data.len() / 2, n - 2]);
    response(io)
}

#[test]
fn data_that_arrives_in_pieces_lands_whole() {
    let d = start();
    for digests in [(false, false), (true, true)] {
        let (_admin, mut io, _) = connect(d.nvmf_addr(), digests);
        // By R2T: the data goes straight to the IO buffer once its header
        // is in.
        let data = pattern(21, 16 * BS);
        assert_eq!(
            write_h2c_in_pieces(&mut io, 0x31, 64, &data, false).status(),
            0
        );
        assert!(
            read(&mut io, 64, 16).1 == data,
            "{digests:?}: R2T data whole"
        );
        // In the capsule.
        let data = pattern(22, 2 * BS);
        let sqe = Sqe::rw(0x01, 1, 96, 2)
            .with_bytes(2, &0x32u16.to_le_bytes())
            .with_bytes(32, &(data.len() as u32).to_le_bytes())
            .with_bytes(39, &[0x01]);
        let capsule = io.capsule(&sqe, &data);
        send_in_pieces(&mut io, &capsule, &[40, 80, 200, capsule.len() - 1]);
        assert_eq!(response(&mut io).status(), 0);
        assert!(
            read(&mut io, 96, 2).1 == data,
            "{digests:?}: capsule data whole"
        );
        // A capsule refused before its data is all here (out of range):
        // the rest of its data is dropped, the queue carries on.
        let sqe = Sqe::rw(0x01, 1, BLOCKS - 1, 2)
            .with_bytes(2, &0x33u16.to_le_bytes())
            .with_bytes(32, &(data.len() as u32).to_le_bytes())
            .with_bytes(39, &[0x01]);
        let capsule = io.capsule(&sqe, &data);
        send_in_pieces(&mut io, &capsule, &[100, 3000]);
        assert_eq!(response(&mut io).status(), 0x080, "LBA Out of Range");
        assert!(
            read(&mut io, 96, 2).1 == data,
            "{digests:?}: the queue carries on"
        );
        if digests.1 {
            // A data digest that does not match, checked after the data
            // went straight to the buffer: nothing written.
            let cqe = write_h2c_in_pieces(&mut io, 0x34, 96, &pattern(23, 2 * BS), true);
            assert_eq!(cqe.status(), 0x022, "Transient Transport Error");
            assert!(
                read(&mut io, 96, 2).1 == data,
                "the corrupted write was not executed"
            );
        }
    }
}

#[test]
fn a_host_that_vanishes_mid_command_leaks_nothing() {
    let d = start();
    let addr = d.nvmf_addr();
    for cut in ["before the data", "mid-data", "after a terminate"] {
        let (_admin, mut io, _) = connect(addr, (false, false));
        let sqe = Sqe::rw(0x01, 1, 0, 4)
            .with_bytes(2, &0x41u16.to_le_bytes())
            .with_bytes(32, &(4 * BS as u32).to_le_bytes())
            .with_bytes(39, &[0x5A]);
        io.send(&io.capsule(&sqe, &[])).unwrap();
        let r2t = io.recv().unwrap();
        assert_eq!(r2t.kind, 0x09, "an R2T");
        let pdu = io.h2c_data(0x41, r2t.u16_at(10), 0, &pattern(1, 4 * BS), true);
        match cut {
            "before the data" => {}
            "mid-data" => io.send(&pdu[..pdu.len() / 2]).unwrap(),
            _ => {
                // A read in flight and a PDU type hosts never send, in one
                // write: the C2HTermReq is the last thing the target sends.
                let read = Sqe::rw(0x02, 1, 0, 1)
                    .with_bytes(2, &0x42u16.to_le_bytes())
                    .with_bytes(32, &(BS as u32).to_le_bytes())
                    .with_bytes(39, &[0x5A]);
                let mut b = io.capsule(&read, &[]);
                b.extend_from_slice(&[0xFF, 0, 8, 0, 8, 0, 0, 0]);
                io.send(&b).unwrap();
                let mut last = 0;
                while let Ok(p) = io.recv() {
                    assert_ne!(last, 0x03, "nothing after the C2HTermReq");
                    last = p.kind;
                }
                assert_eq!(last, 0x03, "a C2HTermReq, last");
            }
        }
        drop(io);
    }
    std::thread::sleep(Duration::from_millis(300));
    let log = d.stderr();
    assert!(
        !log.contains("objects outstanding"),
        "no pool dropped with buffers out: {log}"
    );
    // The target carries on.
    let (_admin, mut io, _) = connect(addr, (false, false));
    assert_eq!(read(&mut io, 0, 1).0.status(), 0);
}

#[test]
fn a_read_says_success_in_its_data_only_when_the_host_disabled_sq_flow_control() {
    let d = start();
    let addr = d.nvmf_addr();
    let (_admin, mut plain, _) = connect(addr, (false, false));
    let (mut admin, cqe) = Host::admin(addr, &nqn_of("m0"), 0).unwrap();
    assert_eq!(cqe.status(), 0, "a second controller");
    assert_eq!(admin.set_cc(CC_ENABLE).unwrap().status(), 0);
    let mut io = Host::tcp(addr).unwrap();
    io.ic(false, false).unwrap();
    io.cattr = 0x04;
    let cntlid = cqe.dw0() as u16;
    let cqe = io
        .connect(1, 127, cntlid, &nqn_of("m0"), HOST_NQN, 0)
        .unwrap();
    assert_eq!(cqe.status(), 0, "I/O queue Connect without SQ flow control");
    let data = pattern(5, BS);
    assert_eq!(
        write(&mut io, 9, &data).status(),
        0,
        "a write is still answered"
    );
    for (host, success) in [(&mut plain, false), (&mut io, true)] {
        let sqe = Sqe::rw(0x02, 1, 9, 1)
            .with_bytes(2, &0x51u16.to_le_bytes())
            .with_bytes(32, &(BS as u32).to_le_bytes())
            .with_bytes(39, &[0x5A]);
        host.send(&host.capsule(&sqe, &[])).unwrap();
        let c2h = host.recv().unwrap();
        assert_eq!(c2h.kind, 0x07, "C2HData");
        assert_eq!(c2h.flags & 0x04, 0x04, "LAST_PDU");
        assert_eq!(c2h.flags & 0x08 != 0, success, "SUCCESS");
        assert!(c2h.bytes[24..24 + BS] == data[..]);
        // The next PDU answers the next command: no response capsule for
        // the read when SUCCESS said it all.
        let flush = Sqe::new(0x00, 1).with_bytes(2, &0x52u16.to_le_bytes());
        host.send(&host.capsule(&flush, &[])).unwrap();
        let mut next = response(host);
        if !success {
            assert_eq!(next.cid(), 0x51, "the read's own response");
            next = response(host);
        }
        assert_eq!(
            (next.cid(), next.status()),
            (0x52, 0),
            "the flush's response"
        );
    }
}

#[test]
fn the_discovery_log_lists_the_share() {
    let d = start();
    let addr = d.nvmf_addr();
    let (mut disc, cqe) = Host::admin(addr, DISCOVERY_NQN, 0).unwrap();
    assert_eq!(cqe.status(), 0);
    let (cqe, ctrl) = disc
        .read_admin(Sqe::new(0x06, 0).with_cdw(10, 1), 4096)
        .unwrap();
    assert_eq!(cqe.status(), 0);
    assert_eq!(ctrl[111], 2, "a discovery controller");
    let (cqe, log) = disc.discovery_log(3072).unwrap();
    assert_eq!(cqe.status(), 0);
    assert_eq!(u64::from_le_bytes(log[8..16].try_into().unwrap()), 2);
    let entry = &log[2048..3072];
    assert_eq!(entry[0], 3, "TCP");
    assert_eq!(entry[2], 2, "an NVM subsystem");
    assert_eq!(
        &entry[256..256 + nqn_of("m0").len()],
        nqn_of("m0").as_bytes()
    );
    assert_eq!(
        std::str::from_utf8(&entry[32..64]).unwrap().trim(),
        addr.port().to_string()
    );
    assert_eq!(
        std::str::from_utf8(&entry[512..768]).unwrap().trim(),
        "127.0.0.1"
    );
}

#[test]
fn connects_that_cannot_be_served_get_their_status() {
    let d = start();
    let addr = d.nvmf_addr();
    // An NQN nobody shares: Connect Invalid Parameters, on the data's
    // SUBNQN field.
    let (_, cqe) = Host::admin(addr, &nqn_of("nope"), 0).unwrap();
    assert_eq!(cqe.status(), 0x182);
    assert_eq!(cqe.dw0() >> 16, 256);
    // An I/O queue of a controller that is not enabled: Command Sequence
    // Error; of an unknown controller: invalid parameters (CNTLID).
    let (_admin, cqe) = Host::admin(addr, &nqn_of("m0"), 0).unwrap();
    let cntlid = cqe.dw0() as u16;
    let mut io = Host::tcp(addr).unwrap();
    io.ic(false, false).unwrap();
    let cqe = io
        .connect(1, 31, cntlid, &nqn_of("m0"), HOST_NQN, 0)
        .unwrap();
    assert_eq!(cqe.status(), 0x00C);
    let cqe = io
        .connect(1, 31, cntlid.wrapping_add(100), &nqn_of("m0"), HOST_NQN, 0)
        .unwrap();
    assert_eq!((cqe.status(), cqe.dw0() >> 16), (0x182, 16));
    // A queue larger than MQES: invalid parameters (SQSIZE).
    let mut big = Host::tcp(addr).unwrap();
    big.ic(false, false).unwrap();
    let cqe = big
        .connect(0, 1000, 0xFFFF, &nqn_of("m0"), HOST_NQN, 0)
        .unwrap();
    assert_eq!((cqe.status(), cqe.dw0() >> 16), (0x182, 44));
}

/// Sends `pdu` on a fresh connection (after ICReq when `after_ic`) and
/// returns the C2HTermReq's FES and FEI; the connection must then close.
fn terminated_by(addr: SocketAddr, after_ic: bool, pdu: &[u8]) -> (u16, u32) {
    let mut h = Host::tcp(addr).unwrap();
    if after_ic {
        h.ic(false, false).unwrap();
    }
    h.send(pdu).unwrap();
    let term = h.recv().unwrap();
    assert_eq!(term.kind, 0x03, "a C2HTermReq, for {pdu:?}");
    assert!(h.closed(), "the connection closes after its C2HTermReq");
    (term.u16_at(8), term.u32_at(10))
}

#[test]
fn malformed_pdus_end_their_connection_and_no_other() {
    let d = start();
    let addr = d.nvmf_addr();
    let (_admin, mut io, _) = connect(addr, (false, false));
    let data = pattern(3, BS);
    assert_eq!(write(&mut io, 5, &data).status(), 0);

    // A capsule with a wrong HLEN: invalid header field at byte 2.
    let mut bad = vec![4u8, 0, 70, 0, 70, 0, 0, 0];
    bad.resize(70, 0);
    assert_eq!(terminated_by(addr, true, &bad), (1, 2));
    // A PDU type hosts never send.
    let mut c2h = vec![7u8, 0, 24, 24, 28, 0, 0, 0];
    c2h.resize(28, 0);
    assert_eq!(terminated_by(addr, true, &c2h).0, 1);
    // A capsule before ICReq: PDU sequence error.
    let h = Host::tcp(addr).unwrap();
    let cap = h.capsule(&Sqe::new(0x18, 0), &[]);
    assert_eq!(terminated_by(addr, false, &cap).0, 2);
    // PDO inside the header.
    let mut pdo = Host::tcp(addr)
        .unwrap()
        .capsule(&Sqe::rw(0x01, 1, 0, 1), &[0u8; 16]);
    pdo[3] = 8;
    assert_eq!(terminated_by(addr, true, &pdo), (1, 3));
    // A PLEN beyond what a capsule may carry: data transfer limit
    // exceeded, the FEI naming the PLEN.
    let huge = [4u8, 0, 72, 72, 0, 0, 0, 0x10];
    assert_eq!(terminated_by(addr, true, &huge), (5, 0x1000_0000));
    // An ICReq with PFV 1: unsupported.
    let mut ic = vec![0u8; 128];
    ic[..8].copy_from_slice(&[0, 0, 128, 0, 128, 0, 0, 0]);
    ic[8] = 1;
    assert_eq!(terminated_by(addr, false, &ic).0, 1);

    // H2CData with a transfer tag the target never gave, and data beyond
    // the R2T's window.
    {
        let (_a, mut w, _) = connect(addr, (false, false));
        let stray = w.h2c_data(1, 99, 0, &[0u8; 512], true);
        w.send(&stray).unwrap();
        let term = w.recv().unwrap();
        assert_eq!((term.kind, term.u16_at(8)), (0x03, 1));
        assert!(w.closed());
    }
    {
        let (_a, mut w, _) = connect(addr, (false, false));
        let mut sqe = Sqe::rw(0x01, 1, 0, 2);
        sqe.0[2] = 9;
        sqe.0[32..36].copy_from_slice(&8192u32.to_le_bytes());
        sqe.0[39] = 0x5A;
        let pdu = w.capsule(&sqe, &[]);
        w.send(&pdu).unwrap();
        let r2t = w.recv().unwrap();
        assert_eq!((r2t.kind, r2t.u32_at(16)), (0x09, 8192));
        let ttag = r2t.u16_at(10);
        let over = w.h2c_data(9, ttag, 0, &[0u8; 12288], true);
        w.send(&over).unwrap();
        let term = w.recv().unwrap();
        assert_eq!((term.kind, term.u16_at(8)), (0x03, 5));
        assert!(w.closed());
    }

    // The first connection never noticed.
    let (cqe, got) = read(&mut io, 5, 1);
    assert_eq!((cqe.status(), got), (0, data));
}

#[test]
fn a_controller_whose_keep_alive_expires_is_torn_down() {
    let d = start();
    let addr = d.nvmf_addr();
    let (mut admin, cqe) = Host::admin(addr, &nqn_of("m0"), 1000).unwrap();
    let cntlid = cqe.dw0() as u16;
    assert_eq!(admin.set_cc(CC_ENABLE).unwrap().status(), 0);
    let mut io = Host::tcp(addr).unwrap();
    io.ic(false, false).unwrap();
    assert_eq!(
        io.connect(1, 31, cntlid, &nqn_of("m0"), HOST_NQN, 0)
            .unwrap()
            .status(),
        0
    );
    // Keep alive for 1.5 s: still there.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1500) {
        assert_eq!(
            admin.exec(Sqe::new(0x18, 0), &[], &[]).unwrap().0.status(),
            0
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(read(&mut io, 0, 1).0.status(), 0);
    // Then silence: both queues close within the timeout (plus a round).
    let t1 = Instant::now();
    assert!(admin.closed(), "the admin queue closes");
    assert!(io.closed(), "its I/O queue closes");
    assert!(
        t1.elapsed() < Duration::from_secs(4),
        "closed after {:?}",
        t1.elapsed()
    );
}

#[test]
fn crc32c_of_the_test_host_matches_the_check_value() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
}

#[test]
fn allowed_hosts_are_kept_and_the_export_list_shows_controllers() {
    let d = Daemon::start_quiet(["--bdev", "malloc:///m0?size_mb=64&blk_size=4096"]);
    let addr = d.nvmf_addr();
    let allowed = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000aa";
    let uri = d.ctl_ok(&[
        "bdev",
        "share",
        "m0",
        "--protocol",
        "nvmf",
        "--allowed-host",
        allowed,
    ]);
    assert_eq!(uri.trim(), format!("nvmf://{addr}/{}", nqn_of("m0")));
    // Allowed hosts are NQNs, for NVMe-oF only.
    let out = d.ctl(["bdev", "share", "m0", "--allowed-host", allowed]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("NVMe-oF shares only"), "{err}");
    d.ctl_ok(&["bdev", "create", "malloc:///m1?size_mb=4&blk_size=4096"]);
    let out = d.ctl([
        "bdev",
        "share",
        "m1",
        "--protocol",
        "nvmf",
        "--allowed-host",
        "host-1",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not an NQN"), "{err}");

    // Another host: Connect Invalid Host, on the data's HOSTNQN.
    let mut h = Host::tcp(addr).unwrap();
    h.ic(false, false).unwrap();
    let cqe = h
        .connect(0, 31, 0xFFFF, &nqn_of("m0"), HOST_NQN, 0)
        .unwrap();
    assert_eq!((cqe.status(), cqe.dw0() >> 16), (0x184, 512));
    // The allowed one connects; the list shows its controller and queue.
    let mut admin = Host::tcp(addr).unwrap();
    admin.ic(false, false).unwrap();
    let cqe = admin
        .connect(0, 31, 0xFFFF, &nqn_of("m0"), allowed, 0)
        .unwrap();
    assert_eq!(cqe.status(), 0);
    let cntlid = cqe.dw0() as u16;
    assert_eq!(admin.set_cc(CC_ENABLE).unwrap().status(), 0);
    let mut io = Host::tcp(addr).unwrap();
    io.ic(false, false).unwrap();
    assert_eq!(
        io.connect(1, 31, cntlid, &nqn_of("m0"), allowed, 0)
            .unwrap()
            .status(),
        0
    );
    let list = d.ctl_json(&["export", "list"]);
    let e = &list["exports"][0];
    assert_eq!(e["protocol"], "nvmf", "{list}");
    assert_eq!(e["allowed_hosts"][0], allowed, "{list}");
    assert_eq!(e["connections"], 1, "{list}");
    assert_eq!(e["controllers"][0]["cntlid"], cntlid as u64, "{list}");
    assert_eq!(e["controllers"][0]["host_nqn"], allowed, "{list}");
    assert_eq!(e["controllers"][0]["io_queues"], 1, "{list}");
    let text = d.ctl_ok(&["export", "list"]);
    assert!(
        text.contains(&format!(
            "m0: controller {cntlid} host {allowed} (1 I/O queues)"
        )),
        "{text}"
    );
    // The metrics count the queues, the controller, the commands and the
    // refusal.
    let scrape = io_engine_tests::http::get(&d.metrics_url()).unwrap().body;
    let scrape = String::from_utf8(scrape).unwrap();
    for line in [
        "io_engine_nvmf_queue_pairs{export=\"m0\"} 1",
        "io_engine_nvmf_controllers{export=\"m0\"} 1",
        "io_engine_nvmf_errors_total{status=\"connect_invalid_host\"} 1",
    ] {
        assert!(scrape.lines().any(|l| l == line), "{line} in\n{scrape}");
    }
    assert!(
        scrape
            .lines()
            .any(|l| l
                .starts_with("io_engine_nvmf_commands_total{queue=\"admin\",opcode=\"fabrics\"}")),
        "{scrape}"
    );
}

#[test]
fn a_connection_that_never_connects_is_closed_after_the_deadline() {
    let d = start();
    let addr = d.nvmf_addr();
    let t0 = Instant::now();
    let mut silent = Host::tcp(addr).unwrap();
    let mut half = Host::tcp(addr).unwrap();
    half.ic(false, false).unwrap();
    silent
        .sock
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    half.sock
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    assert!(silent.closed(), "a silent socket is closed");
    assert!(half.closed(), "a socket that stopped after ICReq is closed");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(14),
        "{took:?}"
    );
    // Hosts that connect are not affected.
    let (_admin, mut io, _) = connect(addr, (false, false));
    assert_eq!(read(&mut io, 0, 1).0.status(), 0);
}

#[test]
fn each_listener_bounds_its_connections_and_those_not_connected_yet() {
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///m0?size_mb=64&blk_size=4096",
        "--share",
        "m0:nvmf",
        "--nvmf-addr",
        "127.0.0.1:0",
        "--nvmf-addr",
        "127.0.0.1:0",
        "--nvmf-max-connections",
        "3",
        "--nvmf-max-connecting",
        "1",
    ]);
    let addrs = d.nvmf_addrs();
    assert_eq!(addrs.len(), 2);
    let refused = |addr: SocketAddr| {
        let mut h = Host::tcp(addr).unwrap();
        h.sock
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        h.closed()
    };
    // One silent socket fills the first listener's not-connected slot:
    // the next connection there takes it, and the silent one is closed
    // (the oldest silent first), so that silent sockets lock nobody out.
    let mut silent = Host::tcp(addrs[0]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let newcomer = Host::tcp(addrs[0]).unwrap();
    silent
        .sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert!(silent.closed(), "over --nvmf-max-connecting");
    // The other listener has its own slots: a host connects there.
    let (_admin, mut io, _) = connect(addrs[1], (false, false));
    assert_eq!(read(&mut io, 0, 1).0.status(), 0);
    // Its third connection fills it: a fourth is refused, though it is
    // not connected yet.
    let third = Host::tcp(addrs[1]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(refused(addrs[1]), "over --nvmf-max-connections");
    drop(third);
    // The newcomer goes: its slot is free again.
    drop(newcomer);
    std::thread::sleep(Duration::from_millis(200));
    let (_admin0, mut io0, _) = connect(addrs[0], (false, false));
    assert_eq!(read(&mut io0, 0, 1).0.status(), 0);
    let log = d.stderr();
    assert!(
        log.contains("have not finished ICReq and Connect")
            && log.contains("its 3 connections open"),
        "the refusals name their limit"
    );
    let scrape = io_engine_tests::http::get(&d.metrics_url()).unwrap().text();
    for line in [
        "io_engine_nvmf_refused_total{reason=\"connections\"} 1",
        "io_engine_nvmf_refused_total{reason=\"connecting\"} 1",
    ] {
        assert!(scrape.lines().any(|l| l == line), "{line} in\n{scrape}");
    }
}

#[test]
fn an_unshare_announces_the_namespace_gone_and_closes_the_queues() {
    let d = start();
    let (mut admin, mut io, _) = connect(d.nvmf_addr(), (false, false));
    // Hold an Asynchronous Event Request: no answer yet.
    let mut aer = Sqe::new(0x0C, 0);
    aer.0[2..4].copy_from_slice(&0x4321u16.to_le_bytes());
    let capsule = admin.capsule(&aer, &[]);
    admin.send(&capsule).unwrap();
    assert_eq!(read(&mut io, 0, 1).0.status(), 0);
    d.ctl_ok(&["bdev", "unshare", "m0"]);
    // The AER completes: a notice (type 2), namespace attribute changed,
    // log page 04h.
    let resp = admin.recv().unwrap();
    assert_eq!(resp.kind, 0x05);
    let cqe = Cqe(resp.bytes[8..24].try_into().unwrap());
    assert_eq!(
        (cqe.cid(), cqe.status(), cqe.dw0()),
        (0x4321, 0, 0x0004_0002)
    );
    assert!(admin.closed(), "the admin queue closes");
    assert!(io.closed(), "the I/O queue closes");
    // The device is free again: it can be destroyed.
    d.ctl_ok(&["bdev", "destroy", "m0"]);
}

#[test]
fn the_limits_hosts_see_follow_the_flags() {
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///m0?size_mb=64&blk_size=4096",
        "--share",
        "m0:nvmf",
        "--nvmf-in-capsule",
        "16384",
        "--nvmf-max-transfer",
        "262144",
        "--nvmf-queue-depth",
        "64",
    ]);
    let addr = d.nvmf_addr();
    let (mut admin, mut io, _) = connect_sq(addr, 63);
    let (_, ctrl) = admin
        .read_admin(Sqe::new(0x06, 0).with_cdw(10, 1), 4096)
        .unwrap();
    assert_eq!(ctrl[77], 6, "MDTS 256 KiB");
    assert_eq!(
        u32::from_le_bytes(ctrl[1792..1796].try_into().unwrap()),
        (16384 + 64) / 16
    );
    assert_eq!(
        admin.get_property(0, true).unwrap() & 0xFFFF,
        63,
        "CAP.MQES"
    );
    // 16 KiB in the capsule, 256 KiB by R2T.
    let data = pattern(21, 4 * BS);
    assert_eq!(write(&mut io, 0, &data).status(), 0);
    let big = pattern(22, 64 * BS);
    let sqe = Sqe::rw(0x01, 1, 64, 64).with_bytes(32, &(big.len() as u32).to_le_bytes());
    assert_eq!(io.exec(sqe, &[], &big).unwrap().0.status(), 0);
    assert_eq!(read(&mut io, 0, 4).1, data);
    assert!(read(&mut io, 64, 64).1 == big);
    // A queue larger than the depth: invalid parameters (SQSIZE).
    let (_, cqe) = {
        let mut h = Host::tcp(addr).unwrap();
        h.ic(false, false).unwrap();
        let c = h
            .connect(0, 64, 0xFFFF, &nqn_of("m0"), HOST_NQN, 0)
            .unwrap();
        (h, c)
    };
    assert_eq!((cqe.status(), cqe.dw0() >> 16), (0x182, 44));

    // A share with an unknown protocol stops the daemon at start.
    let (out, _) = io_engine_tests::daemon::run_daemon_to_exit(
        ["--bdev", "null:///n0?size_mb=4", "--share", "n0:iscsi"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown protocol \"iscsi\""), "{err}");
    // A value out of range stops the daemon at start with one line.
    let (out, _) =
        io_engine_tests::daemon::run_daemon_to_exit(["--nvmf-max-transfer", "100000"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("largest transfer 100000"), "{err}");
}

/// [`connect`] with an I/O queue of `sqsize` (0-based).
fn connect_sq(addr: SocketAddr, sqsize: u16) -> (Host, Host, u16) {
    Host::pair(addr, &nqn_of("m0"), sqsize)
}
