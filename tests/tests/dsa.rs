//! End-to-end tests of the DSA module on its device model (this machine
//! has no DSA): accel-perf `-M dsa --dsa-model N` verifying every
//! workload, the seed's batched copy at most one portal write per 128
//! operations, the daemon with `--dsa-model` moving malloc data on DSA
//! (PerfService IO, an NVMe/TCP Copy command, and NVMe/TCP data digests
//! of large PDUs), bdev-perf verifying a
//! malloc device through the model, and `--dsa` on this host falling back
//! to software and saying why.

use std::io::Write;
use std::time::Duration;

use io_engine_tests::accel_perf::{
    accel_perf_json, accel_perf_table, accel_perf_usage_error, bdev_perf_through_model,
    fell_back_to_software, model_copies, perf_on_m0,
};
use io_engine_tests::daemon::Daemon;
use io_engine_tests::nvmf::{CC_ENABLE, Cqe, HOST_NQN, Host, Sqe, nqn_of};
use io_engine_tests::{accel_op, available_cpus, bin, cpu_mask, run_with_timeout, text, u};
use serde_json::Value;

#[test]
fn accel_perf_verifies_every_workload_on_the_dsa_model() {
    for w in [
        "copy",
        "fill",
        "compare",
        "dualcast",
        "crc32c",
        "copy_crc32c",
    ] {
        let (v, out) =
            accel_perf_json(&["-w", w, "-M", "dsa", "--dsa-model", "1", "-y", "-t", "0.3"]);
        assert!(out.status.success(), "{w}: {}", text(&out.stderr));
        assert_eq!(v["module"]["name"], "dsa", "{v}");
        assert_eq!(v["total"]["failed"], 0, "{w}: {v}");
        assert!(u(&v["total"]["transfers"]) > 0, "{w}: {v}");
        assert!(u(&v["module"]["portal_writes"]) > 0, "{w}: {v}");
        assert!(
            u(&v["module"]["descriptors"]) >= u(&v["total"]["transfers"]),
            "{w}: {v}"
        );
    }
    let s = accel_perf_table(&["-w", "copy", "--dsa-model", "1", "-y", "-t", "0.3"]);
    assert!(s.contains("Module:         dsa"), "{s}");
    assert!(
        s.contains("Module dsa: ") && s.contains("portal writes ("),
        "{s}"
    );
    // -M dsa without a DSA flag: a usage error that says what to add.
    let e = accel_perf_usage_error(&["-w", "copy", "-M", "dsa"]);
    assert!(
        e.contains("add --dsa (work queues of the idxd driver) or --dsa-model N"),
        "{e}"
    );
}

/// The seed's case: copy 512 B, QD 1024, batches of 256, on the model:
/// at most one portal write per 128 operations (one per batch of 256, and
/// a few for tails).
#[test]
fn batched_copies_cost_at_most_one_portal_write_per_128_operations() {
    let v = model_copies("dsa", "1024", &["-b", "256", "-t", "1", "-y"]);
    assert_eq!(v["total"]["failed"], 0, "{v}");
    let ops = u(&v["total"]["transfers"]);
    let writes = u(&v["module"]["portal_writes"]);
    assert!(ops > 10_000, "{v}");
    assert!(
        writes * 128 <= ops,
        "{writes} portal writes for {ops} copies: more than 1/128 per operation"
    );
    assert_eq!(u(&v["module"]["retries"]), 0, "a dedicated WQ: {v}");
    // Without batching every copy is its own portal write.
    let v0 = model_copies("dsa", "64", &["-t", "0.3"]);
    assert!(
        u(&v0["module"]["portal_writes"]) * 2 > u(&v0["total"]["transfers"]),
        "{v0}"
    );
}

/// A checked PerfService run on `m0`: how many IOs it did.
async fn perf(d: &Daemon, workload: &str, verify: bool) -> u64 {
    let resp = perf_on_m0(d, workload, verify).await;
    resp.total.as_ref().map_or(0, |t| t.ios)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_moves_malloc_data_on_the_dsa_model() {
    let d = Daemon::start_quiet([
        "--dsa-model",
        "2",
        "--bdev",
        "malloc:///m0?size_mb=16&blk_size=4096",
    ]);
    let log = d.stderr();
    assert!(log.contains("dsa: 2 work queues ready"), "{log}");
    let modules = d.ctl_json(&["accel", "modules"]);
    assert_eq!(modules["modules"][0]["name"], "dsa", "{modules}");
    assert_eq!(
        modules["modules"][0]["opcodes"],
        serde_json::json!([
            "copy",
            "fill",
            "compare",
            "dualcast",
            "crc32c",
            "copy_crc32c"
        ])
    );
    let ios = perf(&d, "randwrite", true).await + perf(&d, "randread", false).await;
    let st = d.ctl_json(&["accel", "stats"]);
    let copy = accel_op(&st, "copy", "dsa");
    assert_eq!(u(&copy["executed"]), ios, "one DSA copy per IO: {st}");
    assert_eq!(u(&copy["failed"]), 0, "{st}");
    assert_eq!(u(&accel_op(&st, "copy", "software")["executed"]), 0, "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dsa_on_a_host_without_it_runs_on_software_and_says_why() {
    let d = Daemon::start_quiet(["--dsa", "--bdev", "malloc:///m0?size_mb=8&blk_size=4096"]);
    if !fell_back_to_software(&d, "work queue", "every opcode runs on the software module") {
        // A host with a usable DSA work queue: nothing to check here.
        return;
    }
    perf(&d, "randwrite", true).await;
}

/// An NVMe/TCP Copy command on a malloc device is an accel copy inside the
/// device: with DSA registered it runs on DSA.
#[test]
fn an_nvme_tcp_copy_runs_on_dsa() {
    const BS: usize = 4096;
    let d = Daemon::start_quiet([
        "--dsa-model",
        "1",
        "--bdev",
        "malloc:///m0?size_mb=16&blk_size=4096",
        "--share",
        "m0:nvmf",
    ]);
    let (_admin, mut io) = io_queue(&d, false);

    let data: Vec<u8> = (0..2 * BS).map(|i| (i as u8).wrapping_mul(13)).collect();
    let w = io.exec(Sqe::rw(0x01, 1, 10, 2), &data, &[]).unwrap().0;
    assert_eq!(w.status(), 0);
    let before = u(&accel_op(&d.ctl_json(&["accel", "stats"]), "copy", "dsa")["executed"]);
    // Copy (opcode 0x19) of blocks 10-11 to block 500: one range.
    let mut range = vec![0u8; 32];
    range[8..16].copy_from_slice(&10u64.to_le_bytes());
    range[16..18].copy_from_slice(&1u16.to_le_bytes());
    let sqe = Sqe::new(0x19, 1).with_cdw(10, 500).with_cdw(12, 0);
    assert_eq!(io.exec(sqe, &range, &[]).unwrap().0.status(), 0, "Copy");
    let st = d.ctl_json(&["accel", "stats"]);
    assert_eq!(
        u(&accel_op(&st, "copy", "dsa")["executed"]),
        before + 1,
        "the Copy was one DSA copy: {st}"
    );
    let sqe = Sqe::rw(0x02, 1, 500, 2).with_bytes(32, &(2 * BS as u32).to_le_bytes());
    let (cqe, got) = io.exec(sqe, &[], &[]).unwrap();
    assert_eq!(cqe.status(), 0);
    assert!(got == data, "the copied blocks read back");
}

#[test]
fn bdev_perf_verifies_a_malloc_device_through_the_dsa_model() {
    let v = bdev_perf_through_model("--dsa-model", "dsa");
    assert!(u(&v["accel"]["modules"]["dsa"]["portal_writes"]) > 0, "{v}");
}

/// An enabled admin queue and I/O queue 1 to `m0` of `d` (with header
/// and data digests when `digests`), each Connect checked.
fn io_queue(d: &Daemon, digests: bool) -> (Host, Host) {
    let addr = d.nvmf_addr();
    let (mut admin, cqe) = Host::admin(addr, &nqn_of("m0"), 0).unwrap();
    assert_eq!(cqe.status(), 0, "admin Connect");
    let cntlid = cqe.dw0() as u16;
    assert_eq!(admin.set_cc(CC_ENABLE).unwrap().status(), 0);
    let mut io = Host::tcp(addr).unwrap();
    io.ic(digests, digests).unwrap();
    assert_eq!(io.digests, (digests, digests), "the digests asked for");
    let cqe = io
        .connect(1, 127, cntlid, &nqn_of("m0"), HOST_NQN, 0)
        .unwrap();
    assert_eq!(cqe.status(), 0, "I/O queue Connect");
    (admin, io)
}

/// NVMe/TCP data digests of large PDUs are computed on DSA: with data
/// digests on, a 128 KiB Write (one H2CData after the R2T) and its Read
/// (one C2HData) each cost one DSA crc32c, and the data and digests are
/// right; 4 KiB PDUs are computed inline; a wrong digest on a large PDU
/// fails its command (Transient Transport Error) and writes nothing. With
/// `--nvmf-digest-offload off` none goes to DSA.
#[test]
fn nvme_tcp_data_digests_of_large_pdus_run_on_dsa() {
    const BIG: usize = 128 << 10;
    for offload in [true, false] {
        let mut args = vec![
            "--dsa-model",
            "1",
            "--bdev",
            "malloc:///m0?size_mb=16&blk_size=4096",
            "--share",
            "m0:nvmf",
        ];
        if !offload {
            args.extend(["--nvmf-digest-offload", "off"]);
        }
        let d = Daemon::start_quiet(args);
        let crc_on_dsa = || {
            let st = d.ctl_json(&["accel", "stats"]);
            let op = accel_op(&st, "crc32c", "dsa");
            assert_eq!(u(&op["failed"]), 0, "{st}");
            u(&op["executed"])
        };
        let (_admin, mut io) = io_queue(&d, true);
        let before = crc_on_dsa();

        let small: Vec<u8> = (0..4096).map(|i| (i as u8).wrapping_mul(7)).collect();
        let w = io.exec(Sqe::rw(0x01, 1, 0, 1), &small, &[]).unwrap().0;
        assert_eq!(w.status(), 0);
        let sqe = Sqe::rw(0x02, 1, 0, 1).with_bytes(32, &4096u32.to_le_bytes());
        assert_eq!(io.exec(sqe, &[], &[]).unwrap().1, small);
        assert_eq!(crc_on_dsa(), before, "4 KiB PDUs: inline");

        let big: Vec<u8> = (0..BIG)
            .map(|i| (i as u8).wrapping_mul(13) ^ 0x5A)
            .collect();
        let blocks = (BIG / 4096) as u32;
        let len = (BIG as u32).to_le_bytes();
        let sqe = Sqe::rw(0x01, 1, 100, blocks).with_bytes(32, &len);
        assert_eq!(io.exec(sqe, &[], &big).unwrap().0.status(), 0, "Write");
        let sqe = Sqe::rw(0x02, 1, 100, blocks).with_bytes(32, &len);
        let (cqe, got) = io.exec(sqe, &[], &[]).unwrap();
        assert_eq!(cqe.status(), 0, "Read");
        assert!(got == big, "the data read back (its digest checked)");
        let on_dsa = if offload { 2 } else { 0 };
        assert_eq!(crc_on_dsa(), before + on_dsa, "offload {offload}");

        // A wrong digest on a 128 KiB H2CData.
        let mut sqe = Sqe::rw(0x01, 1, 100, blocks).with_bytes(32, &len);
        sqe.0[2..4].copy_from_slice(&0x7777u16.to_le_bytes());
        sqe.0[39] = 0x5A;
        let capsule = io.capsule(&sqe, &[]);
        io.sock.write_all(&capsule).unwrap();
        let r2t = io.recv().unwrap();
        assert_eq!(r2t.kind, 0x09, "R2T");
        let zeroes = vec![0u8; BIG];
        let mut h2c = io.h2c_data(0x7777, r2t.u16_at(10), 0, &zeroes, true);
        let n = h2c.len();
        h2c[n - 1] ^= 0x01;
        io.sock.write_all(&h2c).unwrap();
        let resp = io.recv().unwrap();
        assert_eq!(resp.kind, 0x05, "a response capsule");
        let cqe = Cqe(resp.bytes[8..24].try_into().unwrap());
        assert_eq!(
            (cqe.cid(), cqe.status()),
            (0x7777, 0x022),
            "Transient Transport Error"
        );
        let sqe = Sqe::rw(0x02, 1, 100, blocks).with_bytes(32, &len);
        let got = io.exec(sqe, &[], &[]).unwrap().1;
        assert!(got == big, "nothing written");
        assert_eq!(crc_on_dsa(), before + 2 * on_dsa, "offload {offload}");
    }
}

/// Under load, with many digests out at once and ending in any order:
/// nvmf-perf's 128 KiB random reads and writes with header and data
/// digests and verify, against a daemon whose data digests go to the DSA
/// model, fail nothing and miscompare nothing, and the digests ran on DSA.
#[test]
fn nvmf_perf_verifies_large_ios_with_digests_on_dsa() {
    let d = Daemon::start_quiet([
        "--dsa-model",
        "1",
        "--bdev",
        "malloc:///m0?size_mb=64&blk_size=4096",
        "--share",
        "m0:nvmf",
    ]);
    let addr = d.nvmf_addr();
    let r = format!(
        "trtype:TCP adrfam:IPv4 traddr:{} trsvcid:{} subnqn:{}",
        addr.ip(),
        addr.port(),
        nqn_of("m0")
    );
    let cpus = available_cpus();
    let mask = cpu_mask(&[*cpus.get(1).unwrap_or(&cpus[0])]);
    let out = run_with_timeout(
        bin("nvmf-perf"),
        [
            "-q", "8", "-o", "128k", "-w", "randrw", "-t", "1", "-y", "-H", "-I", "-c", &mask,
            "-r", &r, "--json",
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &report["total"];
    assert_eq!(u(&t["failed"]), 0, "{t}");
    assert_eq!(u(&t["miscompares"]), 0, "{t}");
    assert!(u(&t["verified"]) > 0, "{t}");
    let st = d.ctl_json(&["accel", "stats"]);
    let crc = accel_op(&st, "crc32c", "dsa");
    assert!(
        u(&crc["executed"]) >= u(&t["verified"]),
        "a digest per read at least: {st}"
    );
    assert_eq!(u(&crc["failed"]), 0, "{st}");
}
