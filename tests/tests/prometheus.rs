//! The daemon's metrics, read by the real Prometheus server (Debian package
//! `prometheus`, which also provides `promtool`): Prometheus scrapes the
//! daemon every second (asking for gzip, as it always does) and its query
//! API must return the device's size, the build info, the IO counters and
//! the process's own metrics; `promtool check metrics` must accept the
//! exposition. A 100-device scrape stays within its series and size
//! budget, plain and through `curl --compressed`. Prometheus's quantiles
//! of the NBD read durations during one fio run are compared with fio's
//! own (see that test for what each measures); a busy-polling reactor shows as one core in
//! `process_cpu_seconds_total`, to the clock tick.
//!
//! Both processes listen on 127.0.0.1 only and are killed when the test
//! ends, passed or failed; every wait is bounded. The tests run one at a
//! time ([`one_at_a_time`]): two of them measure CPU time and latency, which
//! another test's busy-polling reactor on the same CPU would distort.

use std::io::Write;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use io_engine_api::v1 as pb;
use io_engine_tests::backing::Scratch;
use io_engine_tests::daemon::Daemon;
use io_engine_tests::prometheus::{Prometheus, run_perf, value};
use io_engine_tests::tools::{TempDir, system_tool};
use io_engine_tests::{available_cpus, http, output_with_input};
use serde_json::Value;

/// Serializes this file's tests (see the module's comment); a test that
/// failed holding it leaves it usable.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Longest a `promtool` run may take.
const PROMTOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// The device the daemon serves: 24 MiB in 4 KiB blocks.
const DEVICE_URI: &str = "malloc:///prom0?size_mb=24&blk_size=4096";
const DEVICE_SIZE: u64 = 24 << 20;

/// Runs `promtool check metrics` on `body` (stdin); returns whether it
/// passed and what it said.
fn promtool_check(body: &[u8]) -> (bool, String) {
    let mut cmd = Command::new("promtool");
    cmd.args(["check", "metrics"]);
    let out = output_with_input(cmd, Some(body.to_vec()), PROMTOOL_TIMEOUT);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// `GET /metrics` of the daemon: status 200, the text format's content type.
fn scrape(d: &Daemon) -> Vec<u8> {
    let resp = http::get(&d.metrics_url()).expect("GET /metrics");
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    resp.body
}

#[test]
fn promtool_accepts_the_exposition_idle_and_after_io() {
    let _serial = one_at_a_time();
    // promtool itself must reject a broken exposition, or its verdict below
    // would mean nothing.
    let (ok, said) = promtool_check(b"io_engine_broken{bdev=\"x\" 1\n");
    assert!(!ok, "promtool accepted a broken exposition: {said}");

    let d = Daemon::start_quiet(["--bdev", DEVICE_URI]);
    let (ok, said) = promtool_check(&scrape(&d));
    assert!(ok, "promtool check metrics (idle): {said}");

    // With IO done the histograms have samples in their buckets.
    let ios = run_perf(&d, "prom0", "randwrite", 0.3);
    let body = scrape(&d);
    let text = String::from_utf8_lossy(&body);
    let count =
        format!("io_engine_bdev_io_latency_seconds_count{{bdev=\"prom0\",op=\"write\"}} {ios}");
    assert!(text.lines().any(|l| l == count), "no {count:?} in:\n{text}");
    // Cumulative buckets, the last one `+Inf` (as the text format spells
    // it) holding every IO.
    let prefix = "io_engine_bdev_io_latency_seconds_bucket{bdev=\"prom0\",op=\"write\",le=\"";
    let buckets: Vec<(&str, u64)> = text
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|rest| {
            let (le, n) = rest.split_once("\"} ").expect("a bucket line");
            (le, n.parse().expect("a bucket count"))
        })
        .collect();
    assert!(buckets.len() > 2, "{text}");
    assert!(
        buckets.windows(2).all(|w| w[0].1 <= w[1].1),
        "not cumulative: {buckets:?}"
    );
    assert_eq!(buckets.last(), Some(&("+Inf", ios)), "{buckets:?}");
    let (ok, said) = promtool_check(&body);
    assert!(ok, "promtool check metrics (after IO): {said}");
}

#[test]
fn prometheus_scrapes_the_daemon() {
    let _serial = one_at_a_time();
    let d = Daemon::start_quiet(["--bdev", DEVICE_URI]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // IO before Prometheus starts: its first scrape sees the final counts.
    let writes = run_perf(&d, "prom0", "randwrite", 0.3);
    let revision = runtime.block_on(async {
        let mut engine = pb::engine_service_client::EngineServiceClient::new(d.channel().await);
        engine
            .get_info(pb::GetInfoRequest {})
            .await
            .expect("GetInfo")
            .into_inner()
            .git_revision
    });

    let dir = TempDir::new("prometheus");
    let targets = format!("      - targets: ['{}']", d.metrics_addr());
    let mut prom = Prometheus::start(dir.path(), |_| {
        [
            "global:",
            "  scrape_interval: 1s",
            "  scrape_timeout: 1s",
            "  evaluation_interval: 1s",
            "scrape_configs:",
            "  - job_name: io-engine",
            "    static_configs:",
            &targets,
            "",
        ]
        .join("\n")
    });
    let instance = d.metrics_addr().to_string();

    // The device's size, with its labels.
    let result = prom.query_until("io_engine_bdev_size_bytes", |r| {
        r.iter().any(|s| s["metric"]["bdev"] == "prom0")
    });
    assert_eq!(result.len(), 1, "one device, one series: {result:?}");
    let series = &result[0];
    assert_eq!(value(series), DEVICE_SIZE as f64, "{series}");
    let labels = &series["metric"];
    assert_eq!(labels["product"], "malloc", "{series}");
    assert_eq!(labels["job"], "io-engine", "{series}");
    assert_eq!(labels["instance"], instance.as_str(), "{series}");

    // The scrape itself is healthy.
    let up = prom.query_until("up{job=\"io-engine\"}", |r| !r.is_empty());
    assert_eq!(value(&up[0]), 1.0, "{up:?}");

    // The build, as the daemon reports it over gRPC.
    let result = prom.query_until("io_engine_build_info", |r| !r.is_empty());
    assert_eq!(result.len(), 1, "{result:?}");
    let build = &result[0];
    assert_eq!(value(build), 1.0, "{build}");
    assert_eq!(
        build["metric"]["version"],
        env!("CARGO_PKG_VERSION"),
        "{build}"
    );
    assert_eq!(build["metric"]["revision"], revision.as_str(), "{build}");

    // The IO counters: exactly what the perf run did.
    let query = "io_engine_bdev_ops_total{bdev=\"prom0\",op=\"write\"}";
    let ops = prom.query_until(query, |r| !r.is_empty());
    assert_eq!(value(&ops[0]), writes as f64, "{ops:?}");
    let query = "io_engine_bdev_bytes_total{bdev=\"prom0\",op=\"write\"}";
    let bytes = prom.query_until(query, |r| !r.is_empty());
    assert_eq!(value(&bytes[0]), (writes * 4096) as f64, "{bytes:?}");
    let query = "io_engine_bdev_ops_total{bdev=\"prom0\",op=\"read\"}";
    let reads = prom.query_until(query, |r| !r.is_empty());
    assert_eq!(value(&reads[0]), 0.0, "{reads:?}");

    // The latency histogram is one Prometheus understands: a median of the
    // writes that is positive and finite.
    let query = "histogram_quantile(0.5, io_engine_bdev_io_latency_seconds_bucket\
                 {bdev=\"prom0\",op=\"write\"})";
    let median = prom.query_until(query, |r| !r.is_empty());
    let m = value(&median[0]);
    assert!(m > 0.0 && m < 1.0, "median write latency {m} s: {median:?}");

    // The IO object pool, idle again after the run.
    let capacity = prom.query_until("io_engine_pool_capacity{pool=\"bdev_io\"}", |r| {
        !r.is_empty()
    });
    assert_eq!(value(&capacity[0]), 65535.0, "{capacity:?}");
    let in_use = prom.query_until("io_engine_pool_in_use{pool=\"bdev_io\"}", |r| !r.is_empty());
    assert_eq!(value(&in_use[0]), 0.0, "{in_use:?}");

    // A reactor series per core.
    let busy = prom.query_until("io_engine_reactor_busy_seconds_total", |r| !r.is_empty());
    assert_eq!(busy.len(), 1, "one reactor: {busy:?}");
    assert_eq!(busy[0]["metric"]["core"], "0", "{busy:?}");

    // The process's own metrics, under the names every client library uses.
    let rss = prom.query_until("process_resident_memory_bytes{job=\"io-engine\"}", |r| {
        !r.is_empty()
    });
    assert!(value(&rss[0]) > 1e6, "{rss:?}");
    let fds = prom.query_until("process_open_fds{job=\"io-engine\"}", |r| !r.is_empty());
    assert!(value(&fds[0]) >= 3.0, "{fds:?}");
    let start = prom.query_until("process_start_time_seconds{job=\"io-engine\"}", |r| {
        !r.is_empty()
    });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    let started = value(&start[0]);
    assert!(now - started < 600.0 && started <= now + 1.0, "{start:?}");
    for name in [
        "process_cpu_seconds_total",
        "process_virtual_memory_bytes",
        "process_max_fds",
        "process_threads",
    ] {
        let r = prom.query_until(name, |r| !r.is_empty());
        assert!(value(&r[0]) >= 0.0, "{name}: {r:?}");
    }
}

/// Samples (lines that are not comments) of `text` whose labels include
/// `label`.
fn samples_with(text: &str, label: &str) -> usize {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains(label))
        .count()
}

#[test]
fn a_100_device_scrape_stays_within_60_series_a_device_and_400_kb() {
    let _serial = one_at_a_time();
    let mut args = Vec::new();
    for i in 0..100 {
        args.push("--bdev".to_string());
        args.push(format!("null:///n{i}?size_mb=64"));
    }
    let d = Daemon::start_quiet(args);

    // An idle device: its counters, the read and write histograms at 0.
    let body = scrape(&d);
    let text = String::from_utf8(body.clone()).expect("UTF-8");
    for i in 0..100 {
        let n = samples_with(&text, &format!("bdev=\"n{i}\""));
        assert_eq!(n, 47, "n{i}: {n} series");
    }
    let samples = text.lines().filter(|l| !l.starts_with('#')).count();
    assert!(
        body.len() < 400_000,
        "a 100-device scrape is {} bytes ({samples} samples)",
        body.len()
    );

    // A device that reads and writes: at most 60.
    for workload in ["randwrite", "randread"] {
        run_perf(&d, "n7", workload, 0.1);
    }
    let text = String::from_utf8(scrape(&d)).expect("UTF-8");
    let n = samples_with(&text, "bdev=\"n7\"");
    assert!(
        (47..=60).contains(&n),
        "n7 after reads and writes: {n} series"
    );
    let (ok, said) = promtool_check(text.as_bytes());
    assert!(ok, "promtool check metrics (100 devices): {said}");

    // A real client that asks for gzip gets it, and the same metrics.
    let dir = TempDir::new("gzip-scrape");
    let (out_file, head_file) = (dir.path().join("body"), dir.path().join("head"));
    let mut curl = Command::new("curl");
    curl.args(["-sS", "--compressed", "-o"])
        .arg(&out_file)
        .arg("-D")
        .arg(&head_file)
        .args(["-w", "%{size_download}", &d.metrics_url()]);
    let out = output_with_input(curl, None, PROMTOOL_TIMEOUT);
    assert!(out.status.success(), "{out:?}");
    let downloaded: usize = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("curl's size_download");
    let head = std::fs::read_to_string(&head_file).expect("the headers");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(head.contains("vary: accept-encoding"), "{head}");
    let unzipped = std::fs::read_to_string(&out_file).expect("the body");
    assert_eq!(
        unzipped.lines().filter(|l| !l.starts_with('#')).count(),
        text.lines().filter(|l| !l.starts_with('#')).count(),
        "the same samples, compressed or not"
    );
    assert!(
        downloaded * 10 < unzipped.len(),
        "gzip: {downloaded} bytes for {}",
        unzipped.len()
    );
}

/// The quantile test's device: MiB of a file on the work disk.
const BACKING_MIB: u64 = 256;
/// The fio job of the quantile test: 4 KiB random reads, one at a time,
/// for this long.
const FIO_SECONDS: u64 = 5;
/// Longest the fio run may take (start, the run, the report).
const FIO_TIMEOUT: Duration = Duration::from_secs(60);
/// How far Prometheus's quantile may be from fio's.
const QUANTILE_TOLERANCE: f64 = 0.25;

/// A completion-latency percentile of fio's JSON report of reads, in
/// seconds (`clat_ns.percentile["99.000000"]`).
fn fio_clat(read: &Value, percentile: &str) -> f64 {
    read["clat_ns"]["percentile"][percentile]
        .as_f64()
        .unwrap_or_else(|| panic!("no clat percentile {percentile} in {read}"))
        / 1e9
}

#[test]
fn prometheus_quantiles_of_nbd_reads_against_fio() {
    let _serial = one_at_a_time();
    // A device on the work disk (uring, O_DIRECT, every block written so
    // that each read goes to the disk): its latency, not the client's own
    // work, makes most of what fio measures, as with any device that holds
    // data (with a memory device the client's part dominates: see the
    // comment below and docs/metrics.md). The engine's reactor busy-polls
    // its CPU (no sleep to wake from); fio runs on another CPU when there
    // is one. Both see the same requests over loopback TCP.
    let scratch = Scratch::new("prometheus-fio");
    let file = scratch.join("q0.img");
    {
        let mut f = std::fs::File::create(&file).expect("create the backing file");
        let chunk = vec![0xa5u8; 1 << 20];
        for _ in 0..BACKING_MIB {
            f.write_all(&chunk).expect("fill the backing file");
        }
        f.sync_all().expect("sync the backing file");
    }
    let cpus = available_cpus();
    let engine_cpu = cpus[0].to_string();
    let d = Daemon::start([
        "--poll-mode",
        "busy",
        "-l",
        &engine_cpu,
        "--bdev",
        &format!("uring://{}?name=q0&direct=true", file.display()),
        "--share",
        "q0",
    ]);
    let dir = TempDir::new("prometheus-fio");
    let targets = format!("      - targets: ['{}']", d.metrics_addr());
    let mut prom = Prometheus::start(dir.path(), |_| {
        [
            "global:",
            "  scrape_interval: 1s",
            "  scrape_timeout: 1s",
            "scrape_configs:",
            "  - job_name: io-engine",
            "    static_configs:",
            &targets,
            "",
        ]
        .join("\n")
    });
    // Prometheus has the read histogram at 0 before the run starts, so the
    // window below starts from 0.
    let read = "io_engine_nbd_request_duration_seconds_count{export=\"q0\",cmd=\"read\"}";
    prom.query_until(read, |r| r.len() == 1 && value(&r[0]) == 0.0);

    let started = Instant::now();
    let mut fio = Command::new(system_tool("fio", "fio"));
    fio.args([
        "--name=qd1",
        "--ioengine=nbd",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=1",
        &format!("--size={BACKING_MIB}M"),
        "--time_based",
        &format!("--runtime={FIO_SECONDS}"),
        "--output-format=json",
        &format!("--uri={}", d.nbd_uri("q0")),
    ]);
    if let Some(cpu) = cpus.get(1) {
        fio.arg(format!("--cpus_allowed={cpu}"));
    }
    let out = output_with_input(fio, None, FIO_TIMEOUT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "fio failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&stdout[stdout.find('{').unwrap_or(0)..])
        .unwrap_or_else(|e| panic!("fio's JSON ({e}): {stdout}"));
    let job = &report["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    let reads = job["read"]["total_ios"].as_u64().expect("fio's total_ios");
    assert!(reads > 1000, "{reads} reads in {FIO_SECONDS} s: {job}");

    // Prometheus has scraped every read (fio's only requests).
    prom.query_until(read, |r| r.len() == 1 && value(&r[0]) >= reads as f64);
    // A window from before the run to now: the run's reads, all of them.
    let window = started.elapsed().as_secs() + 3;
    let quantile = |prom: &mut Prometheus, q: f64| {
        let query = format!(
            "histogram_quantile({q}, rate(io_engine_nbd_request_duration_seconds_bucket\
             {{export=\"q0\",cmd=\"read\"}}[{window}s]))"
        );
        value(&prom.query_until(&query, |r| r.len() == 1)[0])
    };
    let (prom_p50, prom_p99) = (quantile(&mut prom, 0.5), quantile(&mut prom, 0.99));
    let mean = "rate(io_engine_nbd_request_duration_seconds_sum{cmd=\"read\"}[1h]) \
                / rate(io_engine_nbd_request_duration_seconds_count{cmd=\"read\"}[1h])";
    let prom_mean = value(&prom.query_until(mean, |r| r.len() == 1)[0]);
    let fio_read = &job["read"];
    let (fio_p50, fio_p99) = (
        fio_clat(fio_read, "50.000000"),
        fio_clat(fio_read, "99.000000"),
    );
    let fio_mean = fio_read["clat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1e9;
    let figures = format!(
        "{reads} reads; fio clat p50 {:.1} us, p99 {:.1} us, mean {:.1} us; \
         Prometheus p50 {:.1} us, p99 {:.1} us, mean {:.1} us",
        fio_p50 * 1e6,
        fio_p99 * 1e6,
        fio_mean * 1e6,
        prom_p50 * 1e6,
        prom_p99 * 1e6,
        prom_mean * 1e6,
    );
    eprintln!("{figures}");
    // What each side measures: fio's clat runs from the request sent to the
    // reply seen by fio; the engine's duration from the request read to the
    // reply written, inside it. The difference is the client's own part
    // (its wake-up from poll(), libnbd, fio's accounting), some 17 us at
    // the median here: next to a disk read it is small, next to a memory
    // device's 8 us it is most of fio's figure (docs/metrics.md has both).
    // 8x-apart bounds read a p99 of 253 us for fio's 104 us.
    for (what, prom, fio) in [("p50", prom_p50, fio_p50), ("p99", prom_p99, fio_p99)] {
        assert!(
            (prom - fio).abs() <= fio * QUANTILE_TOLERANCE,
            "{what}: Prometheus {:.1} us, fio {:.1} us: {figures}",
            prom * 1e6,
            fio * 1e6,
        );
    }
    // The engine's exact mean (no buckets) sits inside the client's.
    assert!(prom_mean <= fio_mean, "{figures}");
    // Each quantile was interpolated between bounds at most 2x apart, so it
    // is off the engine's own by less than its bucket's width.
    let buckets = prom.query_until(
        "io_engine_nbd_request_duration_seconds_bucket{export=\"q0\",cmd=\"read\"}",
        |r| !r.is_empty(),
    );
    let les: Vec<f64> = buckets
        .iter()
        .filter_map(|b| b["metric"]["le"].as_str()?.parse().ok())
        .collect();
    for (what, q) in [("p50", prom_p50), ("p99", prom_p99)] {
        let below = les.iter().copied().filter(|&le| le < q).fold(0.0, f64::max);
        let above = les
            .iter()
            .copied()
            .filter(|&le| le >= q)
            .fold(f64::INFINITY, f64::min);
        assert!(
            below > 0.0 && above <= 2.0 * below,
            "{what} {q} s interpolated in ({below}, {above}]: {les:?}"
        );
    }
}

/// `process_cpu_seconds_total` in one scrape of the daemon.
fn cpu_seconds(d: &Daemon) -> f64 {
    let text = http::get(&d.metrics_url()).expect("GET /metrics").text();
    text.lines()
        .find_map(|l| l.strip_prefix("process_cpu_seconds_total "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no process_cpu_seconds_total in:\n{text}"))
}

#[test]
fn a_busy_polling_reactor_counts_as_one_core_to_the_tick() {
    let _serial = one_at_a_time();
    let cpu = available_cpus()[0].to_string();
    let d = Daemon::start(["--poll-mode", "busy", "-l", &cpu]);
    // Readings 250 ms apart for 3 s: the counter must follow a quarter of
    // a core-second, not move in whole seconds.
    let first = (Instant::now(), cpu_seconds(&d));
    let mut readings = vec![first];
    for _ in 0..12 {
        std::thread::sleep(Duration::from_millis(250));
        readings.push((Instant::now(), cpu_seconds(&d)));
    }
    let last = readings[readings.len() - 1];
    let rate = (last.1 - first.1) / (last.0 - first.0).as_secs_f64();
    let values: Vec<f64> = readings.iter().map(|r| r.1).collect();
    assert!(
        (0.8..=1.3).contains(&rate),
        "{rate:.3} cores over {:?}: {values:?}",
        last.0 - first.0
    );
    // Whole seconds (the prometheus crate's truncation) would make every
    // reading an integer and every step 0 or 1.
    assert!(
        values.iter().any(|v| v.fract() != 0.0),
        "whole seconds only: {values:?}"
    );
    let quarter_steps = readings
        .windows(2)
        .filter(|w| (0.05..0.75).contains(&(w[1].1 - w[0].1)))
        .count();
    assert!(
        quarter_steps >= readings.len() / 2,
        "steps of a 250 ms interval: {values:?}"
    );
}
