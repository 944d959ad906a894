//! End-to-end tests of `nvmf-perf`: the release binary driving the
//! daemon's NVMe/TCP target (a malloc device shared on a kernel-chosen
//! port of 127.0.0.1): verified random read/write runs over two
//! connections, without and with digests, through in-capsule writes and
//! R2T transfers; Copy commands with their copied data read back and
//! checked; a refused Connect and a Copy beyond the target's limits are
//! one-line errors with exit status 2.
//!
//! Every run is short (1 to 2 s) and bounded by a timeout; every test
//! starts its own daemon, killed when the test ends.

use std::process::Output;
use std::time::Duration;

use io_engine_tests::daemon::Daemon;
use io_engine_tests::nvmf::nqn_of;
use io_engine_tests::{available_cpus, bin, cpu_mask, run_with_timeout};
use serde_json::Value;

/// Longest a run may take (a 2 s load, setup and the drain included).
const TIMEOUT: Duration = Duration::from_secs(30);

fn start() -> Daemon {
    Daemon::start_quiet([
        "--bdev",
        "malloc:///m0?size_mb=64&blk_size=4096",
        "--share",
        "m0:nvmf",
    ])
}

/// The transport ID of `subnqn` at the daemon's NVMe/TCP listener.
fn target(d: &Daemon, subnqn: &str) -> String {
    let addr = d.nvmf_addr();
    format!(
        "trtype:TCP adrfam:IPv4 traddr:{} trsvcid:{} subnqn:{subnqn}",
        addr.ip(),
        addr.port()
    )
}

/// A core mask for the workers: the CPU after the daemon's when there is
/// one.
fn worker_mask() -> String {
    let cpus = available_cpus();
    cpu_mask(&[*cpus.get(1).unwrap_or(&cpus[0])])
}

fn nvmf_perf(args: &[&str]) -> Output {
    run_with_timeout(bin("nvmf-perf"), args, TIMEOUT)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs nvmf-perf with `args` on [`worker_mask`] against subsystem
/// `subnqn` of a daemon of its own.
fn against(subnqn: &str, args: &[&str]) -> Output {
    let d = start();
    let (r, mask) = (target(&d, subnqn), worker_mask());
    let mut args = args.to_vec();
    args.extend(["-c", &mask, "-r", &r]);
    nvmf_perf(&args)
}

/// Runs with `--json` against `m0`, expects status 0 and returns the
/// report.
fn run_json(args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let out = against(&nqn_of("m0"), &args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(0),
        "nvmf-perf {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{stdout}"))
}

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not an unsigned integer in {v}"))
}

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

/// A verified run's report: IO done on every connection, none failed,
/// reads checked and all matching, the percentiles in order.
fn assert_verified(report: &Value, connections: usize) {
    let conns = report["connections"].as_array().expect("connections");
    assert_eq!(conns.len(), connections, "{report}");
    for c in conns {
        assert!(u(c, "ios") > 0, "a connection did no IO: {c}");
        assert_eq!(u(c, "failed"), 0, "{c}");
    }
    let t = &report["total"];
    assert!(f(t, "iops") > 0.0, "{t}");
    assert_eq!(u(t, "failed"), 0, "{t}");
    assert_eq!(u(t, "miscompares"), 0, "{t}");
    assert!(u(t, "verified") > 0, "verify checked no read: {t}");
    assert!(t["first_error"].is_null(), "{t}");
    let (p50, p99, p999) = (f(t, "p50_lat_us"), f(t, "p99_lat_us"), f(t, "p99_9_lat_us"));
    assert!(0.0 < p50 && p50 <= p99 && p99 <= p999, "{t}");
    assert!(
        f(t, "min_lat_us") <= p50 && p999 <= f(t, "max_lat_us") * 1.04,
        "{t}"
    );
}

#[test]
fn randrw_with_verify_over_two_connections() {
    let report = run_json(&[
        "-q", "16", "-o", "4k", "-w", "randrw", "-t", "2", "-P", "2", "-y",
    ]);
    assert_verified(&report, 2);
    assert_eq!(report["config"]["header_digest"], false);
}

#[test]
fn randrw_with_verify_and_digests() {
    let report = run_json(&[
        "-q", "16", "-o", "4k", "-w", "randrw", "-t", "2", "-P", "2", "-y", "-H", "-I",
    ]);
    assert_verified(&report, 2);
    assert_eq!(report["config"]["header_digest"], true);
    assert_eq!(report["config"]["data_digest"], true);
}

#[test]
fn writes_beyond_the_capsule_go_by_r2t_and_verify() {
    // 64 KiB is beyond the target's 8 KiB of in-capsule data.
    let report = run_json(&[
        "-q", "8", "-o", "64k", "-w", "randrw", "-t", "1", "-y", "-I",
    ]);
    assert_verified(&report, 1);
}

#[test]
fn copies_run_and_their_data_is_read_back_and_checked() {
    let report = run_json(&["-q", "8", "-o", "64k", "-w", "copy", "-t", "2", "-y"]);
    assert_verified(&report, 1);
}

#[test]
fn the_table_names_every_connection_and_the_total() {
    let out = against(
        &nqn_of("m0"),
        &[
            "-q", "4", "-o", "4k", "-w", "randread", "-t", "1", "-P", "2",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("Device Information"), "{stdout}");
    assert_eq!(
        stdout.matches(" qid ").count(),
        4,
        "two rows in each table: {stdout}"
    );
    assert!(stdout.contains("p99.9"), "{stdout}");
    assert!(stdout.contains("failed: 0"), "{stdout}");
}

/// Status 2 and exactly one line on stderr containing `want`.
fn assert_one_line_error(out: &Output, want: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
    assert!(stderr.starts_with("nvmf-perf: error: "), "{stderr}");
    assert!(stderr.contains(want), "{want:?} in:\n{stderr}");
}

#[test]
fn a_wrong_subsystem_nqn_is_one_line_and_status_2() {
    let out = against(
        &nqn_of("nope"),
        &["-q", "1", "-o", "4k", "-w", "randread", "-t", "1"],
    );
    assert_one_line_error(&out, "refused");
    assert_one_line_error(&out, &nqn_of("nope"));
}

#[test]
fn copies_beyond_the_target_limits_are_refused() {
    // The target advertises MSSRL 256 blocks: 1 MiB of 4 KiB blocks.
    let out = against(
        &nqn_of("m0"),
        &["-q", "4", "-o", "2m", "-w", "copy", "-t", "1"],
    );
    assert_one_line_error(&out, "exceeds the target's limits");
}

#[test]
fn usage_errors_are_status_2() {
    let out = nvmf_perf(&[
        "-q",
        "1",
        "-o",
        "4k",
        "-w",
        "randread",
        "-t",
        "1",
        "-r",
        "trtype:RDMA traddr:127.0.0.1 subnqn:x",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("only TCP"),
        "{}",
        text(&out.stderr)
    );
    let out = nvmf_perf(&[
        "-q",
        "1",
        "-o",
        "4k",
        "-w",
        "randwrite",
        "-y",
        "-t",
        "1",
        "-r",
        "trtype:TCP traddr:127.0.0.1 subnqn:x",
    ]);
    assert_one_line_error(&out, "reads nothing");
}
