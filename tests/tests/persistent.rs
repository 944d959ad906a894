//! End-to-end tests of the persistent devices, `uring://` and `aio://`, with
//! the release `io-engine` and real clients and kernel tools: fio verifies
//! data over NBD on regular files and on loop devices, `nvmf-perf`
//! verifies it over NVMe/TCP, and the data fio wrote is on the backing
//! where the client put it; what a flush acknowledged survives a `kill -9`
//! of the daemon; a file system shut down under a device (FS_IOC_SHUTDOWN)
//! and a loop device that shrinks fail that device's IOs only (EIO to the
//! NBD client, an error status to the NVMe host, counted in
//! `io_engine_bdev_errors_total`) while the daemon lives on and serves its
//! other devices; the uuid and the NVMe NGUID of a device without `uuid=`
//! are the same after a restart and differ between paths; `config dump`
//! restores the device; and wrong URIs (a missing file, O_DIRECT on tmpfs,
//! `num_blocks=`, a `size_mb=` that disagrees with the file, writes to a
//! read-only device) are refused with messages that say why, leaving the
//! file as it was.
//!
//! Backing files live in scratch directories under the system's temporary
//! directory (the work disk), loop devices and mounts are undone when the
//! test ends, passed or failed (`io_engine_tests::backing`), and every
//! daemon is killed by its [`Daemon`] guard. Every tool run and every wait
//! is bounded.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use io_engine_api::v1 as pb;
use io_engine_tests::backing::{
    Ext4Mount, LoopDevice, Ramfs, Scratch, random_bytes, read_at, sized_file,
};
use io_engine_tests::daemon::Daemon;
use io_engine_tests::nvmf::{Host, Sqe, nqn_of};
use io_engine_tests::tools::said;
use io_engine_tests::{
    assert_fio_verified, available_cpus, bin, cpu_mask, fio_nbd_verify_args, http,
    output_with_timeout, run_with_timeout,
};
use pb::bdev_service_client::BdevServiceClient;
use rustix::process::Signal;
use serde_json::Value;

/// Longest one run of fio, qemu-io or nvmf-perf may take.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// The two kinds of persistent device.
const KINDS: [&str; 2] = ["uring", "aio"];

/// fio's verify header: its magic (0xacca, little-endian) starts every
/// verified interval, and the offset it was written at is at bytes 16..24.
const FIO_MAGIC: [u8; 2] = [0xca, 0xac];

/// NVMe statuses (SCT 0): Internal Error, as a device error answers.
const NVME_INTERNAL_ERROR: u16 = 0x006;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `program args` (at most [`TOOL_TIMEOUT`]).
fn tool(program: &str, args: &[String]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args);
    output_with_timeout(cmd, TOOL_TIMEOUT)
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// `KIND:///PATH` followed by `query` (`""` or `"?k=v&..."`).
fn uri(kind: &str, path: &Path, query: &str) -> String {
    format!("{kind}://{}{query}", path.display())
}

/// A daemon on one core with `--bdev` for each of `bdevs` and `--share`
/// for each of `shares`.
fn start(bdevs: &[String], shares: &[String]) -> Daemon {
    let mut args = Vec::new();
    for b in bdevs {
        args.extend(["--bdev".to_string(), b.clone()]);
    }
    for s in shares {
        args.extend(["--share".to_string(), s.clone()]);
    }
    Daemon::start_quiet(args)
}

/// Device `name` as `bdev list --output json` shows it.
fn bdev(d: &Daemon, name: &str) -> Value {
    let list = d.ctl_json(&["bdev", "list"]);
    list["bdevs"]
        .as_array()
        .expect("a bdevs array")
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("no device {name} in {list}"))
        .clone()
}

/// A string field of a JSON object.
fn field(v: &Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no string {key} in {v}"))
        .to_owned()
}

/// `stats io NAME`: the device's counters.
fn io_stats(d: &Daemon, name: &str) -> Value {
    d.ctl_json(&["stats", "io", name])["stats"][0].clone()
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{v} is not an unsigned integer"))
}

/// `io_engine_bdev_errors_total{bdev="NAME",op="OP"}` on the metrics
/// endpoint.
fn bdev_errors(d: &Daemon, name: &str, op: &str) -> f64 {
    let body = http::get(&d.metrics_url())
        .unwrap_or_else(|e| panic!("GET /metrics: {e}"))
        .text();
    http::sample(
        &body,
        &format!("io_engine_bdev_errors_total{{bdev=\"{name}\",op=\"{op}\"}}"),
    )
}

/// Creates a device through gRPC (`BdevService.Create`).
fn grpc_create(d: &Daemon, uri: &str) -> Result<pb::Bdev, tonic::Status> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let mut c = BdevServiceClient::new(d.channel().await);
        c.create(pb::CreateBdevRequest { uri: uri.into() })
            .await
            .map(tonic::Response::into_inner)
    })
}

/// Runs `io-engine-ctl bdev create URI`, which must fail; returns what it
/// said.
fn ctl_create_fails(d: &Daemon, uri: &str) -> String {
    let out = d.ctl(["bdev", "create", uri]);
    assert!(
        !out.status.success(),
        "bdev create {uri} succeeded:\n{}",
        said(&out)
    );
    said(&out)
}

/// Asserts that fio's verify headers cover `[start, start + len)` of
/// `path`: every 4 KiB block starts with the header's magic and names its
/// own offset. So every block the client wrote is on the backing, at the
/// offset the client wrote it to.
fn assert_fio_blocks(path: &Path, start: u64, len: u64) {
    let data = read_at(path, start, len as usize);
    for (i, block) in data.chunks_exact(4096).enumerate() {
        let at = start + i as u64 * 4096;
        assert_eq!(
            block[..2],
            FIO_MAGIC,
            "{}: no fio header at {at}",
            path.display()
        );
        let offset = u64::from_le_bytes(block[16..24].try_into().unwrap());
        assert_eq!(
            offset,
            at,
            "{}: the block at {at} says {offset}",
            path.display()
        );
    }
}

/// `qemu-io -f raw URI -c CMD...`: its output (qemu-io prints a failed
/// command's error and carries on, so the caller reads the text).
fn qemu_io(uri: &str, cmds: &[String]) -> String {
    let mut args = strings(&["-f", "raw"]);
    for c in cmds {
        args.extend(["-c".to_string(), c.clone()]);
    }
    args.push(uri.to_string());
    said(&tool("qemu-io", &args))
}

/// Writes 4 KiB of byte `pattern` at `offset` and reads it back, checked,
/// with qemu-io over NBD; panics unless both worked.
fn nbd_write_read_ok(uri: &str, offset: u64, pattern: u8) {
    let out = qemu_io(
        uri,
        &[
            format!("write -P {pattern} {offset} 4k"),
            format!("read -P {pattern} {offset} 4k"),
        ],
    );
    assert!(
        out.contains("wrote 4096/4096") && out.contains("read 4096/4096"),
        "qemu-io on {uri} at {offset}:\n{out}"
    );
    assert!(!out.contains("failed"), "qemu-io on {uri}:\n{out}");
}

/// An admin queue (enabled) and one I/O queue to `name`'s subsystem.
fn nvme_connect(d: &Daemon, name: &str) -> (Host, Host) {
    let (admin, io, _) = Host::pair(d.nvmf_addr(), &nqn_of(name), 31);
    (admin, io)
}

/// Writes `data` (at most 8 KiB, whole blocks of `bs`) at block `slba` in
/// the capsule; the completion's status.
fn nvme_write(io: &mut Host, bs: usize, slba: u64, data: &[u8]) -> u16 {
    let sqe = Sqe::rw(0x01, 1, slba, (data.len() / bs) as u32);
    io.exec(sqe, data, &[])
        .expect("a Write completion")
        .0
        .status()
}

/// Reads `nlb` blocks of `bs` at `slba`: the status and the data.
fn nvme_read(io: &mut Host, bs: usize, slba: u64, nlb: u32) -> (u16, Vec<u8>) {
    let sqe = Sqe::rw(0x02, 1, slba, nlb).with_bytes(32, &(nlb * bs as u32).to_le_bytes());
    let (cqe, data) = io.exec(sqe, &[], &[]).expect("a Read completion");
    (cqe.status(), data)
}

/// The NGUID in Identify Namespace (CNS 0) of namespace 1, as hex.
fn nguid(admin: &mut Host) -> String {
    let (cqe, ns) = admin
        .read_admin(Sqe::new(0x06, 1).with_cdw(10, 0), 4096)
        .expect("an Identify completion");
    assert_eq!(cqe.status(), 0, "Identify Namespace");
    ns[104..120].iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------
// 1. fio verify over NBD, on files and loop devices
// ---------------------------------------------------------------------------

#[test]
fn fio_verifies_over_nbd_on_files_and_loop_devices() {
    const MIB: u64 = 16;
    const JOB_MB: u64 = MIB / 2;
    let dir = Scratch::new("persistent-fio");
    // One file per device; the loop devices sit on files of their own.
    let files: Vec<PathBuf> = KINDS
        .iter()
        .map(|k| dir.file(&format!("{k}-file.img"), MIB))
        .collect();
    let loop_files: Vec<PathBuf> = KINDS
        .iter()
        .map(|k| dir.file(&format!("{k}-loop.img"), MIB))
        .collect();
    let loops: Vec<LoopDevice> = loop_files.iter().map(|f| LoopDevice::attach(f)).collect();
    let mut bdevs = Vec::new();
    let mut names = Vec::new();
    for (i, kind) in KINDS.iter().enumerate() {
        bdevs.push(uri(kind, &files[i], ""));
        names.push(format!("{kind}-file.img"));
        bdevs.push(uri(kind, loops[i].path(), &format!("?name={kind}-loop")));
        names.push(format!("{kind}-loop"));
    }
    // Two reactors when there are two CPUs: fio's two jobs (two
    // connections) then run on both, each with its own io_uring or AIO
    // context on the same device.
    let cpus = available_cpus();
    let list = cpus
        .iter()
        .take(2)
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut args = strings(&["--poll-mode", "adaptive", "-l", &list]);
    for (b, n) in bdevs.iter().zip(&names) {
        args.extend(["--bdev".to_string(), b.clone(), "--share".into(), n.clone()]);
    }
    let d = Daemon::start(args);

    for (name, backing) in names
        .iter()
        .zip([&files[0], &loop_files[0], &files[1], &loop_files[1]])
    {
        let b = bdev(&d, name);
        assert_eq!(u(&b["size_bytes"]), MIB << 20, "{b}");
        let args = fio_nbd_verify_args(&d.nbd_uri(name), "--bsrange=4k-64k", JOB_MB);
        let out = tool("fio", &args);
        assert!(
            out.status.success(),
            "fio on {name} failed ({}):\n{}",
            out.status,
            said(&out)
        );
        assert_fio_verified(&text(&out.stdout), JOB_MB, name);
        // The data is on the backing, where fio put it.
        assert_fio_blocks(backing, 0, MIB << 20);
        let s = io_stats(&d, name);
        assert!(u(&s["write"]["bytes"]) >= MIB << 20, "{s}");
        assert_eq!(u(&s["write"]["errors"]) + u(&s["read"]["errors"]), 0, "{s}");
    }
    drop(d);
    drop(loops);
}

// ---------------------------------------------------------------------------
// 2. nvmf-perf verify over NVMe/TCP
// ---------------------------------------------------------------------------

#[test]
fn nvmf_perf_verifies_on_uring_and_aio() {
    let dir = Scratch::new("persistent-nvmf-perf");
    let mut bdevs = Vec::new();
    let mut shares = Vec::new();
    let mut files = Vec::new();
    for kind in KINDS {
        let f = dir.file(&format!("{kind}.img"), 32);
        bdevs.push(uri(kind, &f, "?blk_size=4096"));
        shares.push(format!("{kind}.img:nvmf"));
        files.push(f);
    }
    let d = start(&bdevs, &shares);
    let cpus = available_cpus();
    let mask = cpu_mask(&[*cpus.get(1).unwrap_or(&cpus[0])]);
    for (kind, file) in KINDS.iter().zip(&files) {
        let name = format!("{kind}.img");
        let addr = d.nvmf_addr();
        let r = format!(
            "trtype:TCP adrfam:IPv4 traddr:{} trsvcid:{} subnqn:{}",
            addr.ip(),
            addr.port(),
            nqn_of(&name)
        );
        // Random reads and writes over two connections; then Copy
        // commands (run on the engine's blocking threads), read back.
        for load in [
            &["-q", "16", "-o", "4k", "-w", "randrw", "-t", "2", "-P", "2"][..],
            &["-q", "8", "-o", "64k", "-w", "copy", "-t", "1"][..],
        ] {
            let mut args = load.to_vec();
            args.extend(["-y", "--json", "-c", &mask, "-r", &r]);
            let out = run_with_timeout(bin("nvmf-perf"), &args, TOOL_TIMEOUT);
            assert_eq!(
                out.status.code(),
                Some(0),
                "nvmf-perf {args:?} on {name}:\n{}",
                said(&out)
            );
            let report: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("nvmf-perf printed no JSON ({e}):\n{}", said(&out)));
            let t = &report["total"];
            assert_eq!(u(&t["failed"]), 0, "{name} {load:?}: {t}");
            assert_eq!(u(&t["miscompares"]), 0, "{name} {load:?}: {t}");
            assert!(u(&t["verified"]) > 0, "{name}: verify checked no read: {t}");
            for c in report["connections"].as_array().expect("connections") {
                assert!(u(&c["ios"]) > 0, "{name}: a connection did no IO: {c}");
            }
        }
        // What the host wrote went to the file.
        let s = io_stats(&d, &name);
        assert!(u(&s["write"]["ops"]) > 0, "{s}");
        assert!(u(&s["copy"]["ops"]) > 0, "{s}");
        for op in ["read", "write", "copy"] {
            assert_eq!(u(&s[op]["errors"]), 0, "{op}: {s}");
        }
        let data = std::fs::read(file).unwrap();
        assert!(
            data.iter().any(|&b| b != 0),
            "{}: nothing reached the file",
            file.display()
        );
    }
}

#[test]
fn zeroes_discards_and_flushes_reach_the_backing() {
    let dir = Scratch::new("persistent-zeroes");
    let mut bdevs = Vec::new();
    let mut names = Vec::new();
    let mut backings = Vec::new();
    let mut loops = Vec::new();
    for kind in KINDS {
        let f = dir.file(&format!("{kind}-file.img"), 8);
        bdevs.push(uri(kind, &f, ""));
        names.push(format!("{kind}-file.img"));
        backings.push(f);
        let f = dir.file(&format!("{kind}-loop.img"), 8);
        let l = LoopDevice::attach(&f);
        bdevs.push(uri(kind, l.path(), &format!("?name={kind}-loop")));
        names.push(format!("{kind}-loop"));
        backings.push(f);
        loops.push(l);
    }
    let d = start(&bdevs, &names);
    for (name, backing) in names.iter().zip(&backings) {
        // 1 MiB of 0x55; zeroes over the first 64 KiB, a discard over
        // 128-256 KiB; a flush.
        let out = qemu_io(
            &d.nbd_uri(name),
            &strings(&[
                "write -P 0x55 0 1M",
                "write -z 0 64k",
                "discard 128k 128k",
                "flush",
                "read -P 0 0 64k",
                "read -P 0x55 64k 64k",
                "read -P 0 128k 128k",
                "read -P 0x55 256k 768k",
            ]),
        );
        assert!(
            !out.contains("failed") && !out.contains("Pattern verification"),
            "{name}: {out}"
        );
        // The backing says the same, and the discard freed its blocks.
        let data = read_at(backing, 0, 1 << 20);
        assert!(data[..64 << 10].iter().all(|&b| b == 0), "{name}: zeroes");
        assert!(
            data[64 << 10..128 << 10].iter().all(|&b| b == 0x55),
            "{name}"
        );
        assert!(
            data[128 << 10..256 << 10].iter().all(|&b| b == 0),
            "{name}: discarded"
        );
        assert!(data[256 << 10..].iter().all(|&b| b == 0x55), "{name}");
        let allocated =
            std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(backing).unwrap()) * 512;
        assert!(
            allocated <= (1 << 20) - (128 << 10),
            "{name}: {allocated} bytes still allocated in {}",
            backing.display()
        );
        let s = io_stats(&d, name);
        for op in ["write_zeroes", "unmap", "flush"] {
            assert!(u(&s[op]["ops"]) >= 1, "{name}: no {op}: {s}");
            assert_eq!(u(&s[op]["errors"]), 0, "{name}: {op}: {s}");
        }
    }
    drop(d);
    drop(loops);
}

#[test]
fn a_block_device_gives_its_logical_block_size_and_its_own_size() {
    let dir = Scratch::new("persistent-blksz");
    let f = dir.file("4k.img", 8);
    let l = LoopDevice::attach_with_sector_size(&f, 4096);
    let d = start(&[], &[]);
    let dev = l.path();
    for kind in KINDS {
        let b = d.ctl_json(&[
            "bdev",
            "create",
            &uri(kind, dev, &format!("?name={kind}-4k")),
        ]);
        assert_eq!(
            u(&b["block_size"]),
            4096,
            "the loop device's sector size: {b}"
        );
        assert_eq!(u(&b["size_bytes"]), 8 << 20, "{b}");
        assert!(field(&b, "uri").contains("blk_size=4096"), "{b}");
        let said = ctl_create_fails(
            &d,
            &uri(kind, dev, &format!("?name={kind}-512&blk_size=512")),
        );
        assert!(
            said.contains("4096"),
            "below the logical block size: {said}"
        );
        let said = ctl_create_fails(
            &d,
            &uri(kind, dev, &format!("?name={kind}-sized&size_mb=8")),
        );
        assert!(
            said.contains("size_mb"),
            "a block device has its own size: {said}"
        );
    }
    drop(d);
    drop(l);
}

// ---------------------------------------------------------------------------
// 3. Durability across kill -9
// ---------------------------------------------------------------------------

/// fio's arguments for the durability job on `uri`: 8 MiB of random
/// writes of 4-64 KiB with crc32c headers and an fsync (an NBD FLUSH) at
/// the end, or with `verify_only`, the same job's reads and checks.
fn durable_job(uri: &str, verify_only: bool) -> Vec<String> {
    let mut args = strings(&[
        "--name=durable",
        "--ioengine=nbd",
        "--rw=randwrite",
        "--bsrange=4k-64k",
        "--iodepth=16",
        "--size=8m",
        "--randseed=27",
        "--verify=crc32c",
        "--verify_state_save=0",
        "--verify_fatal=1",
        "--output-format=json",
    ]);
    args.push(format!("--uri={uri}"));
    if verify_only {
        args.push("--verify_only=1".into());
    } else {
        args.extend(strings(&["--do_verify=0", "--end_fsync=1"]));
    }
    args
}

/// The JSON report of a fio run (fio may print notes first).
fn fio_report(out: &Output) -> Value {
    let stdout = text(&out.stdout);
    let start = stdout
        .find('{')
        .unwrap_or_else(|| panic!("no fio JSON in:\n{}", said(out)));
    serde_json::from_str(&stdout[start..])
        .unwrap_or_else(|e| panic!("bad fio JSON ({e}):\n{}", said(out)))
}

#[test]
fn what_a_flush_acknowledged_survives_kill_9() {
    let dir = Scratch::new("persistent-durable");
    let mut bdevs = Vec::new();
    let mut names = Vec::new();
    let mut files = Vec::new();
    for kind in KINDS {
        let f = dir.file(&format!("{kind}.img"), 16);
        bdevs.push(uri(kind, &f, ""));
        names.push(format!("{kind}.img"));
        files.push(f);
    }
    // A device never written, to show that the check sees missing data.
    let blank = dir.file("blank.img", 16);
    bdevs.push(uri("uring", &blank, ""));
    names.push("blank.img".into());

    let mut d = start(&bdevs, &names);
    for name in &names[..2] {
        let out = tool("fio", &durable_job(&d.nbd_uri(name), false));
        assert!(out.status.success(), "fio on {name}:\n{}", said(&out));
        let job = &fio_report(&out)["jobs"][0];
        assert_eq!(u(&job["error"]), 0, "{job}");
        assert_eq!(u(&job["write"]["io_bytes"]), 8 << 20, "{job}");
        let s = io_stats(&d, name);
        assert!(u(&s["flush"]["ops"]) > 0, "fio's fsync reached {name}: {s}");
        assert_eq!(u(&s["flush"]["errors"]), 0, "{s}");
    }
    let uuids: Vec<String> = names.iter().map(|n| field(&bdev(&d, n), "uuid")).collect();
    let (status, _) = d.stop_with(Signal::KILL);
    assert_eq!(status.code(), None, "killed by its signal: {status:?}");
    drop(d);

    // A new daemon, the same URIs: the same devices, with the data.
    let d = start(&bdevs, &names);
    for (name, uuid) in names.iter().zip(&uuids) {
        assert_eq!(&field(&bdev(&d, name), "uuid"), uuid, "{name}");
    }
    for (name, file) in names[..2].iter().zip(&files) {
        let out = tool("fio", &durable_job(&d.nbd_uri(name), true));
        let report = fio_report(&out);
        let job = &report["jobs"][0];
        assert!(
            out.status.success() && u(&job["error"]) == 0,
            "fio --verify_only on {name} after kill -9 and a restart:\n{}",
            said(&out)
        );
        assert_eq!(
            u(&job["read"]["io_bytes"]),
            8 << 20,
            "every block read back: {job}"
        );
        assert_fio_blocks(file, 0, 8 << 20);
    }
    // The same check on a device that was never written fails.
    let out = tool("fio", &durable_job(&d.nbd_uri("blank.img"), true));
    assert!(
        !out.status.success() || u(&fio_report(&out)["jobs"][0]["error"]) != 0,
        "fio --verify_only passed on a blank device:\n{}",
        said(&out)
    );
}

// ---------------------------------------------------------------------------
// 4. Faults from the disk
// ---------------------------------------------------------------------------

#[test]
fn a_file_system_shut_down_fails_its_devices_ios_only() {
    let fs = Ext4Mount::new("persistent-shutdown", 64);
    let mut bdevs = vec!["malloc:///m0?size_mb=8".to_string()];
    let mut shares = vec!["m0".to_string()];
    for kind in KINDS {
        for proto in ["nbd", "nvmf"] {
            let f = fs.join(&format!("{kind}-{proto}.img"));
            sized_file(&f, 4);
            bdevs.push(uri(kind, &f, "?blk_size=4096"));
            shares.push(if proto == "nbd" {
                format!("{kind}-{proto}.img")
            } else {
                format!("{kind}-{proto}.img:nvmf")
            });
        }
    }
    let mut d = start(&bdevs, &shares);
    let data = random_bytes(4096, 4);
    let mut nvme = Vec::new();
    for kind in KINDS {
        // Before: IO works.
        nbd_write_read_ok(&d.nbd_uri(&format!("{kind}-nbd.img")), 8192, 0x5a);
        let (admin, mut io) = nvme_connect(&d, &format!("{kind}-nvmf.img"));
        assert_eq!(nvme_write(&mut io, 4096, 3, &data), 0);
        assert_eq!(nvme_read(&mut io, 4096, 3, 1), (0, data.clone()));
        nvme.push((kind, admin, io));
    }
    let names: Vec<String> = KINDS
        .iter()
        .flat_map(|k| [format!("{k}-nbd.img"), format!("{k}-nvmf.img")])
        .collect();
    for name in &names {
        for op in ["read", "write"] {
            assert_eq!(bdev_errors(&d, name, op), 0.0, "{name} {op}");
        }
    }

    fs.shut_down();

    for (kind, _admin, io) in &mut nvme {
        let name = format!("{kind}-nbd.img");
        let out = qemu_io(
            &d.nbd_uri(&name),
            &["write -P 0x33 0 4k".into(), "read 0 4k".into()],
        );
        assert!(
            out.contains("write failed: Input/output error")
                && out.contains("read failed: Input/output error"),
            "{name}: qemu-io after the shutdown:\n{out}"
        );
        let name = format!("{kind}-nvmf.img");
        assert_eq!(
            nvme_write(io, 4096, 5, &data),
            NVME_INTERNAL_ERROR,
            "{name}: a Write after the shutdown"
        );
        assert_eq!(
            nvme_read(io, 4096, 3, 1).0,
            NVME_INTERNAL_ERROR,
            "{name}: a Read after the shutdown"
        );
        // The queue lives on: another command is answered too.
        assert_eq!(nvme_read(io, 4096, 0, 1).0, NVME_INTERNAL_ERROR, "{name}");
    }
    for name in &names {
        for op in ["read", "write"] {
            assert!(
                bdev_errors(&d, name, op) >= 1.0,
                "{name}: the failed {op} is counted"
            );
        }
        // Every failed IO came back: none is left in the device.
        assert_eq!(u(&io_stats(&d, name)["in_flight"]), 0, "{name}");
    }
    // The daemon lives on, and its other device serves IO as before.
    assert!(d.is_running(), "the daemon died:\n{}", d.stderr());
    nbd_write_read_ok(&d.nbd_uri("m0"), 0, 0x77);
    nbd_write_read_ok(&d.nbd_uri("m0"), 1 << 20, 0x78);
    assert_eq!(bdev_errors(&d, "m0", "write"), 0.0);
    assert_eq!(u(&io_stats(&d, "m0")["read"]["errors"]), 0);
    assert!(
        d.stderr().contains("Input/output error"),
        "the failures are logged:\n{}",
        d.stderr()
    );
    drop(nvme);
    // Stop the daemon before the mount goes (it holds files in it).
    let (status, _) = d.terminate();
    assert!(status.success(), "exit after the faults: {status:?}");
}

#[test]
fn a_loop_device_that_shrinks_fails_ios_past_its_new_end() {
    let dir = Scratch::new("persistent-shrink");
    let mut loops = Vec::new();
    let mut bdevs = vec!["malloc:///m0?size_mb=8".to_string()];
    let mut names = vec!["m0".to_string()];
    for kind in KINDS {
        let f = dir.file(&format!("{kind}.img"), 16);
        let l = LoopDevice::attach(&f);
        bdevs.push(uri(kind, l.path(), &format!("?name={kind}-loop")));
        names.push(format!("{kind}-loop"));
        loops.push((f, l));
    }
    let mut d = start(&bdevs, &names);
    let beyond = 12u64 << 20;
    for kind in KINDS {
        let nbd = d.nbd_uri(&format!("{kind}-loop"));
        nbd_write_read_ok(&nbd, beyond, 0x21);
        nbd_write_read_ok(&nbd, 0, 0x22);
    }
    for (f, l) in &loops {
        std::fs::OpenOptions::new()
            .write(true)
            .open(f)
            .and_then(|f| f.set_len(8 << 20))
            .unwrap_or_else(|e| panic!("cannot truncate {}: {e}", f.display()));
        l.set_capacity();
        assert_eq!(l.size_bytes(), 8 << 20, "{} shrank", l.path().display());
    }
    for kind in KINDS {
        let name = format!("{kind}-loop");
        let nbd = d.nbd_uri(&name);
        let out = qemu_io(
            &nbd,
            &[
                format!("write -P 0x23 {beyond} 4k"),
                format!("read {beyond} 4k"),
            ],
        );
        assert!(
            out.contains("write failed: Input/output error")
                && out.contains("read failed: Input/output error"),
            "{name}: IO past the new end:\n{out}"
        );
        for op in ["read", "write"] {
            assert!(
                bdev_errors(&d, &name, op) >= 1.0,
                "{name}: the failed {op} is counted"
            );
        }
        // Below the new end the device still works, with its data.
        let out = qemu_io(&nbd, &["read -P 0x22 0 4k".into()]);
        assert!(out.contains("read 4096/4096"), "{name}:\n{out}");
        nbd_write_read_ok(&nbd, 4 << 20, 0x24);
    }
    nbd_write_read_ok(&d.nbd_uri("m0"), 0, 0x25);
    assert!(d.is_running(), "the daemon died:\n{}", d.stderr());
    drop(d);
    drop(loops);
}

// ---------------------------------------------------------------------------
// 5. Identity across restarts
// ---------------------------------------------------------------------------

#[test]
fn a_restart_keeps_the_uuid_and_the_nguid_and_paths_differ() {
    let dir = Scratch::new("persistent-uuid");
    let file = dir.file("disk0.img", 8);
    let other = dir.file("disk1.img", 8);
    let u0 = uri("uring", &file, "?blk_size=4096");
    let shares = strings(&["disk0.img:nvmf"]);

    let mut d = start(std::slice::from_ref(&u0), &shares);
    let b = bdev(&d, "disk0.img");
    let uuid = field(&b, "uuid");
    assert_eq!(uuid.as_bytes()[14], b'5', "a name-based (v5) uuid: {uuid}");
    assert_eq!(
        field(&b, "uri"),
        format!("uring://{}?blk_size=4096&uuid={uuid}", file.display()),
        "the canonical URI names the block size and the uuid"
    );
    let (mut admin, _io) = nvme_connect(&d, "disk0.img");
    let first = nguid(&mut admin);
    assert_eq!(first, uuid.replace('-', ""), "the NGUID is the uuid");
    drop((admin, _io));
    // Another path, another uuid; the same path through aio, the same one.
    let c = d.ctl_json(&["bdev", "create", &uri("uring", &other, "")]);
    let other_uuid = field(&c, "uuid");
    assert_ne!(other_uuid, uuid, "two paths, two uuids");
    let a = d.ctl_json(&[
        "bdev",
        "create",
        &uri("aio", &file, "?readonly=true&name=disk0-aio"),
    ]);
    assert_eq!(field(&a, "uuid"), uuid, "the uuid is the path's: {a}");
    d.terminate();
    drop(d);

    let d = start(std::slice::from_ref(&u0), &shares);
    let b = bdev(&d, "disk0.img");
    assert_eq!(field(&b, "uuid"), uuid, "the same uuid after a restart");
    let (mut admin, _io) = nvme_connect(&d, "disk0.img");
    assert_eq!(nguid(&mut admin), first, "the same NGUID after a restart");
    let c = d.ctl_json(&["bdev", "create", &uri("uring", &other, "")]);
    assert_eq!(field(&c, "uuid"), other_uuid, "the other path's too");
}

// ---------------------------------------------------------------------------
// 6. config dump
// ---------------------------------------------------------------------------

#[test]
fn config_dump_restores_the_devices_with_their_uris_and_uuids() {
    let dir = Scratch::new("persistent-config");
    let file = dir.file("cfg0.img", 8);
    let other = dir.file("cfg1.img", 8);
    let mut d = start(&[], &[]);
    let created = d.ctl_json(&["bdev", "create", &uri("uring", &file, "")]);
    d.ctl_ok(&["bdev", "share", "cfg0.img"]);
    nbd_write_read_ok(&d.nbd_uri("cfg0.img"), 1 << 20, 0x6c);
    // Every parameter away from its default, and a uuid of its own.
    let given = "0b0c0d0e-1f20-4122-8324-252627282930";
    d.ctl_json(&[
        "bdev",
        "create",
        &uri(
            "aio",
            &other,
            &format!("?name=cfg-ro&readonly=true&direct=false&blk_size=4096&uuid={given}"),
        ),
    ]);
    d.ctl_ok(&["bdev", "share", "cfg-ro", "--protocol", "nvmf"]);
    let before = [bdev(&d, "cfg0.img"), bdev(&d, "cfg-ro")];
    assert_eq!(field(&before[0], "uuid"), field(&created, "uuid"));
    assert_eq!(field(&before[1], "uuid"), given);
    let dump = d.ctl_ok(&["config", "dump"]);
    for b in &before {
        assert!(
            dump.contains(&field(b, "uri")),
            "the dump has the canonical URI:\n{dump}"
        );
    }
    d.terminate();
    drop(d);

    let config = dir.join("engine.toml");
    std::fs::write(&config, &dump).unwrap();
    let d = Daemon::start_quiet(["--config", config.to_str().unwrap()]);
    for b in &before {
        let after = bdev(&d, &field(b, "name"));
        for key in ["uri", "uuid", "product"] {
            assert_eq!(after[key], b[key], "{key}: {after}");
        }
        for key in ["block_size", "size_bytes"] {
            assert_eq!(after[key], b[key], "{key}: {after}");
        }
    }
    // The same backing, shared again, with its data.
    let out = qemu_io(&d.nbd_uri("cfg0.img"), &["read -P 0x6c 1M 4k".into()]);
    assert!(out.contains("read 4096/4096"), "{out}");
    // The read-only one is read-only again, over NVMe/TCP again, its
    // NGUID the uuid it was given.
    let (mut admin, mut io) = nvme_connect(&d, "cfg-ro");
    assert_eq!(nguid(&mut admin), given.replace('-', ""));
    assert_ne!(nvme_write(&mut io, 4096, 0, &[1; 4096]), 0);
    assert!(std::fs::read(&other).unwrap().iter().all(|&b| b == 0));
}

// ---------------------------------------------------------------------------
// 7. Errors that say why
// ---------------------------------------------------------------------------

#[test]
fn a_missing_file_without_size_mb_is_not_found_and_size_mb_creates_it() {
    let dir = Scratch::new("persistent-missing");
    let d = start(&[], &[]);
    for kind in KINDS {
        let missing = dir.join(&format!("{kind}-missing.img"));
        let said = ctl_create_fails(&d, &uri(kind, &missing, ""));
        assert!(
            said.contains(&missing.display().to_string()) && said.contains("size_mb"),
            "the message names the file and the way out: {said}"
        );
        let status = grpc_create(&d, &uri(kind, &missing, "")).expect_err("no such file");
        assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
        assert!(
            status.message().contains(&missing.display().to_string()),
            "{status:?}"
        );
        assert!(!missing.exists(), "nothing was created");

        // size_mb= creates it, sparse, at that size.
        let b = d.ctl_json(&["bdev", "create", &uri(kind, &missing, "?size_mb=4")]);
        assert_eq!(u(&b["size_bytes"]), 4 << 20, "{b}");
        let meta = std::fs::metadata(&missing).expect("the file was created");
        assert_eq!(meta.len(), 4 << 20);
    }
}

#[test]
fn a_path_whose_last_component_is_no_name_needs_name() {
    let dir = Scratch::new("persistent-name");
    let file = dir.file("disk 0.img", 4);
    let d = start(&[], &[]);
    let encoded = format!("uring://{}/disk%200.img", dir.path().display());
    let said = ctl_create_fails(&d, &encoded);
    assert!(
        said.contains("disk 0.img") && said.contains("name"),
        "{said}"
    );
    let b = d.ctl_json(&["bdev", "create", &format!("{encoded}?name=disk0")]);
    assert_eq!(field(&b, "name"), "disk0", "{b}");
    assert_eq!(u(&b["size_bytes"]), 4 << 20, "{b}");
    assert!(file.exists());
    // The canonical URI, percent-encoded, makes the same device again.
    let canonical = field(&b, "uri");
    assert!(canonical.contains("disk%200.img"), "{canonical}");
    d.ctl_ok(&["bdev", "destroy", "disk0"]);
    let again = d.ctl_json(&["bdev", "create", &canonical]);
    assert_eq!(again["uuid"], b["uuid"], "{again}");
    assert_eq!(again["uri"], b["uri"], "{again}");
}

/// Whether the kernel opens `path` with O_DIRECT.
fn takes_o_direct(path: &Path) -> bool {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECT, Mode::empty()).is_ok()
}

/// A file removed when dropped.
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn o_direct_where_the_file_system_refuses_it_is_refused_with_the_way_out() {
    // ramfs refuses O_DIRECT on every kernel; tmpfs (/dev/shm) did until
    // Linux 6.6 and takes it since.
    let ramfs = Ramfs::new("persistent-ramfs");
    let on_ramfs = ramfs.join("ram.img");
    sized_file(&on_ramfs, 4);
    assert!(!takes_o_direct(&on_ramfs), "ramfs took O_DIRECT");
    let shm = Removed(PathBuf::from(format!(
        "/dev/shm/io-engine-persistent-{}.img",
        std::process::id()
    )));
    sized_file(&shm.0, 4);
    let shm_direct = takes_o_direct(&shm.0);

    let d = start(&[], &[]);
    for kind in KINDS {
        for (file, refuses) in [(&on_ramfs, true), (&shm.0, !shm_direct)] {
            let name = format!("{kind}-{}", if file == &on_ramfs { "ram" } else { "shm" });
            let direct = uri(kind, file, &format!("?name={name}"));
            if refuses {
                let said = ctl_create_fails(&d, &direct);
                assert!(
                    said.contains("direct=false") && said.contains(&file.display().to_string()),
                    "the message names the file and the way out: {said}"
                );
                let status = grpc_create(&d, &direct).unwrap_err();
                assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
            } else {
                // The kernel takes O_DIRECT there: so does the engine,
                // and the device serves IO.
                d.ctl_json(&["bdev", "create", &direct]);
                d.ctl_ok(&["bdev", "share", &name]);
                nbd_write_read_ok(&d.nbd_uri(&name), 2 << 20, 0x45);
                assert_eq!(read_at(file, 2 << 20, 4096), vec![0x45; 4096]);
                d.ctl_ok(&["bdev", "unshare", &name]);
                d.ctl_ok(&["bdev", "destroy", &name]);
            }
            // With buffered IO it works, and serves IO.
            let buffered = uri(kind, file, &format!("?direct=false&name={name}"));
            let b = d.ctl_json(&["bdev", "create", &buffered]);
            assert_eq!(u(&b["size_bytes"]), 4 << 20, "{b}");
            assert!(field(&b, "uri").contains("direct=false"), "{b}");
            d.ctl_ok(&["bdev", "share", &name]);
            let offset = if kind == "uring" { 0 } else { 1 << 20 };
            nbd_write_read_ok(&d.nbd_uri(&name), offset, 0x44);
            assert_eq!(read_at(file, offset, 4096), vec![0x44; 4096]);
        }
    }
    drop(d);
}

#[test]
fn num_blocks_and_a_size_mb_that_disagrees_are_refused_and_the_file_is_left_alone() {
    let dir = Scratch::new("persistent-size");
    let file = dir.join("sized.img");
    let content = random_bytes(4 << 20, 7);
    std::fs::write(&file, &content).unwrap();
    let d = start(&[], &[]);
    for kind in KINDS {
        let said = ctl_create_fails(&d, &uri(kind, &file, "?num_blocks=8192"));
        assert!(said.contains("num_blocks"), "{said}");
        let status = grpc_create(&d, &uri(kind, &file, "?num_blocks=8192")).unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");

        for mb in [2, 8] {
            let said = ctl_create_fails(&d, &uri(kind, &file, &format!("?size_mb={mb}")));
            assert!(
                said.contains(&file.display().to_string())
                    && said.contains(&(4u64 << 20).to_string()),
                "the message names the file and its size: {said}"
            );
        }
        assert_eq!(
            std::fs::metadata(&file).unwrap().len(),
            4 << 20,
            "the size is unchanged"
        );
        assert!(
            std::fs::read(&file).unwrap() == content,
            "the content is unchanged"
        );
    }
    // The size it has is accepted.
    let b = d.ctl_json(&["bdev", "create", &uri("uring", &file, "?size_mb=4")]);
    assert_eq!(u(&b["size_bytes"]), 4 << 20, "{b}");
    assert_eq!(bdev(&d, "sized.img")["product"], "uring");
    assert!(std::fs::read(&file).unwrap() == content);
}

/// A minimal NBD client (fixed newstyle, `NBD_OPT_GO`, simple replies)
/// that sends a WRITE whatever the export's flags say: a read-only
/// export must refuse it on the server, not only in a polite client.
struct RawNbd {
    s: TcpStream,
    flags: u16,
}

impl RawNbd {
    fn open(addr: SocketAddr, export: &str) -> RawNbd {
        use std::io::{Read, Write};
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut hello = [0u8; 18];
        s.read_exact(&mut hello).unwrap();
        assert_eq!(&hello[..8], b"NBDMAGIC");
        // Fixed newstyle, no zeroes.
        s.write_all(&3u32.to_be_bytes()).unwrap();
        let mut opt = Vec::new();
        opt.extend_from_slice(b"IHAVEOPT");
        opt.extend_from_slice(&7u32.to_be_bytes()); // NBD_OPT_GO
        let mut data = (export.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(export.as_bytes());
        data.extend_from_slice(&0u16.to_be_bytes());
        opt.extend_from_slice(&(data.len() as u32).to_be_bytes());
        opt.extend_from_slice(&data);
        s.write_all(&opt).unwrap();
        let mut flags = None;
        loop {
            let mut head = [0u8; 20];
            s.read_exact(&mut head).unwrap();
            let ty = u32::from_be_bytes(head[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(head[16..20].try_into().unwrap()) as usize;
            let mut body = vec![0u8; len];
            s.read_exact(&mut body).unwrap();
            match ty {
                // NBD_REP_INFO, NBD_INFO_EXPORT: size, then flags.
                3 if body[..2] == [0, 0] => {
                    flags = Some(u16::from_be_bytes([body[10], body[11]]));
                }
                3 => {}
                1 => break, // NBD_REP_ACK
                other => panic!("option reply {other:#x} to GO {export}: {body:?}"),
            }
        }
        RawNbd {
            s,
            flags: flags.expect("NBD_INFO_EXPORT"),
        }
    }

    /// Sends one request (`ty`, with `payload` for a write) and returns
    /// the errno of its simple reply, and the data of a read.
    fn request(&mut self, ty: u16, offset: u64, len: u32, payload: &[u8]) -> (u32, Vec<u8>) {
        use std::io::{Read, Write};
        let mut req = Vec::new();
        req.extend_from_slice(&0x2560_9513u32.to_be_bytes());
        req.extend_from_slice(&0u16.to_be_bytes());
        req.extend_from_slice(&ty.to_be_bytes());
        req.extend_from_slice(&1u64.to_be_bytes());
        req.extend_from_slice(&offset.to_be_bytes());
        req.extend_from_slice(&len.to_be_bytes());
        req.extend_from_slice(payload);
        self.s.write_all(&req).unwrap();
        let mut reply = [0u8; 16];
        self.s.read_exact(&mut reply).unwrap();
        assert_eq!(reply[..4], 0x6744_6698u32.to_be_bytes(), "a simple reply");
        let errno = u32::from_be_bytes(reply[4..8].try_into().unwrap());
        let mut data = Vec::new();
        if ty == 0 && errno == 0 {
            data.resize(len as usize, 0);
            self.s.read_exact(&mut data).unwrap();
        }
        (errno, data)
    }
}

#[test]
fn a_read_only_device_reads_and_refuses_writes_leaving_the_file_alone() {
    let dir = Scratch::new("persistent-readonly");
    let mut bdevs = Vec::new();
    let mut shares = Vec::new();
    let mut files = Vec::new();
    for kind in KINDS {
        let f = dir.join(&format!("{kind}-ro.img"));
        std::fs::write(&f, random_bytes(4 << 20, 11)).unwrap();
        bdevs.push(uri(kind, &f, "?readonly=true&blk_size=4096"));
        shares.push(format!("{kind}-ro.img"));
        shares.push(format!("{kind}-ro.img:nvmf"));
        files.push(f);
    }
    // Each device over NBD; NVMe/TCP on a second daemon (a device has one share).
    let mut d = start(
        &bdevs,
        &shares.iter().step_by(2).cloned().collect::<Vec<_>>(),
    );
    let mut d2 = start(
        &bdevs,
        &shares
            .iter()
            .skip(1)
            .step_by(2)
            .cloned()
            .collect::<Vec<_>>(),
    );
    let content = random_bytes(4 << 20, 11);
    for (kind, file) in KINDS.iter().zip(&files) {
        let name = format!("{kind}-ro.img");
        assert!(
            field(&bdev(&d, &name), "uri").contains("readonly=true"),
            "{}",
            bdev(&d, &name)
        );
        // Reads return the file's data.
        let mut c = RawNbd::open(d.nbd_addr(), &name);
        let (errno, got) = c.request(0, 8192, 4096, &[]);
        assert_eq!(errno, 0, "{name}: a read");
        assert!(got == content[8192..8192 + 4096], "{name}: the file's data");
        // A write sent anyway fails, and the client hears it: refused
        // before the device (EPERM on a read-only export, ENOTSUP from a
        // device that serves no write) and counted as the export's error,
        // or failed by the device and counted as the device's.
        let nbd_refusals = |d: &Daemon| {
            let body = http::get(&d.metrics_url()).unwrap().text();
            ["EPERM", "ENOTSUP"]
                .iter()
                .map(|e| {
                    http::sample(
                        &body,
                        &format!("io_engine_nbd_errors_total{{export=\"{name}\",errno=\"{e}\"}}"),
                    )
                })
                .sum::<f64>()
        };
        // The export is read-only: a device that takes no writes is shared
        // read-only whatever the share asked.
        assert_ne!(
            c.flags & 2,
            0,
            "{name}: NBD_FLAG_READ_ONLY not set: {:#x}",
            c.flags
        );
        let refused_before = nbd_refusals(&d);
        let (errno, _) = c.request(1, 8192, 4096, &[0xee; 4096]);
        assert_eq!(errno, 1, "{name}: a write to a read-only export gets EPERM");
        assert!(
            nbd_refusals(&d) > refused_before || bdev_errors(&d, &name, "write") >= 1.0,
            "{name}: the failed write (errno {errno}, export flags {:#x}) is counted nowhere",
            c.flags
        );
        // qemu-io, a polite client, cannot write either.
        let out = qemu_io(&d.nbd_uri(&name), &["write -P 1 0 4k".into()]);
        assert!(!out.contains("wrote 4096/4096"), "{name}: {out}");

        // NVMe/TCP: the namespace says it is write protected (NSATTR bit
        // 0), reads work, a write gets Namespace is Write Protected.
        let (mut admin, mut io) = nvme_connect(&d2, &name);
        let (cqe, ns) = admin
            .read_admin(Sqe::new(0x06, 1).with_cdw(10, 0), 4096)
            .expect("an Identify completion");
        assert_eq!((cqe.status(), ns[99] & 1), (0, 1), "{name}: NSATTR");
        let (status, got) = nvme_read(&mut io, 4096, 2, 1);
        assert_eq!(status, 0);
        assert!(got == content[8192..8192 + 4096], "{name}: NVMe read");
        let status = nvme_write(&mut io, 4096, 2, &[0xee; 4096]);
        assert_eq!(
            status, 0x20,
            "{name}: an NVMe write to a read-only device: Namespace is Write Protected"
        );

        assert!(
            std::fs::read(file).unwrap() == content,
            "{}: the file changed",
            file.display()
        );
    }
    for d in [&mut d, &mut d2] {
        assert!(d.is_running(), "a daemon died:\n{}", d.stderr());
    }
}
