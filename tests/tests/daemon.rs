//! End-to-end tests of the `io-engine` daemon: the release binary started on
//! 127.0.0.1 with kernel-chosen ports, driven through its gRPC API (the Rust
//! client) and through `io-engine-ctl`.
//!
//! Every test starts its own daemon (adaptive polling on one core, so
//! parallel tests do not spin every CPU); [`Daemon`] kills it when the test
//! ends, passed or failed. Every call is bounded: gRPC requests by a
//! deadline, CLI runs and daemon exits by a timeout.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use io_engine_api::v1 as pb;
use io_engine_tests::daemon::{Daemon, quiet_args, run_daemon_to_exit};
use io_engine_tests::http::sample;
use io_engine_tests::{accel_op, available_cpus, http, u};
use pb::bdev_service_client::BdevServiceClient;
use pb::perf_service_client::PerfServiceClient;
use pb::stats_service_client::StatsServiceClient;
use rustix::process::Signal;
use serde_json::Value;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The version every binary of the workspace reports.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Longest wait for a condition polled over gRPC (IO flowing, a device open).
const POLL_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

async fn bdev_client(d: &Daemon) -> BdevServiceClient<Channel> {
    BdevServiceClient::new(d.channel().await)
}

async fn stats_client(d: &Daemon) -> StatsServiceClient<Channel> {
    StatsServiceClient::new(d.channel().await)
}

async fn perf_client(d: &Daemon) -> PerfServiceClient<Channel> {
    PerfServiceClient::new(d.channel().await)
}

/// A perf request on `bdevs` with 4 KiB IOs at queue depth 8.
fn perf_request(bdevs: &[&str], workload: &str, seconds: f64) -> pb::RunPerfRequest {
    pb::RunPerfRequest {
        bdevs: bdevs.iter().map(|b| (*b).to_owned()).collect(),
        workload: workload.into(),
        io_size: 4096,
        queue_depth: 8,
        seconds,
        ..Default::default()
    }
}

/// Runs a perf job and returns its answer; every job must have done IO
/// without failures.
async fn run_perf(d: &Daemon, req: pb::RunPerfRequest) -> pb::RunPerfResponse {
    let shown = format!("{req:?}");
    let resp = perf_client(d)
        .await
        .run(req)
        .await
        .unwrap_or_else(|s| panic!("PerfService.Run {shown}: {s:?}"))
        .into_inner();
    for job in &resp.jobs {
        assert!(job.ios > 0, "{shown}: a job did no IO: {resp:?}");
        assert_eq!(job.failed, 0, "{shown}: {resp:?}");
    }
    resp
}

/// The names of every device; panics if List fails (the daemon must serve).
async fn names(bdev: &mut BdevServiceClient<Channel>) -> Vec<String> {
    bdev.list(pb::ListBdevsRequest {})
        .await
        .expect("BdevService.List must succeed")
        .into_inner()
        .bdevs
        .into_iter()
        .map(|b| b.name)
        .collect()
}

/// Asserts that `result` failed with `code` and returns the status.
fn expect_code<T: Debug>(
    what: &str,
    result: Result<tonic::Response<T>, Status>,
    code: Code,
) -> Status {
    match result {
        Ok(r) => panic!(
            "{what}: expected {code:?}, got success: {:?}",
            r.into_inner()
        ),
        Err(status) => {
            assert_eq!(status.code(), code, "{what}: {status:?}");
            assert!(
                !status.message().is_empty(),
                "{what}: the status says nothing"
            );
            status
        }
    }
}

/// Polls `cond` every 20 ms until it holds, for at most [`POLL_TIMEOUT`].
async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + POLL_TIMEOUT;
    while !cond().await {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {POLL_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The read and write ops the daemon counted for `name`.
async fn ops(stats: &mut StatsServiceClient<Channel>, name: &str) -> (u64, u64) {
    let r = stats
        .get_io_stats(pb::GetIoStatsRequest {
            name: Some(name.into()),
        })
        .await
        .expect("GetIoStats")
        .into_inner();
    let s = &r.stats[0];
    (
        s.read.unwrap_or_default().ops,
        s.write.unwrap_or_default().ops,
    )
}

/// Runs the CLI and expects a server error: exit 1, nothing on stdout, one
/// stderr line `io-engine-ctl: error: CODE: message`. Returns the message.
fn ctl_fails(d: &Daemon, args: &[&str], code: &str) -> String {
    let out = d.ctl(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "io-engine-ctl {args:?} must exit 1 on a server error; stderr: {stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "io-engine-ctl {args:?} printed {:?}",
        out.stdout
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "io-engine-ctl {args:?}: one stderr line, got:\n{stderr}"
    );
    let prefix = format!("io-engine-ctl: error: {code}: ");
    let message = lines[0]
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("io-engine-ctl {args:?}: expected {prefix:?}..., got {stderr}"));
    assert!(!message.is_empty(), "{args:?}: {stderr}");
    message.to_owned()
}

/// Splits aligned text into cells: columns are separated by runs of at
/// least two positions that are blank on every line. Returns the rows' cells
/// (trimmed). A table whose columns do not start at the same position on
/// every row has no such separators and splits into fewer columns, so
/// callers check the column count (through the header row).
fn cells(text: &str) -> Vec<Vec<String>> {
    let lines: Vec<Vec<char>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.chars().collect())
        .collect();
    assert!(!lines.is_empty(), "no table in {text:?}");
    let width = lines.iter().map(Vec::len).max().unwrap_or(0);
    let blank: Vec<bool> = (0..width)
        .map(|p| lines.iter().all(|l| l.get(p).is_none_or(|c| *c == ' ')))
        .collect();
    // Column spans: maximal runs of non-separator positions.
    let mut spans = Vec::new();
    let mut p = 0;
    let mut start = 0;
    while p < width {
        if blank[p] {
            let gap_start = p;
            while p < width && blank[p] {
                p += 1;
            }
            if p - gap_start >= 2 || gap_start == 0 {
                if gap_start > start {
                    spans.push((start, gap_start));
                }
                start = p;
            }
        } else {
            p += 1;
        }
    }
    if start < width {
        spans.push((start, width));
    }
    lines
        .iter()
        .map(|l| {
            spans
                .iter()
                .map(|&(a, b)| {
                    let b = b.min(l.len());
                    let a = a.min(b);
                    l[a..b].iter().collect::<String>().trim().to_owned()
                })
                .collect()
        })
        .collect()
}

/// Parses an aligned table with exactly `headers` (asserting it): the data
/// rows, each one cell per header.
fn table(text: &str, headers: &[&str]) -> Vec<Vec<String>> {
    let rows = cells(text);
    assert_eq!(
        rows[0], headers,
        "the table's header row, split at the column gaps common to every row, \
         is not the expected columns (misaligned rows merge columns):\n{text}"
    );
    rows[1..].to_vec()
}

/// Parses an aligned `key  value` list.
fn key_values(text: &str) -> BTreeMap<String, String> {
    let rows = cells(text);
    assert!(
        rows.iter().all(|r| r.len() == 2),
        "a key/value list has two aligned columns:\n{text}"
    );
    rows.into_iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect()
}

/// The data row whose first cells are `key`.
fn row<'a>(rows: &'a [Vec<String>], key: &[&str]) -> &'a [String] {
    rows.iter()
        .find(|r| r.iter().zip(key).all(|(c, k)| c == k))
        .unwrap_or_else(|| panic!("no row {key:?} in {rows:?}"))
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| {
            g.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        })
}

// ---------------------------------------------------------------------------
// Accel
// ---------------------------------------------------------------------------

/// malloc moves its data through accel: a perf run's writes and reads show
/// up as software copies in `accel stats`, the gRPC stats and /metrics, and
/// `accel modules` / `accel assignments` describe the framework.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malloc_io_runs_as_accel_copies_seen_by_cli_and_metrics() {
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///a0?size_mb=16&blk_size=4096",
        "--accel-assign",
        "copy=software",
    ]);
    let w = run_perf(&d, perf_request(&["a0"], "randwrite", 0.3)).await;
    let r = run_perf(&d, perf_request(&["a0"], "randread", 0.3)).await;
    let ios = w.total.unwrap().ios + r.total.unwrap().ios;

    let modules = d.ctl_json(&["accel", "modules"]);
    let m = &modules["modules"][0];
    assert_eq!(m["name"], "software", "{modules}");
    let ops: Vec<&str> = m["opcodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        [
            "copy",
            "fill",
            "compare",
            "dualcast",
            "crc32c",
            "copy_crc32c"
        ]
    );
    assert!(u(&m["max_batch"]) > 1);
    // The kernels the CPU runs, from its own flags.
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let flags: Vec<&str> = cpu
        .lines()
        .find(|l| l.starts_with("flags"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    let isa = if flags.contains(&"avx512f") && flags.contains(&"avx2") {
        "avx512"
    } else if flags.contains(&"avx2") {
        "avx2"
    } else {
        "scalar"
    };
    assert_eq!(m["implementation"], format!("{isa} kernels"), "{modules}");
    let table = d.ctl_ok(&["accel", "modules"]);
    assert!(table.contains("software"), "{table}");
    assert!(table.contains("IMPLEMENTATION"), "{table}");
    assert!(table.contains(&format!("{isa} kernels")), "{table}");

    let a = d.ctl_json(&["accel", "assignments"]);
    for entry in a["assignments"].as_array().unwrap() {
        assert_eq!(entry["module"], "software", "{a}");
    }
    assert!(a["fallbacks"].as_array().unwrap().is_empty(), "{a}");

    let st = d.ctl_json(&["accel", "stats"]);
    let copy = accel_op(&st, "copy", "software");
    assert_eq!(u(&copy["executed"]), ios, "one accel copy per IO: {st}");
    assert_eq!(u(&copy["bytes"]), ios * 4096, "{st}");
    assert_eq!(u(&copy["failed"]), 0);
    let batches = u(&st["modules"][0]["batches"]);
    assert!(
        batches > 0 && batches <= ios,
        "{batches} batches for {ios} IOs"
    );
    let text = d.ctl_ok(&["accel", "stats"]);
    assert!(
        text.contains("copy") && text.contains(&ios.to_string()),
        "{text}"
    );

    let body = http::get(&d.metrics_url()).expect("GET /metrics").text();
    let series = r#"io_engine_accel_ops_total{opcode="copy",module="software"}"#;
    assert_eq!(sample(&body, series), ios as f64);
    let bytes = r#"io_engine_accel_bytes_total{opcode="copy",module="software"}"#;
    assert_eq!(sample(&body, bytes), (ios * 4096) as f64);
    assert_eq!(
        sample(
            &body,
            r#"io_engine_accel_failures_total{opcode="copy",module="software"}"#
        ),
        0.0
    );
    assert_eq!(
        sample(&body, r#"io_engine_accel_batches_total{module="software"}"#),
        batches as f64
    );

    let info = d.ctl_json(&["engine", "info"]);
    assert_eq!(info["accel_modules"][0], "software", "{info}");
}

// ---------------------------------------------------------------------------
// Devices given at start
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_given_on_the_command_line_are_listed() {
    let d = Daemon::start_quiet([
        "--bdev",
        "null:///n0?num_blocks=1000&blk_size=4096",
        "--bdev",
        "malloc:///m0?size_mb=8",
    ]);
    let list = bdev_client(&d)
        .await
        .list(pb::ListBdevsRequest {})
        .await
        .expect("List")
        .into_inner()
        .bdevs;
    let got: Vec<_> = list.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(got, ["m0", "n0"], "ordered by name: {list:?}");
    let (m0, n0) = (&list[0], &list[1]);
    assert_eq!(m0.product, "malloc");
    assert_eq!(m0.uri, "malloc:///m0?size_mb=8&blk_size=512");
    assert_eq!(
        (m0.block_size, m0.num_blocks, m0.size_bytes),
        (512, 16384, 8 << 20)
    );
    assert_eq!(n0.product, "null");
    assert_eq!(n0.uri, "null:///n0?num_blocks=1000&blk_size=4096");
    assert_eq!(
        (n0.block_size, n0.num_blocks, n0.size_bytes),
        (4096, 1000, 4_096_000)
    );
    for b in &list {
        assert!(is_uuid(&b.uuid), "{b:?}");
        assert!(!b.claimed && b.open_count == 0 && !b.shared, "{b:?}");
    }
    assert_ne!(m0.uuid, n0.uuid, "each device gets its own uuid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_given_in_the_environment_are_listed() {
    let d = Daemon::start_with_env(
        quiet_args(),
        &[(
            "IO_ENGINE_BDEV",
            "malloc:///e0?size_mb=4,null:///e1?size_mb=2&blk_size=4096",
        )],
    );
    let json = d.ctl_json(&["bdev", "list"]);
    let bdevs = json["bdevs"].as_array().expect("a bdevs array");
    let got: Vec<_> = bdevs.iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(got, ["e0", "e1"], "{json}");
    assert_eq!(bdevs[0]["product"], "malloc");
    assert_eq!(u(&bdevs[0]["size_bytes"]), 4 << 20);
    assert_eq!(bdevs[1]["product"], "null");
    assert_eq!(u(&bdevs[1]["block_size"]), 4096);
    assert_eq!(u(&bdevs[1]["size_bytes"]), 2 << 20);
    assert_eq!(u(&bdevs[1]["num_blocks"]), 512);
}

// ---------------------------------------------------------------------------
// The CLI: devices
// ---------------------------------------------------------------------------

const BDEV_LIST_HEADERS: [&str; 10] = [
    "NAME",
    "PRODUCT",
    "SIZE",
    "BLOCK SIZE",
    "BLOCKS",
    "CLAIMED",
    "OPEN",
    "SHARED",
    "UUID",
    "BACKING",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_creates_gets_lists_and_destroys_devices() {
    let d = Daemon::start_quiet(Vec::<String>::new());
    let uuid = "6f1d5c2e-8a47-4b3c-9e21-0d4f6a8b7c95";

    // create (table): a key/value list with every field.
    let uri = format!("malloc:///cli0?size_mb=16&blk_size=4096&uuid={uuid}");
    let kv = key_values(&d.ctl_ok(&["bdev", "create", &uri]));
    assert_eq!(kv["name"], "cli0");
    assert_eq!(kv["uuid"], uuid, "the uuid given is echoed");
    assert_eq!(kv["uri"], uri, "already canonical");
    assert_eq!(kv["product"], "malloc");
    assert_eq!(kv["size"], "16.0 MiB (16777216 bytes)");
    assert_eq!(kv["block size"], "4096");
    assert_eq!(kv["blocks"], "4096");
    assert_eq!(kv["claimed"], "no");
    assert_eq!(kv["open count"], "0");

    // create (JSON): the API's fields, sizes in bytes, canonical URI.
    let n = d.ctl_json(&[
        "bdev",
        "create",
        "NULL:///cli1?blk_size=512&num_blocks=2048",
    ]);
    assert_eq!(n["name"], "cli1");
    assert_eq!(n["product"], "null");
    assert_eq!(n["uri"], "null:///cli1?num_blocks=2048&blk_size=512");
    assert_eq!((u(&n["block_size"]), u(&n["num_blocks"])), (512, 2048));
    assert_eq!(u(&n["size_bytes"]), 1 << 20);
    assert_eq!(n["claimed"], false);
    assert_eq!(u(&n["open_count"]), 0);
    let n_uuid = n["uuid"].as_str().expect("a uuid").to_owned();
    assert!(is_uuid(&n_uuid) && n_uuid != uuid, "{n}");

    // get (JSON) gives what create gave.
    let g = d.ctl_json(&["bdev", "get", "cli0"]);
    assert_eq!(g["uuid"], uuid);
    assert_eq!(u(&g["size_bytes"]), 16 << 20);
    assert_eq!(u(&g["block_size"]), 4096);
    assert_eq!(g["product"], "malloc");
    assert_eq!(d.ctl_json(&["bdev", "get", "cli1"]), n);
    let kv = key_values(&d.ctl_ok(&["bdev", "get", "cli1"]));
    assert_eq!(kv["uuid"], n_uuid);
    assert_eq!(kv["size"], "1.0 MiB (1048576 bytes)");

    // list (table): aligned columns, a row per device.
    let list = d.ctl_ok(&["bdev", "list"]);
    let rows = table(&list, &BDEV_LIST_HEADERS);
    let cli0 = [
        "cli0", "malloc", "16.0 MiB", "4096", "4096", "no", "0", "no", uuid, "-",
    ];
    let cli1 = [
        "cli1", "null", "1.0 MiB", "512", "2048", "no", "0", "no", &n_uuid, "-",
    ];
    assert_eq!(rows, [cli0, cli1], "{list}");

    // list (JSON).
    let json = d.ctl_json(&["bdev", "list"]);
    let bdevs = json["bdevs"].as_array().expect("bdevs");
    assert_eq!(bdevs.len(), 2, "{json}");
    assert_eq!(bdevs[0]["uuid"], uuid);
    assert_eq!(bdevs[1], n);

    // destroy, then the device is gone everywhere.
    let out = d.ctl_ok(&["bdev", "destroy", "cli1"]);
    assert_eq!(out, "destroyed device \"cli1\"\n");
    assert_eq!(
        d.ctl_json(&["bdev", "destroy", "cli0"]),
        serde_json::json!({})
    );
    assert_eq!(
        d.ctl_json(&["bdev", "list"]),
        serde_json::json!({"bdevs": []})
    );
    let msg = ctl_fails(&d, &["bdev", "get", "cli1"], "NOT_FOUND");
    assert!(msg.contains("cli1"), "{msg}");
    // An empty list is still a (header-only) table.
    let empty = d.ctl_ok(&["bdev", "list"]);
    assert!(table(&empty, &BDEV_LIST_HEADERS).is_empty(), "{empty}");
    // The name is free again.
    d.ctl_ok(&["bdev", "create", "null:///cli1?size_mb=1"]);
}

// ---------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------

const IO_STATS_HEADERS: [&str; 9] = [
    "DEVICE",
    "OP",
    "OPS",
    "BYTES",
    "ERRORS",
    "AVG µs",
    "MIN µs",
    "MAX µs",
    "IN FLIGHT",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn io_stats_count_exactly_the_perf_runs_ios_and_reset_zeroes_them() {
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///s0?size_mb=32",
        "--bdev",
        "malloc:///s1?size_mb=32&blk_size=4096",
    ]);
    // Writes on both devices, then reads on s0 only.
    let writes = run_perf(&d, perf_request(&["s0", "s1"], "randwrite", 0.5)).await;
    let job = |resp: &pb::RunPerfResponse, bdev: &str| {
        resp.jobs
            .iter()
            .find(|j| j.bdev == bdev)
            .unwrap_or_else(|| panic!("no job for {bdev}: {resp:?}"))
            .ios
    };
    let (w0, w1) = (job(&writes, "s0"), job(&writes, "s1"));
    assert_eq!(writes.total.unwrap().ios, w0 + w1);
    let r0 = job(
        &run_perf(&d, perf_request(&["s0"], "randread", 0.5)).await,
        "s0",
    );

    let json = d.ctl_json(&["stats", "io", "s0"]);
    let s = &json["stats"][0];
    assert_eq!(json["stats"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(s["name"], "s0");
    assert_eq!(
        u(&s["write"]["ops"]),
        w0,
        "writes counted = the perf job's IOs: {json}"
    );
    assert_eq!(u(&s["write"]["bytes"]), w0 * 4096, "{json}");
    assert_eq!(
        u(&s["read"]["ops"]),
        r0,
        "reads counted = the perf job's IOs: {json}"
    );
    assert_eq!(u(&s["read"]["bytes"]), r0 * 4096, "{json}");
    assert_eq!(u(&s["in_flight"]), 0, "{json}");
    for op in ["read", "write"] {
        let o = &s[op];
        assert_eq!(u(&o["errors"]), 0, "{json}");
        assert!(u(&o["latency_min_ns"]) > 0, "{json}");
        assert!(u(&o["latency_min_ns"]) <= u(&o["latency_max_ns"]), "{json}");
        let avg = u(&o["latency_total_ns"]) / u(&o["ops"]);
        assert!(
            (u(&o["latency_min_ns"])..=u(&o["latency_max_ns"])).contains(&avg),
            "{json}"
        );
    }
    for op in ["unmap", "flush", "write_zeroes", "copy"] {
        assert_eq!(u(&s[op]["ops"]), 0, "{json}");
    }
    assert!(u(&json["uptime_ns"]) > 0);

    // Every device, ordered by name; s1 saw only writes.
    let all = d.ctl_json(&["stats", "io"]);
    let names: Vec<_> = all["stats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].clone())
        .collect();
    assert_eq!(names, ["s0", "s1"], "{all}");
    assert_eq!(u(&all["stats"][1]["write"]["ops"]), w1, "{all}");
    assert_eq!(u(&all["stats"][1]["write"]["bytes"]), w1 * 4096, "{all}");
    assert_eq!(u(&all["stats"][1]["read"]["ops"]), 0, "{all}");

    // The table shows the same counts, aligned.
    let text = d.ctl_ok(&["stats", "io", "s0"]);
    let rows = table(&text, &IO_STATS_HEADERS);
    assert_eq!(rows.len(), 6, "a row per operation type:\n{text}");
    assert_eq!(row(&rows, &["s0", "write"])[2], w0.to_string(), "{text}");
    assert_eq!(row(&rows, &["s0", "read"])[2], r0.to_string(), "{text}");
    assert_eq!(row(&rows, &["s0", "read"])[8], "0", "in flight:\n{text}");
    assert_eq!(
        row(&rows, &["s0", "unmap"])[2..6],
        ["0", "0 B", "0", "-"],
        "{text}"
    );

    // The Prometheus endpoint agrees.
    let body = http::get(&d.metrics_url()).expect("GET /metrics").text();
    assert_eq!(
        sample(&body, r#"io_engine_bdev_ops_total{bdev="s0",op="write"}"#),
        w0 as f64
    );
    assert_eq!(
        sample(&body, r#"io_engine_bdev_ops_total{bdev="s0",op="read"}"#),
        r0 as f64
    );
    assert_eq!(
        sample(&body, r#"io_engine_bdev_bytes_total{bdev="s1",op="write"}"#),
        (w1 * 4096) as f64
    );
    assert_eq!(
        sample(
            &body,
            r#"io_engine_bdev_io_latency_seconds_count{bdev="s0",op="read"}"#
        ),
        r0 as f64
    );

    // After the runs every IO object is back in the pool.
    let pools = d.ctl_json(&["stats", "pools"]);
    let pool = &pools["pools"][0];
    assert_eq!(pool["name"], "bdev_io", "{pools}");
    assert_eq!(u(&pool["in_use"]), 0, "{pools}");
    assert_eq!(u(&pool["available"]), u(&pool["capacity"]), "{pools}");
    let sum = |k: &str| {
        pool["cores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| u(&c[k]))
            .sum::<u64>()
    };
    assert!(
        sum("gets") >= w0 + w1 + r0,
        "each IO takes an object: {pools}"
    );
    assert_eq!(sum("gets"), sum("puts"), "{pools}");

    // Reset one device: its counters are zero, the other's are kept.
    let out = d.ctl_ok(&["stats", "reset", "s0"]);
    assert_eq!(out, "reset the IO counters of device \"s0\"\n");
    let json = d.ctl_json(&["stats", "io", "s0"]);
    for op in ["read", "write"] {
        let o = &json["stats"][0][op];
        for k in [
            "ops",
            "bytes",
            "errors",
            "latency_total_ns",
            "latency_min_ns",
            "latency_max_ns",
        ] {
            assert_eq!(u(&o[k]), 0, "{op}.{k} after reset: {json}");
        }
    }
    assert_eq!(
        u(&d.ctl_json(&["stats", "io", "s1"])["stats"][0]["write"]["ops"]),
        w1
    );
    let rows = table(&d.ctl_ok(&["stats", "io", "s0"]), &IO_STATS_HEADERS);
    assert_eq!(row(&rows, &["s0", "write"])[2..6], ["0", "0 B", "0", "-"]);

    // Reset every device.
    assert_eq!(d.ctl_json(&["stats", "reset"]), serde_json::json!({}));
    assert_eq!(
        u(&d.ctl_json(&["stats", "io", "s1"])["stats"][0]["write"]["ops"]),
        0
    );
    let body = http::get(&d.metrics_url()).expect("GET /metrics").text();
    assert_eq!(
        sample(&body, r#"io_engine_bdev_ops_total{bdev="s1",op="write"}"#),
        0.0
    );

    // Counting starts again from zero.
    let again = job(
        &run_perf(&d, perf_request(&["s1"], "randread", 0.2)).await,
        "s1",
    );
    let mut stats = stats_client(&d).await;
    assert_eq!(ops(&mut stats, "s1").await, (again, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randrw_mixes_as_asked_and_every_io_is_counted_once() {
    let d = Daemon::start_quiet(["--bdev", "malloc:///rw0?size_mb=16"]);
    let mut stats = stats_client(&d).await;
    // (read_percent, reads expected, writes expected); unset means 50.
    for (read_percent, reads, writes) in [
        (None, true, true),
        (Some(0), false, true),
        (Some(100), true, false),
    ] {
        stats
            .reset_io_stats(pb::ResetIoStatsRequest { name: None })
            .await
            .expect("ResetIoStats");
        let req = pb::RunPerfRequest {
            read_percent,
            ..perf_request(&["rw0"], "randrw", 0.3)
        };
        let ios = run_perf(&d, req).await.total.unwrap().ios;
        let (r, w) = ops(&mut stats, "rw0").await;
        let what = format!("randrw, read_percent {read_percent:?}: {r} reads, {w} writes");
        assert_eq!(r + w, ios, "{what}: the run did {ios} IOs");
        assert_eq!((r > 0, w > 0), (reads, writes), "{what}");
        if read_percent.is_none() {
            // About half and half: far from all of one kind.
            assert!(r * 4 > ios && w * 4 > ios, "{what}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_io_watch_prints_rates_while_a_run_goes_on() {
    let d = Daemon::start_quiet(["--bdev", "malloc:///w0?size_mb=16"]);
    let mut perf = perf_client(&d).await;
    let run = tokio::spawn(async move { perf.run(perf_request(&["w0"], "randread", 4.0)).await });
    let stats = stats_client(&d).await;
    eventually("reads on w0", || {
        let mut stats = stats.clone();
        async move { ops(&mut stats, "w0").await.0 > 0 }
    })
    .await;

    // JSON: one object per interval, per line.
    let args = [
        "stats", "io", "w0", "--watch", "0.5", "--count", "2", "--output", "json",
    ];
    let started = Instant::now();
    let text = tokio::task::block_in_place(|| d.ctl_ok(&args));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "2 intervals of 0.5 s took {took:?}"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "--count 2 prints 2 intervals:\n{text}");
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let interval = u(&v["interval_ns"]);
        assert!(
            (400_000_000..2_000_000_000).contains(&interval),
            "an interval of about 0.5 s: {line}"
        );
        let s = &v["stats"][0];
        assert_eq!(s["name"], "w0", "{line}");
        let read_iops = s["read_iops"].as_f64().unwrap();
        assert!(read_iops > 0.0, "reads are running: {line}");
        assert_eq!(s["write_iops"].as_f64(), Some(0.0), "{line}");
        assert_eq!(s["total_iops"].as_f64(), Some(read_iops), "{line}");
        let bytes = s["read_bytes_per_sec"].as_f64().unwrap();
        assert!(
            (bytes - read_iops * 4096.0).abs() <= bytes * 1e-9 + 1e-6,
            "{line}"
        );
    }

    // Table: a heading line and an aligned table per interval.
    let args = ["stats", "io", "w0", "--watch", "0.5", "--count", "2"];
    let text = tokio::task::block_in_place(|| d.ctl_ok(&args));
    let blocks: Vec<&str> = text.split("\n\n").collect();
    assert_eq!(blocks.len(), 2, "2 intervals:\n{text}");
    for block in blocks {
        let (heading, rest) = block.split_once('\n').expect("a heading and a table");
        assert!(heading.starts_with("engine uptime "), "{block}");
        assert!(heading.contains("interval 0."), "{block}");
        let rows = table(
            rest,
            &[
                "DEVICE",
                "READ IOPS",
                "WRITE IOPS",
                "TOTAL IOPS",
                "READ MiB/s",
                "WRITE MiB/s",
                "TOTAL MiB/s",
            ],
        );
        assert_eq!(rows.len(), 1, "{block}");
        assert_eq!(rows[0][0], "w0");
        let iops: f64 = rows[0][1].parse().unwrap();
        assert!(iops > 0.0, "{block}");
        assert_eq!(rows[0][2], "0", "{block}");
    }

    let resp = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the 4 s run ends")
        .expect("the task")
        .expect("the run succeeds")
        .into_inner();
    assert!(resp.total.unwrap().ios > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_info_reactor_and_pool_stats_describe_the_daemon() {
    let cpu = available_cpus()[0];
    let d = Daemon::start_quiet(Vec::<String>::new());

    let info = d.ctl_json(&["engine", "info"]);
    assert_eq!(info["version"], VERSION, "{info}");
    assert!(!info["git_revision"].as_str().unwrap().is_empty(), "{info}");
    assert_eq!(info["cores"], serde_json::json!([cpu]), "{info}");
    assert_eq!(info["poll_mode"], "adaptive", "{info}");
    assert!(u(&info["uptime_ns"]) > 0, "{info}");
    assert_eq!(u(&info["io_pool_size"]), 65535, "{info}");
    assert_eq!(
        info["accel_modules"],
        serde_json::json!(["software"]),
        "{info}"
    );
    let kv = key_values(&d.ctl_ok(&["engine", "info"]));
    assert_eq!(kv["version"], VERSION);
    assert_eq!(kv["cores"], cpu.to_string());
    assert_eq!(kv["poll mode"], "adaptive");
    assert_eq!(kv["io pool size"], "65535");

    let reactors = d.ctl_json(&["stats", "reactors"]);
    let list = reactors["reactors"].as_array().expect("reactors");
    assert_eq!(list.len(), 1, "one core, one reactor: {reactors}");
    let r = &list[0];
    assert_eq!(
        (u(&r["core"]), u(&r["cpu"])),
        (0, u64::from(cpu)),
        "{reactors}"
    );
    assert_eq!(r["poll_mode"], "adaptive");
    // A reactor may not have finished its first round yet right after the
    // start; it must be polling soon after.
    let stats = stats_client(&d).await;
    eventually("the reactor polls", || {
        let mut stats = stats.clone();
        async move {
            let r = stats.get_reactor_stats(pb::GetReactorStatsRequest {}).await;
            r.expect("GetReactorStats").into_inner().reactors[0].iterations > 0
        }
    })
    .await;
    let reactors = d.ctl_json(&["stats", "reactors"]);
    let r = &reactors["reactors"][0];
    assert!(u(&r["iterations"]) > 0, "the reactor polls: {reactors}");
    assert!(u(&r["idle_ns"]) > 0, "an idle reactor is idle: {reactors}");
    let text = d.ctl_ok(&["stats", "reactors"]);
    let rows = table(
        &text,
        &[
            "CORE",
            "CPU",
            "POLL MODE",
            "ITERATIONS",
            "BUSY",
            "IDLE",
            "BUSY %",
            "MESSAGES",
        ],
    );
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(
        rows[0][..3],
        ["0".to_string(), cpu.to_string(), "adaptive".into()]
    );

    let pools = d.ctl_json(&["stats", "pools"]);
    let list = pools["pools"].as_array().expect("pools");
    assert_eq!(list.len(), 1, "{pools}");
    let p = &list[0];
    assert_eq!(p["name"], "bdev_io", "{pools}");
    assert_eq!(u(&p["capacity"]), 65535, "the default pool size: {pools}");
    assert_eq!(u(&p["in_use"]), 0, "idle: {pools}");
    assert_eq!(u(&p["available"]), 65535, "idle: {pools}");
    assert_eq!(u(&p["exhausted"]), 0, "{pools}");
    assert_eq!(
        u(&p["cache_size"]),
        u(&info["io_pool_cache"]),
        "{pools} vs {info}"
    );
    let text = d.ctl_ok(&["stats", "pools"]);
    let (pool_table, core_table) = text.split_once("\n\n").expect("two tables");
    let rows = table(
        pool_table,
        &[
            "POOL",
            "CAPACITY",
            "CACHE SIZE",
            "AVAILABLE",
            "IN USE",
            "EXHAUSTED",
        ],
    );
    assert_eq!(rows[0][..2], ["bdev_io", "65535"], "{text}");
    assert_eq!(rows[0][3..5], ["65535", "0"], "{text}");
    table(
        core_table,
        &[
            "POOL",
            "CORE",
            "GETS",
            "PUTS",
            "CACHE HITS",
            "CACHE MISSES",
            "HIT %",
            "EXHAUSTED",
        ],
    );
    drop(d);

    // The same flags from the environment; busy polling is reported as such.
    let d = Daemon::start_with_env(
        ["-l", &cpu.to_string()],
        &[
            ("IO_ENGINE_POLL_MODE", "busy"),
            ("IO_ENGINE_IO_POOL_SIZE", "1024"),
            ("IO_ENGINE_IO_POOL_CACHE", "16"),
        ],
    );
    let info = d.ctl_json(&["engine", "info"]);
    assert_eq!(info["poll_mode"], "busy", "{info}");
    assert_eq!(
        (u(&info["io_pool_size"]), u(&info["io_pool_cache"])),
        (1024, 16),
        "{info}"
    );
    let pools = d.ctl_json(&["stats", "pools"]);
    assert_eq!(u(&pools["pools"][0]["capacity"]), 1024, "{pools}");
    assert_eq!(u(&pools["pools"][0]["cache_size"]), 16, "{pools}");
    let reactors = d.ctl_json(&["stats", "reactors"]);
    assert_eq!(reactors["reactors"][0]["poll_mode"], "busy", "{reactors}");
}

// ---------------------------------------------------------------------------
// Health
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_report_serving() {
    let d = Daemon::start_quiet(Vec::<String>::new());
    let mut health = HealthClient::new(d.channel().await);
    for service in [
        "",
        "io_engine.v1.BdevService",
        "io_engine.v1.StatsService",
        "io_engine.v1.EngineService",
        "io_engine.v1.PerfService",
    ] {
        let resp = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap_or_else(|s| panic!("Check({service:?}): {s:?}"))
            .into_inner();
        assert_eq!(
            resp.status,
            ServingStatus::Serving as i32,
            "Check({service:?})"
        );
    }
    let unknown = health
        .check(HealthCheckRequest {
            service: "io_engine.v1.NoSuchService".into(),
        })
        .await;
    expect_code("Check(unknown service)", unknown, Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_lists_every_service_and_describes_them() {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let d = Daemon::start_quiet(Vec::<String>::new());
    let mut client = ServerReflectionClient::new(d.channel().await);
    let ask = |m: MessageRequest| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(m),
    };
    let requests = vec![
        ask(MessageRequest::ListServices(String::new())),
        ask(MessageRequest::FileContainingSymbol(
            "io_engine.v1.BdevService".into(),
        )),
    ];
    let mut answers = client
        .server_reflection_info(tokio_stream::iter(requests))
        .await
        .expect("reflection call")
        .into_inner();
    let list = answers.message().await.unwrap().unwrap().message_response;
    let Some(MessageResponse::ListServicesResponse(list)) = list else {
        panic!("expected a service list, got {list:?}");
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    for want in [
        "io_engine.v1.BdevService",
        "io_engine.v1.StatsService",
        "io_engine.v1.EngineService",
        "io_engine.v1.PerfService",
        "grpc.health.v1.Health",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let file = answers.message().await.unwrap().unwrap().message_response;
    let Some(MessageResponse::FileDescriptorResponse(file)) = file else {
        panic!("expected a file descriptor, got {file:?}");
    };
    assert!(!file.file_descriptor_proto.is_empty());
    // The encoded descriptor names the service's file.
    assert!(
        file.file_descriptor_proto
            .iter()
            .any(|f| f.windows(b"bdev.proto".len()).any(|w| w == b"bdev.proto")),
        "descriptor does not describe bdev.proto"
    );
}

// ---------------------------------------------------------------------------
// Bad requests
// ---------------------------------------------------------------------------

/// Devices of the bad-request daemons: a malloc and a null device.
const BAD_REQUEST_DEVICES: [&str; 4] = [
    "--bdev",
    "malloc:///m0?size_mb=16",
    "--bdev",
    "null:///n0?size_mb=16",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_device_uris_are_invalid_argument_and_the_daemon_keeps_serving() {
    let d = Daemon::start_quiet(BAD_REQUEST_DEVICES);
    let mut bdev = bdev_client(&d).await;
    // (URI, a word the message must contain)
    let cases = [
        ("nvme:///x?size_mb=1", "nvme"),                    // unknown scheme
        ("null://h/x?size_mb=1", "host"),                   // host given
        ("null:///?size_mb=1", "name"),                     // missing name
        ("null:///bad*name?size_mb=1", "*"),                // bad name character
        ("null:///x?size_mb=1&color=red", "color"),         // unknown parameter
        ("null:///x?size_mb=1&size_mb=2", "size_mb"),       // duplicate parameter
        ("null:///x?size_mb=1&num_blocks=8", "num_blocks"), // both sizes
        ("null:///x?blk_size=512", "size"),                 // no size
        ("null:///x?size_mb=0", "size_mb=0"),               // zero size
        ("null:///x?size_mb=ten", "ten"),                   // bad number
        ("null:///x?size_mb=1&blk_size=1000", "1000"),      // bad block size
        ("null:///x?size_mb=1&uuid=not-a-uuid", "not-a-uuid"), // bad uuid
        ("null:///x?size_mb=1#frag", "frag"),               // fragment
        ("null:///a/b?size_mb=1", "segment"),               // nested path
        ("", "URI"),                                        // empty
    ];
    for (uri, word) in cases {
        let what = format!("Create({uri:?})");
        let status = expect_code(
            &what,
            bdev.create(pb::CreateBdevRequest { uri: uri.into() }).await,
            Code::InvalidArgument,
        );
        assert!(
            status.message().contains(word),
            "{what}: {:?} lacks {word:?}",
            status.message()
        );
        assert_eq!(names(&mut bdev).await, ["m0", "n0"], "after {what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_reports_server_errors_with_their_code_and_exit_1() {
    let d = Daemon::start_quiet(BAD_REQUEST_DEVICES);
    let mut bdev = bdev_client(&d).await;
    let cases: [(&[&str], &str, &str); 9] = [
        (
            &["bdev", "create", "null://h/x?size_mb=1"],
            "INVALID_ARGUMENT",
            "host",
        ),
        (
            &["bdev", "create", "null:///x?size_mb=1&blk_size=1000"],
            "INVALID_ARGUMENT",
            "1000",
        ),
        (
            &["bdev", "create", "malloc:///m0?size_mb=1"],
            "ALREADY_EXISTS",
            "m0",
        ),
        (
            &["bdev", "create", "null:///n0?size_mb=1"],
            "ALREADY_EXISTS",
            "n0",
        ),
        (&["bdev", "get", "ghost"], "NOT_FOUND", "ghost"),
        (&["bdev", "destroy", "ghost"], "NOT_FOUND", "ghost"),
        (&["stats", "io", "ghost"], "NOT_FOUND", "ghost"),
        (&["stats", "reset", "ghost"], "NOT_FOUND", "ghost"),
        (
            &["stats", "io", "ghost", "--watch", "0.1", "--count", "1"],
            "NOT_FOUND",
            "ghost",
        ),
    ];
    for (args, code, word) in cases {
        let msg = ctl_fails(&d, args, code);
        assert!(msg.contains(word), "{args:?}: {msg:?} lacks {word:?}");
        assert_eq!(names(&mut bdev).await, ["m0", "n0"], "after {args:?}");
    }
    // Usage errors exit 2, one line, and reach no server.
    for args in [
        &["bdev", "frobnicate"][..],
        &["stats", "io", "--count", "2"],
        &["bdev", "create"],
    ] {
        let out = d.ctl(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("io-engine-ctl: error: "),
            "{args:?}: {stderr}"
        );
    }
    // The existing device was not replaced by the failed create.
    let m0 = d.ctl_json(&["bdev", "get", "m0"]);
    assert_eq!(u(&m0["size_bytes"]), 16 << 20, "{m0}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_names_are_not_found_and_duplicates_already_exist() {
    let d = Daemon::start_quiet(BAD_REQUEST_DEVICES);
    let mut bdev = bdev_client(&d).await;
    let mut stats = stats_client(&d).await;
    let m0_uuid = bdev
        .get(pb::GetBdevRequest { name: "m0".into() })
        .await
        .unwrap()
        .into_inner()
        .uuid;
    let ghost = || "ghost".to_string();

    let s = expect_code(
        "Get(ghost)",
        bdev.get(pb::GetBdevRequest { name: ghost() }).await,
        Code::NotFound,
    );
    assert!(s.message().contains("ghost"), "{s:?}");
    assert_eq!(names(&mut bdev).await, ["m0", "n0"]);
    expect_code(
        "Destroy(ghost)",
        bdev.destroy(pb::DestroyBdevRequest { name: ghost() }).await,
        Code::NotFound,
    );
    assert_eq!(names(&mut bdev).await, ["m0", "n0"]);
    expect_code(
        "GetIoStats(ghost)",
        stats
            .get_io_stats(pb::GetIoStatsRequest {
                name: Some(ghost()),
            })
            .await,
        Code::NotFound,
    );
    assert_eq!(names(&mut bdev).await, ["m0", "n0"]);
    expect_code(
        "ResetIoStats(ghost)",
        stats
            .reset_io_stats(pb::ResetIoStatsRequest {
                name: Some(ghost()),
            })
            .await,
        Code::NotFound,
    );
    assert_eq!(names(&mut bdev).await, ["m0", "n0"]);
    expect_code(
        "Run(ghost)",
        perf_client(&d)
            .await
            .run(perf_request(&["m0", "ghost"], "randread", 0.2))
            .await,
        Code::NotFound,
    );
    assert_eq!(names(&mut bdev).await, ["m0", "n0"]);
    // A name taken by a device of another kind is taken too.
    for uri in ["malloc:///m0?size_mb=1", "null:///m0?size_mb=1"] {
        let s = expect_code(
            &format!("Create({uri})"),
            bdev.create(pb::CreateBdevRequest { uri: uri.into() }).await,
            Code::AlreadyExists,
        );
        assert!(s.message().contains("m0"), "{s:?}");
        assert_eq!(names(&mut bdev).await, ["m0", "n0"]);
    }
    let m0 = bdev
        .get(pb::GetBdevRequest { name: "m0".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (m0.uuid, m0.product.as_str(), m0.size_bytes),
        (m0_uuid, "malloc", 16 << 20)
    );
    // A failed Run opened nothing, so m0 can still be destroyed.
    assert_eq!(m0.open_count, 0);
    bdev.destroy(pb::DestroyBdevRequest { name: "m0".into() })
        .await
        .expect("m0 is not held open");
    assert_eq!(names(&mut bdev).await, ["n0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_malloc_is_resource_exhausted_without_allocating() {
    let d = Daemon::start_quiet(BAD_REQUEST_DEVICES);
    let mut bdev = bdev_client(&d).await;
    let mem_total_mib = std::fs::read_to_string("/proc/meminfo")
        .expect("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("MemTotal")
        / 1024;
    let before = d.rss_kib();
    for size_mb in [100_000_000, 2 * mem_total_mib] {
        let uri = format!("malloc:///huge?size_mb={size_mb}");
        let s = expect_code(
            &format!("Create({uri})"),
            bdev.create(pb::CreateBdevRequest { uri: uri.clone() })
                .await,
            Code::ResourceExhausted,
        );
        assert!(s.message().contains("huge"), "{s:?}");
        assert_eq!(names(&mut bdev).await, ["m0", "n0"], "after {uri}");
    }
    let msg = ctl_fails(
        &d,
        &["bdev", "create", "malloc:///huge?size_mb=100000000"],
        "RESOURCE_EXHAUSTED",
    );
    assert!(msg.contains("huge"), "{msg}");
    assert_eq!(names(&mut bdev).await, ["m0", "n0"]);
    let after = d.rss_kib();
    assert!(
        after < before + 32 * 1024,
        "VmRSS went from {before} KiB to {after} KiB: the refused device was allocated"
    );
    // A device that fits is still created.
    bdev.create(pb::CreateBdevRequest {
        uri: "malloc:///fits?size_mb=4".into(),
    })
    .await
    .expect("a small malloc device");
    assert_eq!(names(&mut bdev).await, ["fits", "m0", "n0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_perf_requests_are_invalid_argument_and_open_nothing() {
    let d = Daemon::start_quiet(BAD_REQUEST_DEVICES);
    let mut bdev = bdev_client(&d).await;
    let mut perf = perf_client(&d).await;
    let base = || perf_request(&["m0"], "randread", 0.2);
    let with = |change: fn(&mut pb::RunPerfRequest)| {
        let mut req = base();
        change(&mut req);
        req
    };
    // (what, request, a word the message must contain)
    let cases = [
        (
            "bad workload",
            with(|r| r.workload = "scribble".into()),
            "scribble",
        ),
        (
            "queue depth 65537",
            with(|r| r.queue_depth = 65537),
            "queue depth",
        ),
        (
            "verify on null",
            with(|r| (r.bdevs, r.verify) = (vec!["m0".into(), "n0".into()], true)),
            "n0",
        ),
        ("IO size 1000", with(|r| r.io_size = 1000), "1000"),
        (
            "IO size 128 MiB",
            with(|r| r.io_size = 128 << 20),
            "IO size",
        ),
        ("0 seconds", with(|r| r.seconds = 0.0), "run time"),
        ("negative seconds", with(|r| r.seconds = -1.0), "run time"),
        ("no device", with(|r| r.bdevs.clear()), "device"),
        ("no reactor 7", with(|r| r.cores = vec![7]), "7"),
        (
            "read percent 101",
            with(|r| (r.workload, r.read_percent) = ("randrw".into(), Some(101))),
            "101",
        ),
    ];
    for (what, req, word) in cases {
        let s = expect_code(what, perf.run(req).await, Code::InvalidArgument);
        assert!(
            s.message().contains(word),
            "{what}: {:?} lacks {word:?}",
            s.message()
        );
        let list = bdev
            .list(pb::ListBdevsRequest {})
            .await
            .expect("List")
            .into_inner()
            .bdevs;
        assert_eq!(list.len(), 2, "after {what}");
        assert!(
            list.iter().all(|b| b.open_count == 0 && !b.claimed),
            "a refused run left a device open: {what}: {list:?}"
        );
    }
    // queue_depth 0 and io_size 0 mean the defaults (32, 4096), as the API says.
    let resp = run_perf(
        &d,
        pb::RunPerfRequest {
            queue_depth: 0,
            io_size: 0,
            ..base()
        },
    )
    .await;
    assert!(resp.total.unwrap().ios > 0);
    // verify on a device that stores data is fine.
    let resp = run_perf(
        &d,
        pb::RunPerfRequest {
            verify: true,
            workload: "randwrite".into(),
            ..base()
        },
    )
    .await;
    assert_eq!(resp.total.unwrap().miscompares, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_device_cannot_be_destroyed_while_perf_holds_it() {
    let d = Daemon::start_quiet(["--bdev", "malloc:///busy0?size_mb=16"]);
    let mut bdev = bdev_client(&d).await;
    let mut perf = perf_client(&d).await;
    let run =
        tokio::spawn(async move { perf.run(perf_request(&["busy0"], "randread", 1.5)).await });
    eventually("busy0 opened by the run", || {
        let mut bdev = bdev.clone();
        async move {
            let b = bdev
                .get(pb::GetBdevRequest {
                    name: "busy0".into(),
                })
                .await
                .expect("Get")
                .into_inner();
            b.open_count > 0
        }
    })
    .await;

    let s = expect_code(
        "Destroy(busy0) while open",
        bdev.destroy(pb::DestroyBdevRequest {
            name: "busy0".into(),
        })
        .await,
        Code::FailedPrecondition,
    );
    assert!(s.message().contains("busy0"), "{s:?}");
    let msg = tokio::task::block_in_place(|| {
        ctl_fails(&d, &["bdev", "destroy", "busy0"], "FAILED_PRECONDITION")
    });
    assert!(msg.contains("busy0"), "{msg}");
    let b = bdev
        .get(pb::GetBdevRequest {
            name: "busy0".into(),
        })
        .await
        .expect("the device still exists")
        .into_inner();
    assert!(b.claimed && b.open_count > 0, "{b:?}");
    assert_eq!(names(&mut bdev).await, ["busy0"]);

    let resp = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the 1.5 s run ends")
        .expect("the task")
        .expect("the run is not disturbed by the refused destroy")
        .into_inner();
    let total = resp.total.unwrap();
    assert!(total.ios > 0 && total.failed == 0, "{total:?}");

    // Once the run is over the device is closed and can go.
    let b = bdev
        .get(pb::GetBdevRequest {
            name: "busy0".into(),
        })
        .await
        .expect("Get")
        .into_inner();
    assert!(!b.claimed && b.open_count == 0, "{b:?}");
    bdev.destroy(pb::DestroyBdevRequest {
        name: "busy0".into(),
    })
    .await
    .expect("destroy after the run");
    assert!(names(&mut bdev).await.is_empty());
}

// ---------------------------------------------------------------------------
// Flag errors
// ---------------------------------------------------------------------------

/// Daemon flags, environment, and the words the error line must contain.
type FlagCase<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, Vec<&'a str>);

#[test]
fn bad_flags_exit_2_with_one_line_naming_the_problem() {
    let cpu = available_cpus()[0].to_string();
    let unavailable = (available_cpus().last().unwrap() + 1).to_string();
    let taken = TcpListener::bind("127.0.0.1:0").expect("a port");
    let taken_addr = taken.local_addr().unwrap().to_string();

    // (flags, environment, words the line must contain)
    let cases: Vec<FlagCase> = vec![
        (vec!["-m", "0xZZ"], vec![], vec!["0xZZ", "mask"]),
        (vec!["-m", "0x0"], vec![], vec!["0x0", "no cores"]),
        (
            vec!["-l", &unavailable],
            vec![],
            vec![&unavailable, "not available"],
        ),
        (
            vec!["-l", &cpu, "-m", "0x1"],
            vec![],
            vec!["cannot be used with"],
        ),
        (
            vec!["-l", &cpu, "--bdev", "nvme:///x?size_mb=1"],
            vec![],
            vec!["--bdev", "nvme"],
        ),
        (
            vec!["-l", &cpu, "--bdev", "malloc:///x?size_mb=1&blk_size=3"],
            vec![],
            vec!["--bdev", "blk_size"],
        ),
        (
            vec!["-l", &cpu],
            vec![("IO_ENGINE_BDEV", "null://host/x?size_mb=1")],
            vec!["host"],
        ),
        (
            vec!["-l", &cpu, "--grpc-addr", &taken_addr],
            vec![],
            vec!["gRPC", &taken_addr, "in use"],
        ),
        (
            vec!["-l", &cpu, "--metrics-addr", &taken_addr],
            vec![],
            vec!["metrics", &taken_addr, "in use"],
        ),
        (
            vec!["-l", &cpu, "--poll-mode", "sometimes"],
            vec![],
            vec!["sometimes"],
        ),
        (
            vec!["-l", &cpu],
            vec![("IO_ENGINE_POLL_MODE", "sometimes")],
            vec!["sometimes"],
        ),
        (
            vec!["-l", &cpu, "--grpc-addr", "localhost"],
            vec![],
            vec!["localhost"],
        ),
        (
            vec!["-l", &cpu, "--io-pool-size", "many"],
            vec![],
            vec!["many"],
        ),
        (
            vec!["-l", &cpu, "--nvmf-digest-offload", "512"],
            vec![],
            vec!["--nvmf-digest-offload", "at least 4096"],
        ),
        (
            vec!["-l", &cpu],
            vec![("IO_ENGINE_NVMF_DIGEST_OFFLOAD", "big")],
            vec!["'big'", "or off"],
        ),
        (
            vec!["-l", &cpu, "--frobnicate"],
            vec![],
            vec!["--frobnicate"],
        ),
        (
            vec!["-l", &cpu, "--accel-assign", "copy=nosuch"],
            vec![],
            vec!["unknown accel module", "nosuch"],
        ),
        (
            vec!["-l", &cpu],
            vec![("IO_ENGINE_ACCEL_ASSIGN", "copy")],
            vec!["expected OPCODE=MODULE"],
        ),
        (
            vec!["-l", &cpu, "--accel-assign", "move=software"],
            vec![],
            vec!["move=software"],
        ),
    ];
    for (flags, env, words) in cases {
        let lines = start_fails(&flags, &env);
        assert_eq!(
            lines.len(),
            1,
            "{flags:?} {env:?}: exactly one stderr line, got {lines:#?}"
        );
        for word in words {
            assert!(
                lines[0].contains(word),
                "{flags:?} {env:?}: {:?} lacks {word:?}",
                lines[0]
            );
        }
    }
    drop(taken);
}

/// Starts the daemon with `flags` (plus adaptive polling and free ports
/// unless the flags set them), expects exit 2 within 5 s with nothing on
/// stdout and a last stderr line `io-engine: ...`; returns the stderr lines.
fn start_fails(flags: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let mut args = vec!["--log-format", "json"];
    for (flag, var, default) in [
        ("--poll-mode", "IO_ENGINE_POLL_MODE", "adaptive"),
        ("--grpc-addr", "IO_ENGINE_GRPC_ADDR", "127.0.0.1:0"),
        ("--metrics-addr", "IO_ENGINE_METRICS_ADDR", "127.0.0.1:0"),
    ] {
        if !flags.contains(&flag) && !env.iter().any(|(k, _)| *k == var) {
            args.extend([flag, default]);
        }
    }
    args.extend(flags);
    let (out, took) = run_daemon_to_exit(&args, env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let what = format!("io-engine {args:?} with {env:?}");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{what}: exit status; stderr:\n{stderr}"
    );
    assert!(took < Duration::from_secs(5), "{what} took {took:?}");
    assert!(out.stdout.is_empty(), "{what}: stdout {:?}", out.stdout);
    let lines: Vec<String> = stderr.lines().map(str::to_owned).collect();
    let last = lines
        .last()
        .unwrap_or_else(|| panic!("{what}: nothing on stderr"));
    assert!(last.starts_with("io-engine: "), "{what}: {stderr}");
    lines
}

#[test]
fn a_failing_bdev_after_good_ones_exits_2_with_the_error_last() {
    // The devices created before the failing one are logged (JSON records,
    // RUST_LOG=info); the failure itself is one plain line, the last.
    let cpu = available_cpus()[0].to_string();
    let lines = start_fails(
        &["-l", &cpu],
        &[(
            "IO_ENGINE_BDEV",
            "null:///ok?size_mb=1,null://host/x?size_mb=1",
        )],
    );
    let (last, logs) = lines.split_last().unwrap();
    assert!(last.contains("host") && last.contains("--bdev"), "{last}");
    for line in logs {
        let record: Value = serde_json::from_str(line)
            .unwrap_or_else(|_| panic!("besides the error, only log records: {lines:#?}"));
        assert!(record["fields"]["message"].is_string(), "{line}");
    }
}

// ---------------------------------------------------------------------------
// Signals
// ---------------------------------------------------------------------------

/// Stops an idle daemon with `signal`: exit 0 within 5 s, ports closed.
fn stops_cleanly_when_idle(signal: Signal) {
    let mut d = Daemon::start_quiet(["--bdev", "malloc:///m0?size_mb=8"]);
    let grpc = d.grpc_addr();
    let metrics = d.metrics_addr();
    assert!(http::get(&d.metrics_url()).is_ok_and(|r| r.status == 200));
    let (status, took) = d.stop_with(signal);
    assert_eq!(
        status.code(),
        Some(0),
        "{signal:?}: {status}\n{}",
        d.stderr()
    );
    assert!(
        took < Duration::from_secs(5),
        "{signal:?}: exit took {took:?}"
    );
    assert!(!d.is_running());
    for addr in [grpc, metrics] {
        assert!(
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
            "{addr} still accepts after the exit"
        );
    }
    // The CLI says it cannot reach the engine: exit 1, one line.
    let out = d.ctl(["bdev", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("io-engine-ctl: error: cannot reach the engine at "),
        "{stderr}"
    );
}

#[test]
fn sigterm_stops_an_idle_daemon_with_exit_0() {
    stops_cleanly_when_idle(Signal::TERM);
}

#[test]
fn sigint_stops_an_idle_daemon_with_exit_0() {
    stops_cleanly_when_idle(Signal::INT);
}

/// Stops a daemon running a 30 s perf job with `signal`: the run is cut
/// short, the call ends, the daemon exits 0 within 5 s.
async fn stops_cleanly_during_a_run(signal: Signal) {
    let d = Daemon::start_quiet(["--bdev", "malloc:///m0?size_mb=16"]);
    let mut perf = PerfServiceClient::new(d.channel_with_timeout(Duration::from_secs(60)).await);
    let run = tokio::spawn(async move {
        let started = Instant::now();
        let result = perf.run(perf_request(&["m0"], "randread", 30.0)).await;
        (result, started.elapsed())
    });
    let stats = stats_client(&d).await;
    eventually("reads on m0", || {
        let mut stats = stats.clone();
        async move { ops(&mut stats, "m0").await.0 > 0 }
    })
    .await;

    let (d, (status, took)) = tokio::task::spawn_blocking(move || {
        let mut d = d;
        let stopped = d.stop_with(signal);
        (d, stopped)
    })
    .await
    .expect("the stopping thread");
    assert_eq!(
        status.code(),
        Some(0),
        "{signal:?} during a run: {status}\n{}",
        d.stderr()
    );
    assert!(
        took < Duration::from_secs(5),
        "{signal:?} during a run: exit took {took:?}"
    );

    let (result, ran) = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the Run call ends with the daemon")
        .expect("the task");
    assert!(
        ran < Duration::from_secs(15),
        "the 30 s run was not cut short: {ran:?}"
    );
    // The call may return the figures of the shortened run or fail with the
    // connection; if it returns, the figures are of a run shorter than asked.
    if let Ok(resp) = result {
        let total = resp.into_inner().total.unwrap();
        assert!(total.seconds < 15.0, "{total:?}");
        assert!(total.ios > 0 && total.failed == 0, "{total:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_perf_run_exits_0_quickly() {
    stops_cleanly_during_a_run(Signal::TERM).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_during_a_perf_run_exits_0_quickly() {
    stops_cleanly_during_a_run(Signal::INT).await;
}

// ---------------------------------------------------------------------------
// The helpers' own checks
// ---------------------------------------------------------------------------

#[test]
fn the_table_check_rejects_misaligned_rows() {
    let aligned = "NAME  SIZE  UUID\nm0    8.0 MiB  x\n";
    // "8.0 MiB" overflows SIZE into the gap: only two columns remain.
    assert_ne!(cells(aligned)[0], ["NAME", "SIZE", "UUID"]);
    let good = "NAME     SIZE  UUID\nm0    8.0 MiB  x\nlonger  1 B  y\n";
    assert_ne!(
        cells(good)[0],
        ["NAME", "SIZE", "UUID"],
        "row 3 is misaligned"
    );
    let good = "NAME       SIZE  UUID\nm0      8.0 MiB  x\nlonger      1 B  y\n";
    assert_eq!(
        cells(good),
        [
            ["NAME", "SIZE", "UUID"],
            ["m0", "8.0 MiB", "x"],
            ["longer", "1 B", "y"]
        ]
    );
    assert_eq!(
        key_values("name        m0\nblock size  512\n"),
        BTreeMap::from([
            ("name".into(), "m0".into()),
            ("block size".into(), "512".into())
        ])
    );
}
