//! End-to-end tests of `bdev-perf`: the release binary run on null and
//! malloc devices, its JSON and table reports checked for consistency, and
//! its usage and setup errors checked for status 2 and a clear message.
//!
//! Runs are short (0.3 to 2.2 s) and use the CPUs this process may run on,
//! so the file passes on any machine with two of them.

use std::collections::BTreeSet;
use std::process::Output;

use io_engine_tests::{available_cpus, bin, cpu_mask, run};
use serde_json::Value;

const NULL: &str = "null:///n0?size_mb=64&blk_size=4096";
const MALLOC: &str = "malloc:///m0?size_mb=16&blk_size=4096";
const MALLOC_512: &str = "malloc:///m0?size_mb=16&blk_size=512";

fn bdev_perf(args: &[&str]) -> Output {
    run(bin("bdev-perf"), args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The first CPU this process may use, as a `-l` argument.
fn one_cpu() -> (u32, String) {
    let cpu = available_cpus()[0];
    (cpu, cpu.to_string())
}

/// The first two CPUs this process may use and their `-m` mask.
fn two_cpus() -> ([u32; 2], String) {
    let cpus = available_cpus();
    assert!(
        cpus.len() >= 2,
        "the multi-core tests need two CPUs; this process may use only {cpus:?}"
    );
    let pair = [cpus[0], cpus[1]];
    (pair, cpu_mask(&pair))
}

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not an unsigned integer in {v}"))
}

fn jobs(report: &Value) -> &Vec<Value> {
    report["jobs"].as_array().expect("jobs is an array")
}

fn assert_close(what: &str, got: f64, want: f64) {
    let tol = 1e-6 * got.abs().max(want.abs()) + 1e-6;
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, expected {want}"
    );
}

/// Runs bdev-perf with `--json`, expects exit status 0 and returns the
/// report after checking that its figures agree with each other.
fn run_json(args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let out = bdev_perf(&args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(0),
        "bdev-perf {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{stdout}"));
    check_figures(&report);
    report
}

/// Every job ran IOs, its rates follow from its counts and its time, and the
/// total is the sum (or the extreme) of the jobs.
fn check_figures(report: &Value) {
    let config = &report["config"];
    let io_size = u(config, "io_size") as f64;
    let seconds = f(config, "seconds");
    let rows = jobs(report);
    assert!(!rows.is_empty(), "no jobs in {report}");
    for job in rows {
        let ios = u(job, "ios");
        assert!(ios > 0, "a job did no IO: {job}");
        let secs = f(job, "seconds");
        // A job stops at the first completion past its deadline.
        assert!(
            secs >= seconds * 0.999 && secs < seconds + 5.0,
            "job ran {secs} s for -t {seconds}: {job}"
        );
        assert_close("iops = ios / seconds", f(job, "iops"), ios as f64 / secs);
        // Every IO, read or write, moves io_size bytes.
        assert_close(
            "mib_s = ios * io_size / seconds",
            f(job, "mib_s"),
            ios as f64 * io_size / secs / (1024.0 * 1024.0),
        );
        let (min, avg, max) = (
            f(job, "min_lat_us"),
            f(job, "avg_lat_us"),
            f(job, "max_lat_us"),
        );
        assert!(
            0.0 <= min && min <= avg * (1.0 + 1e-9) && avg <= max * (1.0 + 1e-9) && max > 0.0,
            "latencies out of order: {job}"
        );
    }
    let total = &report["total"];
    for key in ["core", "cpu", "bdev"] {
        assert!(total.get(key).is_none(), "total has {key}: {total}");
    }
    let sum_u = |key| rows.iter().map(|j| u(j, key)).sum::<u64>();
    let sum_f = |key| rows.iter().map(|j| f(j, key)).sum::<f64>();
    let max_f = |key| rows.iter().map(|j| f(j, key)).fold(0.0, f64::max);
    assert_eq!(u(total, "ios"), sum_u("ios"), "total ios: {report}");
    assert_eq!(
        u(total, "failed"),
        sum_u("failed"),
        "total failed: {report}"
    );
    assert_eq!(
        u(total, "miscompares"),
        sum_u("miscompares"),
        "total miscompares: {report}"
    );
    assert_close("total iops", f(total, "iops"), sum_f("iops"));
    assert_close("total mib_s", f(total, "mib_s"), sum_f("mib_s"));
    assert_close("total seconds", f(total, "seconds"), max_f("seconds"));
    assert_close(
        "total max_lat_us",
        f(total, "max_lat_us"),
        max_f("max_lat_us"),
    );
    let min_lat = rows
        .iter()
        .map(|j| f(j, "min_lat_us"))
        .fold(f64::INFINITY, f64::min);
    assert_close("total min_lat_us", f(total, "min_lat_us"), min_lat);
    let weighted = rows
        .iter()
        .map(|j| f(j, "avg_lat_us") * u(j, "ios") as f64)
        .sum::<f64>()
        / u(total, "ios") as f64;
    assert_close("total avg_lat_us", f(total, "avg_lat_us"), weighted);
}

/// No IO failed or miscompared, in any job or in the total.
fn assert_clean(report: &Value) {
    for row in jobs(report).iter().chain([&report["total"]]) {
        assert_eq!(u(row, "failed"), 0, "failed IOs: {report}");
        assert_eq!(u(row, "miscompares"), 0, "miscompares: {report}");
    }
}

/// Expects a setup error: status 2, nothing on stdout, and exactly one
/// `bdev-perf: error:` line on stderr containing every keyword.
fn expect_setup_error(args: &[&str], keywords: &[&str]) {
    let out = bdev_perf(args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(2),
        "bdev-perf {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.is_empty(), "bdev-perf {args:?} printed:\n{stdout}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("bdev-perf: error: "))
        .collect();
    assert_eq!(errors.len(), 1, "bdev-perf {args:?}: stderr:\n{stderr}");
    for k in keywords {
        assert!(
            errors[0].to_lowercase().contains(&k.to_lowercase()),
            "bdev-perf {args:?}: the error does not mention {k:?}: {}",
            errors[0]
        );
    }
}

/// Expects an argument error from the parser: status 2, nothing on stdout,
/// stderr starting with `error:` and containing every keyword.
fn expect_usage_error(args: &[&str], keywords: &[&str]) {
    let out = bdev_perf(args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(2),
        "bdev-perf {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.is_empty(), "bdev-perf {args:?} printed:\n{stdout}");
    assert!(
        stderr.starts_with("error: "),
        "bdev-perf {args:?}: stderr:\n{stderr}"
    );
    for k in keywords {
        assert!(
            stderr.contains(k),
            "bdev-perf {args:?}: the error does not mention {k:?}:\n{stderr}"
        );
    }
}

#[test]
fn null_randread_on_one_core_reports_json() {
    let (cpu, list) = one_cpu();
    let report = run_json(&[
        "-l", &list, "-q", "16", "-o", "8k", "-w", "randread", "-t", "0.5", "--bdev", NULL,
    ]);
    assert_clean(&report);
    let total = &report["total"];
    assert!(f(total, "iops") > 0.0, "{report}");
    let rows = jobs(&report);
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(u(&rows[0], "core"), 0);
    assert_eq!(
        u(&rows[0], "cpu"),
        cpu as u64,
        "the reactor runs on CPU {cpu}"
    );
    assert_eq!(rows[0]["bdev"], "n0");
    assert_eq!(u(total, "ios"), u(&rows[0], "ios"));

    let config = &report["config"];
    assert_eq!(config["cores"], list.as_str());
    assert_eq!(config["workload"], "randread");
    assert_eq!(u(config, "io_size"), 8192, "8k is 8192 bytes");
    assert_eq!(u(config, "queue_depth"), 16);
    assert_close("config seconds", f(config, "seconds"), 0.5);
    assert_eq!(config["verify"], false);
    assert_eq!(config["bdevs"], serde_json::json!([NULL]));
    assert!(
        config.get("read_percent").is_none(),
        "read_percent is for randrw only: {config}"
    );
}

#[test]
fn json_mode_sends_progress_to_stderr() {
    let (_, list) = one_cpu();
    let out = bdev_perf(&[
        "-l", &list, "-w", "randread", "-t", "1.2", "--json", "--bdev", NULL,
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    // The whole of stdout is the report, with no progress line mixed in.
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{stdout}"));
    check_figures(&report);
    let progress: Vec<&str> = stderr
        .lines()
        .filter(|l| l.trim_start().starts_with("1 s:"))
        .collect();
    assert_eq!(progress.len(), 1, "one progress line after 1 s:\n{stderr}");
    assert!(
        progress[0].contains("IOPS") && progress[0].contains("MiB/s"),
        "{}",
        progress[0]
    );
}

#[test]
fn two_cores_drive_every_device() {
    let (cpus, mask) = two_cpus();
    let report = run_json(&[
        "-m", &mask, "-w", "randrw", "-M", "70", "-t", "0.5", "--bdev", NULL, "--bdev", MALLOC,
    ]);
    assert_clean(&report);
    let rows = jobs(&report);
    assert_eq!(rows.len(), 4, "one job per core and device: {report}");
    let pairs: BTreeSet<(u64, String)> = rows
        .iter()
        .map(|j| (u(j, "core"), j["bdev"].as_str().unwrap().to_string()))
        .collect();
    let want: BTreeSet<(u64, String)> = [(0, "m0"), (0, "n0"), (1, "m0"), (1, "n0")]
        .into_iter()
        .map(|(c, b)| (c, b.to_string()))
        .collect();
    assert_eq!(pairs, want, "{report}");
    for job in rows {
        let core = u(job, "core") as usize;
        assert_eq!(u(job, "cpu"), cpus[core] as u64, "core {core}'s CPU: {job}");
    }
    let config = &report["config"];
    let cores = config["cores"].as_str().unwrap();
    assert!(
        [
            format!("{}-{}", cpus[0], cpus[1]),
            format!("{},{}", cpus[0], cpus[1])
        ]
        .iter()
        .any(|c| c == cores),
        "cores {cores:?} for {mask}"
    );
    assert_eq!(u(config, "read_percent"), 70);
    assert_eq!(config["bdevs"], serde_json::json!([NULL, MALLOC]));
}

/// Runs a verified workload and checks that every write was read back intact.
fn verified(args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("-y");
    let report = run_json(&args);
    assert_clean(&report);
    assert_eq!(report["config"]["verify"], true);
    for job in jobs(&report) {
        // Each write is followed by its read-back, so IOs come in pairs.
        assert_eq!(u(job, "ios") % 2, 0, "a write was not read back: {job}");
    }
    report
}

#[test]
fn verify_on_malloc_finds_no_miscompare() {
    let (_, list) = one_cpu();
    for workload in ["randwrite", "randrw", "read", "write"] {
        let report = verified(&["-l", &list, "-w", workload, "-t", "0.3", "--bdev", MALLOC]);
        assert_eq!(report["config"]["workload"], workload);
    }
}

#[test]
fn verify_with_512_byte_blocks() {
    let (_, list) = one_cpu();
    let small = verified(&[
        "-l", &list, "-w", "randrw", "-o", "512", "-t", "0.3", "--bdev", MALLOC_512,
    ]);
    assert_eq!(u(&small["config"], "io_size"), 512);
    // Two cores share the device: each IO in flight gets its own blocks.
    let (_, mask) = two_cpus();
    let large = verified(&[
        "-m", &mask, "-w", "randrw", "-o", "64k", "-t", "0.3", "--bdev", MALLOC_512,
    ]);
    assert_eq!(u(&large["config"], "io_size"), 65536);
    assert_eq!(jobs(&large).len(), 2);
}

#[test]
fn verify_refuses_a_null_device() {
    let (_, list) = one_cpu();
    expect_setup_error(
        &[
            "-l",
            &list,
            "-w",
            "randwrite",
            "-y",
            "-t",
            "0.3",
            "--bdev",
            NULL,
        ],
        &["n0", "discards writes"],
    );
}

#[test]
fn verify_refuses_a_device_too_small_for_the_queue() {
    // 1 MiB holds 16 IOs of 64 KiB, fewer than the 32 in flight.
    let (_, list) = one_cpu();
    expect_setup_error(
        &[
            "-l",
            &list,
            "-w",
            "randwrite",
            "-y",
            "-o",
            "64k",
            "-q",
            "32",
            "-t",
            "0.3",
            "--bdev",
            "malloc:///small?size_mb=1",
        ],
        &["small", "at least 32"],
    );
}

/// Splits a table row into its whitespace-separated cells.
fn cells(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

fn number(cell: &str, line: &str) -> f64 {
    cell.parse()
        .unwrap_or_else(|_| panic!("{cell:?} is not a number in {line:?}"))
}

#[test]
fn table_output_has_config_progress_and_totals() {
    let (cpu, list) = one_cpu();
    let out = bdev_perf(&[
        "-l", &list, "-w", "randread", "-q", "8", "-t", "2.2", "--bdev", NULL, "--bdev", MALLOC,
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let has = |want: &str| lines.iter().any(|l| l.trim() == want);

    assert!(has("bdev-perf configuration:"), "{stdout}");
    assert!(has(&format!("cores:        {cpu}")), "{stdout}");
    assert!(has("queue depth:  8 per core and device"), "{stdout}");
    assert!(has(&format!("device:       {NULL}")), "{stdout}");
    assert!(has(&format!("device:       {MALLOC}")), "{stdout}");

    // One progress line per whole second: 1 s and 2 s, not 3 s.
    let progress: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains(" s: ") && l.contains("IOPS"))
        .collect();
    let seconds: Vec<&str> = progress.iter().map(|l| cells(l)[0]).collect();
    assert_eq!(seconds, ["1", "2"], "progress lines:\n{stdout}");
    for line in &progress {
        let c = cells(line);
        assert_eq!(c.len(), 6, "{line}");
        assert_eq!([c[1], c[3], c[5]], ["s:", "IOPS", "MiB/s"], "{line}");
        assert!(number(c[2], line) > 0.0, "no IO in a second: {line}");
        assert!(number(c[4], line) > 0.0, "no data in a second: {line}");
    }
    assert!(
        !stderr.contains(" s: "),
        "progress belongs on stdout without --json:\n{stderr}"
    );

    let header = lines
        .iter()
        .position(|l| l.contains("IOPS") && l.contains("Avg(us)"))
        .unwrap_or_else(|| panic!("no table header:\n{stdout}"));
    assert_eq!(
        cells(lines[header]),
        [
            "Core", "CPU", "Device", "IOPS", "MiB/s", "Avg(us)", "Min(us)", "Max(us)", "Failed",
            "Miscomp"
        ]
    );
    let mut job_iops = 0.0;
    for (i, dev) in ["n0", "m0"].iter().enumerate() {
        let line = lines[header + 1 + i];
        let c = cells(line);
        assert_eq!(c[..3], ["0", list.as_str(), dev], "{line}");
        let iops = number(c[3], line);
        assert!(iops > 0.0, "{line}");
        assert_eq!(c[8..], ["0", "0"], "no failure or miscompare: {line}");
        job_iops += iops;
    }
    let total = lines
        .iter()
        .find(|l| l.trim_start().starts_with("Total"))
        .unwrap_or_else(|| panic!("no Total row:\n{stdout}"));
    let c = cells(total);
    assert_eq!(c.len(), 8, "Total, 5 figures, failed, miscompares: {total}");
    let total_iops = number(c[1], total);
    // Rows are printed to 0.1 IOPS; the total is their sum.
    assert!(
        (total_iops - job_iops).abs() <= 0.2,
        "total {total_iops} IOPS, jobs {job_iops}"
    );
    assert_eq!(c[6..], ["0", "0"], "{total}");
}

#[test]
fn malformed_or_empty_core_masks_are_refused() {
    let run = ["-w", "read", "-t", "0.3", "--bdev", NULL];
    for (mask, keywords) in [
        ("0x", &["core mask", "hex"][..]),
        ("xyz", &["core mask", "hex"]),
        ("0x0", &["core mask", "no cores"]),
        ("", &["core mask", "empty"]),
    ] {
        let mut args = vec!["-m", mask];
        args.extend(run);
        expect_setup_error(&args, keywords);
    }
    let mut args = vec!["-l", "1-0"];
    args.extend(run);
    expect_setup_error(&args, &["core list", "1-0"]);
}

#[test]
fn mask_and_list_together_are_refused() {
    let (_, list) = one_cpu();
    expect_usage_error(
        &[
            "-m", "0x1", "-l", &list, "-w", "read", "-t", "0.3", "--bdev", NULL,
        ],
        &["--reactor-mask", "--core-list", "cannot be used with"],
    );
}

#[test]
fn unavailable_cores_are_refused() {
    let cpus = available_cpus();
    let missing = (0..).find(|c| !cpus.contains(c)).unwrap();
    let beyond = cpus.iter().max().unwrap() + 1;
    let run = ["-w", "read", "-t", "0.3", "--bdev", NULL];
    let unavailable: BTreeSet<u32> = [missing, beyond, 63]
        .into_iter()
        .filter(|c| !cpus.contains(c))
        .collect();
    assert!(unavailable.contains(&missing) && unavailable.contains(&beyond));
    for cpu in unavailable {
        let core = format!("core {cpu}");
        for selection in [
            ["-l".to_string(), cpu.to_string()],
            ["-m".into(), cpu_mask(&[cpu])],
        ] {
            let mut args: Vec<&str> = selection.iter().map(String::as_str).collect();
            args.extend(run);
            expect_setup_error(&args, &[&core, "not available"]);
        }
    }
}

#[test]
fn bad_device_uris_are_refused() {
    let (_, list) = one_cpu();
    for (uri, keywords) in [
        ("foo:///x?size_mb=1", &["scheme", "foo"][..]),
        ("null:///x?size_mb=1&bogus=3", &["parameter", "bogus"]),
        ("null:///x", &["size"]),
        ("malloc:///x?size_mb=1&blk_size=1000", &["blk_size", "1000"]),
        ("null:///?size_mb=1", &["name"]),
        (
            "null:///x?size_mb=1&num_blocks=8",
            &["size_mb", "num_blocks"],
        ),
    ] {
        expect_setup_error(
            &["-l", &list, "-w", "read", "-t", "0.3", "--bdev", uri],
            keywords,
        );
    }
}

#[test]
fn a_device_name_given_twice_is_refused() {
    let (_, list) = one_cpu();
    let run = [
        "-l", &list, "-w", "read", "-t", "0.3", "--bdev", NULL, "--bdev",
    ];
    for second in [NULL, "malloc:///n0?size_mb=1"] {
        let mut args = run.to_vec();
        args.push(second);
        expect_setup_error(&args, &["n0", "exists"]);
    }
}

#[test]
fn io_size_must_fit_the_device() {
    let (_, list) = one_cpu();
    expect_setup_error(
        &[
            "-l",
            &list,
            "-w",
            "read",
            "-o",
            "1000",
            "-t",
            "0.3",
            "--bdev",
            "null:///x?size_mb=1&blk_size=512",
        ],
        &["1000", "multiple", "512"],
    );
    expect_setup_error(
        &[
            "-l",
            &list,
            "-w",
            "read",
            "-o",
            "2m",
            "-t",
            "0.3",
            "--bdev",
            "null:///x?size_mb=1",
        ],
        &["x", "smaller than one IO"],
    );
}

#[test]
fn bad_numbers_are_refused() {
    let (_, list) = one_cpu();
    for (arg, keywords) in [
        (&["-q", "0"][..], &["--queue-depth", "0"][..]),
        (&["-q", "65537"], &["--queue-depth", "65537"]),
        (&["-t", "0"], &["--time", "0"]),
        (&["--time=-1"], &["--time", "-1"]),
        (&["-t", "nan"], &["--time", "nan"]),
        (&["-t", "1e300"], &["--time", "30 days"]),
        (&["-t", "2592001"], &["--time", "30 days"]),
        (&["-o", "0"], &["--io-size", "0"]),
        (&["-o", "4q"], &["--io-size", "4q"]),
        (&["-M", "101"], &["--rw-mix-read", "101"]),
    ] {
        let mut args = vec!["-l", &list, "-w", "randrw", "--bdev", NULL];
        if !arg[0].starts_with("-t") && !arg[0].starts_with("--time") {
            args.extend(["-t", "0.3"]);
        }
        args.extend(arg);
        expect_usage_error(&args, keywords);
    }
}

#[test]
fn missing_device_is_refused() {
    let (_, list) = one_cpu();
    expect_usage_error(&["-l", &list, "-w", "read", "-t", "0.3"], &["--bdev"]);
}

#[test]
fn unknown_workload_is_refused() {
    let (_, list) = one_cpu();
    expect_usage_error(
        &["-l", &list, "-w", "scramble", "-t", "0.3", "--bdev", NULL],
        &["--workload", "scramble", "randrw"],
    );
}

#[test]
fn io_pool_cache_can_be_disabled() {
    let (_, list) = one_cpu();
    let report = run_json(&[
        "-l",
        &list,
        "-w",
        "randread",
        "-t",
        "0.3",
        "--io-pool-cache",
        "0",
        "--bdev",
        NULL,
    ]);
    assert_clean(&report);
    assert_eq!(u(&report["config"], "io_pool_cache"), 0);
}

#[test]
fn io_pool_too_small_for_its_cache_is_refused() {
    let (_, list) = one_cpu();
    expect_setup_error(
        &[
            "-l",
            &list,
            "-w",
            "randread",
            "-t",
            "0.3",
            "--io-pool-size",
            "100",
            "--io-pool-cache",
            "512",
            "--bdev",
            NULL,
        ],
        &["raise the pool size", "lower the cache"],
    );
}

#[test]
fn a_tiny_io_pool_makes_requests_wait_not_fail() {
    // 16 IO objects for 32 IOs in flight: half the queue waits its turn.
    let (_, list) = one_cpu();
    let report = run_json(&[
        "-l",
        &list,
        "-w",
        "randread",
        "-q",
        "32",
        "-t",
        "0.3",
        "--io-pool-size",
        "16",
        "--io-pool-cache",
        "0",
        "--bdev",
        NULL,
    ]);
    assert_clean(&report);
    assert_eq!(u(&report["config"], "io_pool_size"), 16);

    // Two cores and two devices contend for 4 objects, and the data they
    // move still verifies.
    let (_, mask) = two_cpus();
    let report = verified(&[
        "-m",
        &mask,
        "-w",
        "randrw",
        "-q",
        "32",
        "-t",
        "0.3",
        "--io-pool-size",
        "4",
        "--io-pool-cache",
        "0",
        "--bdev",
        MALLOC,
        "--bdev",
        "malloc:///m1?size_mb=16&blk_size=512",
    ]);
    assert_eq!(jobs(&report).len(), 4);
}
