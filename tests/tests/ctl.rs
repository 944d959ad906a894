//! `io-engine-ctl` against the real daemon for the commands that need one
//! end to end: `config dump` saved to a file and loaded by a second daemon
//! with `--config` (its devices and shares equal the first's), `perf run`
//! (its figures, and the engine's errors as exit status 1), and
//! `--no-headers`. Also `bdev-perf --help`, which opens with the tool's own
//! description.

use io_engine_tests::daemon::Daemon;
use io_engine_tests::tools::TempDir;
use io_engine_tests::{bin, run, u};
use serde_json::Value;

/// Shares `name` over NVMe/TCP with the extra `share` flags.
fn share_nvmf(d: &Daemon, name: &str, extra: &[&str]) {
    d.ctl_ok(&[&["bdev", "share", name, "--protocol", "nvmf"], extra].concat());
}

/// `export list` as JSON without what depends on the daemon's ports and
/// clients: the URI and the connection count.
fn exports_without_addresses(d: &Daemon) -> Value {
    let mut list = d.ctl_json(&["export", "list"]);
    for e in list["exports"].as_array_mut().expect("an exports array") {
        let e = e.as_object_mut().expect("an export object");
        e.remove("uri");
        e.remove("connections");
    }
    list
}

/// Hosts allowed to connect to a share in the config dump test.
const HOST_A: &str = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
const HOST_B: &str = "nqn.2019-05.io.example:host:b";

#[test]
fn config_dump_restores_the_devices_and_shares_in_a_second_daemon() {
    let first = Daemon::start_quiet::<_, &str>([]);
    for uri in [
        "malloc:///m0?size_mb=8&blk_size=4096",
        "null:///n0?size_mb=64",
        "malloc:///m1?num_blocks=4096&blk_size=512&uuid=0f8c3d2e-1a2b-4c3d-8e9f-0a1b2c3d4e5f",
    ] {
        first.ctl_ok(&["bdev", "create", uri]);
    }
    first.ctl_ok(&["bdev", "share", "m0"]);
    share_nvmf(&first, "n0", &["--read-only"]);
    // Allowed hosts are saved too (`:host=`): a restore must not open the
    // share to every host.
    share_nvmf(
        &first,
        "m1",
        &[
            "--nqn",
            "nqn.2019-05.io.example:restored",
            "--allowed-host",
            HOST_A,
            "--allowed-host",
            HOST_B,
        ],
    );
    let dump = first.ctl_ok(&["config", "dump"]);
    assert!(dump.contains("share = [\n  \"m0\",\n"), "{dump}");

    let dir = TempDir::new("ctl-config-dump");
    let file = dir.write("engine.toml", &dump);
    // The test helper gives the second daemon ports of its own.
    let second = Daemon::start_quiet(["--config", &file.display().to_string()]);

    assert_eq!(
        second.ctl_ok(&["bdev", "list"]),
        first.ctl_ok(&["bdev", "list"]),
        "the same devices (uuids included), claimed and shared alike"
    );
    assert_eq!(
        second.ctl_json(&["bdev", "list"])["bdevs"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
    assert_eq!(
        exports_without_addresses(&second),
        exports_without_addresses(&first)
    );
    assert_eq!(
        second
            .ctl_ok(&["config", "dump"])
            .lines()
            .skip(2)
            .collect::<Vec<_>>(),
        dump.lines().skip(2).collect::<Vec<_>>(),
        "the second daemon dumps the same file (but for the endpoint in its comment)"
    );

    let json = first.ctl_json(&["config", "dump"]);
    assert_eq!(
        json["share"],
        serde_json::json!([
            "m0",
            format!("m1:nvmf:nqn=nqn.2019-05.io.example:restored:host={HOST_A}:host={HOST_B}"),
            "n0:nvmf:ro:nqn=nqn.2024-12.io.io-engine:n0",
        ]),
        "{json}"
    );
}

#[test]
fn perf_run_reports_the_engines_figures_and_errors() {
    let d = Daemon::start_quiet(["--bdev", "malloc:///m0?size_mb=16&blk_size=4096"]);
    // bdev-perf's flags: -o is the IO size (the output format is --output,
    // which ctl_json adds), -l the reactors.
    let r = d.ctl_json(&[
        "perf", "run", "-o", "4096", "m0", "-w", "randrw", "-t", "0.3", "-q", "4", "-l", "0",
    ]);
    let total = &r["total"];
    assert!(u(&total["ios"]) > 0, "{r}");
    assert_eq!(u(&total["failed"]), 0, "{r}");
    assert_eq!(r["jobs"][0]["bdev"], "m0", "{r}");
    assert_eq!(r["jobs"][0]["core"], 0, "{r}");
    // The former -s still sets the IO size: 8 KiB IOs move twice the bytes
    // per IO of 4 KiB ones.
    let r8 = d.ctl_json(&["perf", "run", "m0", "-w", "read", "-t", "0.3", "-s", "8k"]);
    let mib_per_io = |r: &Value| {
        r["total"]["mib_s"].as_f64().expect("mib_s") / r["total"]["iops"].as_f64().expect("iops")
    };
    let ratio = mib_per_io(&r8) / mib_per_io(&r);
    assert!(
        (ratio - 2.0).abs() < 0.01,
        "8k/4k bytes per IO {ratio}: {r8} {r}"
    );

    let table = d.ctl_ok(&["perf", "run", "m0", "-w", "read", "-t", "0.2", "-y"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "header, one job, total: {table}");
    assert!(
        lines[0].contains("IOPS") && lines[0].contains("AVG LAT"),
        "{table}"
    );
    assert!(lines[2].starts_with("total"), "{table}");
    assert!(
        lines[2].contains(" µs") || lines[2].contains(" ns") || lines[2].contains(" ms"),
        "latency with its unit: {table}"
    );
    let bare = d.ctl_ok(&[
        "perf",
        "run",
        "m0",
        "-w",
        "write",
        "-t",
        "0.2",
        "--no-headers",
    ]);
    assert_eq!(bare.lines().count(), 2, "{bare}");

    for (args, code) in [
        (
            &["perf", "run", "nope", "-w", "read", "-t", "0.2"][..],
            "NOT_FOUND",
        ),
        (
            &["perf", "run", "m0", "-w", "sideways", "-t", "0.2"],
            "INVALID_ARGUMENT",
        ),
        (
            &["perf", "run", "m0", "-w", "read", "-t", "0.2", "-o", "1000"],
            "INVALID_ARGUMENT",
        ),
    ] {
        let out = d.ctl(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!("io-engine-ctl: error: {code}: ")),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn bdev_perf_help_opens_with_its_own_description() {
    for flag in ["-h", "--help"] {
        let out = run(bin("bdev-perf"), [flag]);
        assert_eq!(out.status.code(), Some(0));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with("Drive block devices at a fixed queue depth from every selected core"),
            "{flag}: {text}"
        );
        assert!(!text.contains("Userspace I/O engine"), "{flag}: {text}");
    }
    let long = run(bin("bdev-perf"), ["--help"]);
    let text = String::from_utf8_lossy(&long.stdout);
    assert!(text.contains("Each core runs one job per device"), "{text}");
}
