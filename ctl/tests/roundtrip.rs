//! The built `io-engine-ctl` binary against an in-process tonic server that
//! implements the three services with canned answers, over TCP on
//! 127.0.0.1 with an OS-assigned port: table and JSON output, gRPC error
//! statuses, the `stats io --watch` rates and Ctrl-C.
//!
//! Thread: each test's server runs on its own thread with a current-thread
//! tokio runtime; the test thread runs the binary as a child process.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use io_engine_api::v1::{
    Bdev, BdevIoStats, CreateBdevRequest, DestroyBdevRequest, DestroyBdevResponse, EngineInfo,
    GetBdevRequest, GetInfoRequest, GetIoStatsRequest, GetIoStatsResponse, GetPoolStatsRequest,
    GetPoolStatsResponse, GetReactorStatsRequest, GetReactorStatsResponse, Hugepages,
    ListBdevsRequest, ListBdevsResponse, OpStats, PoolCoreStats, PoolStats, ReactorStats,
    ResetIoStatsRequest, ResetIoStatsResponse,
    bdev_service_server::{BdevService, BdevServiceServer},
    engine_service_server::{EngineService, EngineServiceServer},
    stats_service_server::{StatsService, StatsServiceServer},
};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

const SECOND: u64 = 1_000_000_000;

/// The canned engine: devices m0 and n0; IO counters that grow by 1000
/// reads of 4 KiB and 500 writes of 512 B per `GetIoStats` call while the
/// reported uptime grows by exactly one second per call.
#[derive(Default)]
struct FakeEngine {
    io_calls: AtomicU64,
    /// Fired (the server shuts down) by the `GetIoStats` call numbered
    /// `.0`, if set.
    stop: Option<(u64, Mutex<Option<oneshot::Sender<()>>>)>,
}

fn device(name: &str, product: &str, size_bytes: u64, block_size: u32) -> Bdev {
    Bdev {
        name: name.into(),
        uuid: format!("00000000-0000-4000-8000-00000000000{}", name.len()),
        uri: format!(
            "{product}:///{name}?size_mb={}&blk_size={block_size}",
            size_bytes >> 20
        ),
        product: product.into(),
        block_size,
        num_blocks: size_bytes / u64::from(block_size),
        size_bytes,
        claimed: false,
        open_count: 0,
        shared: false,
        share_uri: String::new(),
        backing_path: String::new(),
        backing_kind: String::new(),
        volatile_write_cache: false,
    }
}

fn devices() -> Vec<Bdev> {
    let mut n0 = device("n0", "null", 1 << 30, 512);
    n0.claimed = true;
    n0.open_count = 1;
    vec![device("m0", "malloc", 64 << 20, 4096), n0]
}

fn no_device(name: &str) -> Status {
    Status::not_found(format!("no device named {name:?}"))
}

#[tonic::async_trait]
impl BdevService for FakeEngine {
    async fn create(&self, r: Request<CreateBdevRequest>) -> Result<Response<Bdev>, Status> {
        let uri = r.into_inner().uri;
        match uri.as_str() {
            "malloc:///m2?size_mb=64&blk_size=4096" => {
                Ok(Response::new(device("m2", "malloc", 64 << 20, 4096)))
            }
            "malloc:///m0?size_mb=64&blk_size=4096" => {
                Err(Status::already_exists("a device named \"m0\" exists"))
            }
            _ => Err(Status::invalid_argument(format!(
                "invalid device URI {uri:?}: unknown scheme"
            ))),
        }
    }

    async fn destroy(
        &self,
        r: Request<DestroyBdevRequest>,
    ) -> Result<Response<DestroyBdevResponse>, Status> {
        match r.into_inner().name.as_str() {
            "m0" => Ok(Response::new(DestroyBdevResponse {})),
            "n0" => Err(Status::failed_precondition("device \"n0\" is open")),
            other => Err(no_device(other)),
        }
    }

    async fn get(&self, r: Request<GetBdevRequest>) -> Result<Response<Bdev>, Status> {
        let name = r.into_inner().name;
        devices()
            .into_iter()
            .find(|b| b.name == name)
            .map(Response::new)
            .ok_or_else(|| no_device(&name))
    }

    async fn list(
        &self,
        _: Request<ListBdevsRequest>,
    ) -> Result<Response<ListBdevsResponse>, Status> {
        Ok(Response::new(ListBdevsResponse { bdevs: devices() }))
    }
}

fn io_counters(name: &str, n: u64) -> BdevIoStats {
    BdevIoStats {
        name: name.into(),
        read: Some(OpStats {
            ops: 1000 * n,
            bytes: 4096 * 1000 * n,
            errors: 0,
            latency_total_ns: 10_000 * 1000 * n,
            latency_min_ns: 2_000,
            latency_max_ns: 55_556,
        }),
        write: Some(OpStats {
            ops: 500 * n,
            bytes: 512 * 500 * n,
            errors: 1,
            latency_total_ns: 20_000 * 500 * n,
            latency_min_ns: 4_000,
            latency_max_ns: 99_999,
        }),
        unmap: None,
        flush: None,
        write_zeroes: None,
        copy: None,
        in_flight: 3,
    }
}

#[tonic::async_trait]
impl StatsService for FakeEngine {
    async fn get_io_stats(
        &self,
        r: Request<GetIoStatsRequest>,
    ) -> Result<Response<GetIoStatsResponse>, Status> {
        let names: Vec<&str> = match r.into_inner().name.as_deref() {
            None | Some("") => vec!["m0", "n0"],
            Some("m0") => vec!["m0"],
            Some(other) => return Err(no_device(other)),
        };
        let n = self.io_calls.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some((at, stop)) = &self.stop
            && n == *at
            && let Some(stop) = stop.lock().unwrap().take()
        {
            let _ = stop.send(());
        }
        Ok(Response::new(GetIoStatsResponse {
            stats: names.into_iter().map(|name| io_counters(name, n)).collect(),
            uptime_ns: 100 * SECOND + n * SECOND,
        }))
    }

    async fn reset_io_stats(
        &self,
        r: Request<ResetIoStatsRequest>,
    ) -> Result<Response<ResetIoStatsResponse>, Status> {
        match r.into_inner().name.as_deref() {
            None | Some("") | Some("m0") | Some("n0") => Ok(Response::new(ResetIoStatsResponse {})),
            Some(other) => Err(no_device(other)),
        }
    }

    async fn get_reactor_stats(
        &self,
        _: Request<GetReactorStatsRequest>,
    ) -> Result<Response<GetReactorStatsResponse>, Status> {
        Ok(Response::new(GetReactorStatsResponse {
            reactors: vec![
                ReactorStats {
                    core: 0,
                    cpu: 4,
                    poll_mode: "busy".into(),
                    iterations: 5_000_000,
                    busy_ns: 3 * SECOND,
                    idle_ns: SECOND,
                    messages: 17,
                },
                ReactorStats {
                    core: 1,
                    cpu: 5,
                    poll_mode: "busy".into(),
                    iterations: 4_000_000,
                    busy_ns: SECOND,
                    idle_ns: 3 * SECOND,
                    messages: 0,
                },
            ],
        }))
    }

    async fn get_pool_stats(
        &self,
        _: Request<GetPoolStatsRequest>,
    ) -> Result<Response<GetPoolStatsResponse>, Status> {
        Ok(Response::new(GetPoolStatsResponse {
            pools: vec![PoolStats {
                name: "bdev_io".into(),
                capacity: 8192,
                cache_size: 128,
                available: 8000,
                in_use: 192,
                exhausted: 2,
                cores: vec![
                    PoolCoreStats {
                        core: Some(0),
                        gets: 300,
                        puts: 250,
                        cache_hits: 270,
                        cache_misses: 30,
                        exhausted: 2,
                    },
                    PoolCoreStats {
                        core: None,
                        gets: 5,
                        puts: 5,
                        cache_hits: 0,
                        cache_misses: 5,
                        exhausted: 0,
                    },
                ],
            }],
        }))
    }
}

#[tonic::async_trait]
impl EngineService for FakeEngine {
    async fn get_info(&self, _: Request<GetInfoRequest>) -> Result<Response<EngineInfo>, Status> {
        Ok(Response::new(EngineInfo {
            version: "0.1.0".into(),
            git_revision: "0123abc".into(),
            cores: vec![4, 5],
            poll_mode: "busy".into(),
            uptime_ns: 3_723 * SECOND,
            hugepages: Some(Hugepages {
                page_size_bytes: 2 << 20,
                total: 512,
                free: 500,
            }),
            accel_modules: vec!["software".into()],
            io_pool_size: 8192,
            io_pool_cache: 128,
            accel_notes: Vec::new(),
            ..Default::default()
        }))
    }
}

/// Starts a fresh fake engine on an OS-assigned port; returns its URL.
fn start_engine() -> String {
    serve(FakeEngine::default(), std::future::pending())
}

/// Starts a fake engine that shuts down (and stops listening) after
/// answering `calls` `GetIoStats` calls; returns its URL.
fn start_engine_stopping_after(calls: u64) -> String {
    let (tx, rx) = oneshot::channel();
    let engine = FakeEngine {
        stop: Some((calls, Mutex::new(Some(tx)))),
        ..Default::default()
    };
    serve(engine, async {
        let _ = rx.await;
    })
}

/// Serves `engine` on an OS-assigned port until `shutdown`; returns its URL.
fn serve(
    engine: FakeEngine,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let engine = Arc::new(engine);
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            Server::builder()
                .add_service(BdevServiceServer::from_arc(engine.clone()))
                .add_service(StatsServiceServer::from_arc(engine.clone()))
                .add_service(EngineServiceServer::from_arc(engine))
                .serve_with_incoming_shutdown(TcpIncoming::from(listener), shutdown)
                .await
                .expect("serve");
        });
    });
    url
}

/// The binary aimed at `url`, without `IO_ENGINE_*` from the environment.
fn ctl(url: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_io-engine-ctl"));
    for var in [
        "IO_ENGINE_ENDPOINT",
        "IO_ENGINE_OUTPUT",
        "IO_ENGINE_TIMEOUT",
    ] {
        cmd.env_remove(var);
    }
    cmd.args(["--endpoint", url]);
    cmd
}

/// Runs `args` against `url`, asserts success and returns stdout.
fn ok(url: &str, args: &[&str]) -> String {
    let out = ctl(url).args(args).output().expect("the binary runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "{args:?}: {:?}", out.stderr);
    String::from_utf8(out.stdout).expect("UTF-8 stdout")
}

fn json_ok(url: &str, args: &[&str]) -> Value {
    let text = ok(url, &[&["--output", "json"], args].concat());
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

/// Runs `args` against `url` and returns the exit status and stderr.
fn fails(url: &str, args: &[&str]) -> (Option<i32>, String) {
    let out: Output = ctl(url).args(args).output().expect("the binary runs");
    assert!(out.stdout.is_empty(), "{args:?}: {:?}", out.stdout);
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn bdev_list_table() {
    let url = start_engine();
    assert_eq!(
        ok(&url, &["bdev", "list"]),
        "\
NAME  PRODUCT      SIZE  BLOCK SIZE   BLOCKS  CLAIMED  OPEN  SHARED  UUID                                  BACKING
m0    malloc   64.0 MiB        4096    16384  no          0  no      00000000-0000-4000-8000-000000000002  -
n0    null      1.0 GiB         512  2097152  yes         1  no      00000000-0000-4000-8000-000000000002  -
"
    );
}

#[test]
fn no_headers_prints_the_rows_only() {
    let url = start_engine();
    let table = ok(&url, &["bdev", "list"]);
    assert_eq!(
        ok(&url, &["bdev", "list", "--no-headers"]),
        table.split_once('\n').unwrap().1
    );
    let text = ok(&url, &["--no-headers", "stats", "reactors"]);
    assert!(!text.contains("CORE"), "{text}");
    assert_eq!(text.lines().count(), 2, "{text}");
}

#[test]
fn bdev_list_json() {
    let url = start_engine();
    let v = json_ok(&url, &["bdev", "list"]);
    assert_eq!(
        v["bdevs"][0],
        json!({
            "name": "m0",
            "uuid": "00000000-0000-4000-8000-000000000002",
            "uri": "malloc:///m0?size_mb=64&blk_size=4096",
            "product": "malloc",
            "block_size": 4096,
            "num_blocks": 16384,
            "size_bytes": 67_108_864,
            "claimed": false,
            "open_count": 0,
            "shared": false,
            "share_uri": "",
            "backing_path": "",
            "backing_kind": "",
            "volatile_write_cache": false,
        })
    );
    assert_eq!(v["bdevs"][1]["size_bytes"], json!(1u64 << 30));
    assert_eq!(v.as_object().unwrap().len(), 1, "only \"bdevs\": {v}");
}

#[test]
fn bdev_get_create_destroy() {
    let url = start_engine();
    let get = ok(&url, &["bdev", "get", "n0"]);
    assert!(get.starts_with("name         n0\n"), "{get}");
    assert!(
        get.contains("\nsize         1.0 GiB (1073741824 bytes)\n"),
        "{get}"
    );
    assert!(get.contains("\nclaimed      yes\n"), "{get}");

    let created = json_ok(
        &url,
        &["bdev", "create", "malloc:///m2?size_mb=64&blk_size=4096"],
    );
    assert_eq!(created["name"], "m2");
    assert_eq!(created["size_bytes"], json!(64u64 << 20));

    assert_eq!(
        ok(&url, &["bdev", "destroy", "m0"]),
        "destroyed device \"m0\"\n"
    );
    assert_eq!(json_ok(&url, &["bdev", "destroy", "m0"]), json!({}));
}

#[test]
fn server_errors_are_exit_1_with_code_name_and_message() {
    let url = start_engine();
    let cases: [(&[&str], &str); 6] = [
        (&["bdev", "get", "x"], "NOT_FOUND: no device named \"x\""),
        (
            &["bdev", "create", "bogus:///b0"],
            "INVALID_ARGUMENT: invalid device URI \"bogus:///b0\": unknown scheme",
        ),
        (
            &["bdev", "create", "malloc:///m0?size_mb=64&blk_size=4096"],
            "ALREADY_EXISTS: a device named \"m0\" exists",
        ),
        (
            &["bdev", "destroy", "n0"],
            "FAILED_PRECONDITION: device \"n0\" is open",
        ),
        (&["stats", "io", "zz"], "NOT_FOUND: no device named \"zz\""),
        (
            &["stats", "reset", "zz"],
            "NOT_FOUND: no device named \"zz\"",
        ),
    ];
    for (args, message) in cases {
        for output in ["table", "json"] {
            let (code, stderr) = fails(&url, &[&["--output", output], args].concat());
            assert_eq!(code, Some(1), "{args:?}");
            assert_eq!(
                stderr,
                format!("io-engine-ctl: error: {message}\n"),
                "{args:?}"
            );
        }
    }
}

#[test]
fn stats_io_cumulative() {
    let url = start_engine();
    assert_eq!(
        ok(&url, &["stats", "io", "m0"]),
        "\
DEVICE  OP             OPS      BYTES  ERRORS  AVG µs  MIN µs  MAX µs  IN FLIGHT
m0      read          1000    3.9 MiB       0   10.00    2.00   55.56          3
m0      write          500  250.0 KiB       1   20.00    4.00  100.00
m0      unmap            0        0 B       0       -       -       -
m0      flush            0        0 B       0       -       -       -
m0      write_zeroes     0        0 B       0       -       -       -
m0      copy             0        0 B       0       -       -       -
"
    );
    let v = json_ok(&url, &["stats", "io"]);
    assert_eq!(v["uptime_ns"], json!(102 * SECOND));
    let stats = v["stats"].as_array().unwrap();
    assert_eq!(stats.len(), 2);
    assert_eq!(stats[1]["name"], "n0");
    assert_eq!(
        stats[0]["read"],
        json!({"ops": 2000, "bytes": 8_192_000, "errors": 0,
               "latency_total_ns": 20_000_000, "latency_min_ns": 2000, "latency_max_ns": 55_556})
    );
    assert_eq!(stats[0]["unmap"]["ops"], 0);
    assert_eq!(stats[0]["in_flight"], 3);
}

#[test]
fn stats_io_watch_json_lines_use_the_engine_uptime() {
    let url = start_engine();
    // The client waits 0.05 s per interval, but the engine's uptime moves by
    // 1 s per reading: the rates must be per engine second.
    let text = ok(
        &url,
        &[
            "--output", "json", "stats", "io", "--watch", "0.05", "--count", "3",
        ],
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["uptime_ns"], json!((102 + i as u64) * SECOND));
        assert_eq!(line["interval_ns"], json!(SECOND));
        let names: Vec<&str> = line["stats"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["m0", "n0"]);
        assert_eq!(
            line["stats"][0],
            json!({"name": "m0", "read_iops": 1000.0, "write_iops": 500.0, "total_iops": 1500.0,
                   "read_bytes_per_sec": 4_096_000.0, "write_bytes_per_sec": 256_000.0,
                   "total_bytes_per_sec": 4_352_000.0})
        );
    }
}

#[test]
fn stats_io_watch_table() {
    let url = start_engine();
    assert_eq!(
        ok(&url, &["stats", "io", "m0", "-w", "0.05", "--count", "2"]),
        "\
engine uptime 1m 42s, interval 1.000 s
DEVICE  READ IOPS  WRITE IOPS  TOTAL IOPS  READ MiB/s  WRITE MiB/s  TOTAL MiB/s
m0           1000         500        1500        3.91         0.24         4.15

engine uptime 1m 43s, interval 1.000 s
DEVICE  READ IOPS  WRITE IOPS  TOTAL IOPS  READ MiB/s  WRITE MiB/s  TOTAL MiB/s
m0           1000         500        1500        3.91         0.24         4.15
"
    );
}

#[test]
fn stats_io_watch_of_an_unknown_device_fails() {
    let url = start_engine();
    let (code, stderr) = fails(&url, &["stats", "io", "nope", "--watch", "0.05"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "io-engine-ctl: error: NOT_FOUND: no device named \"nope\"\n"
    );
}

#[test]
fn an_engine_that_goes_away_during_a_watch_is_exit_1() {
    // Readings 1 and 2 make the first interval; the engine then stops.
    let url = start_engine_stopping_after(2);
    let out = ctl(&url)
        .args([
            "--output", "json", "stats", "io", "--watch", "0.05", "--count", "5",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("io-engine-ctl: error: UNAVAILABLE: "),
        "{stderr}"
    );
    assert!(
        stderr.ends_with(&format!(
            "(engine at {url}; check that the io-engine daemon runs there)\n"
        )),
        "{stderr}"
    );
}

#[test]
fn a_closed_stdout_ends_a_watch_quietly() {
    // As with `io-engine-ctl stats io --watch 1 | head -1`.
    let url = start_engine();
    let mut child = ctl(&url)
        .args(["--output", "json", "stats", "io", "--watch", "0.05"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    lines.next().expect("a first interval").unwrap();
    drop(lines);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stderr).unwrap(), "");
}

#[test]
fn ctrl_c_ends_a_watch_with_exit_0() {
    let url = start_engine();
    let mut child = ctl(&url)
        .args(["--output", "json", "stats", "io", "--watch", "0.05"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Once a line is out, the Ctrl-C handler is installed.
    let first = lines.next().expect("a first interval").unwrap();
    assert!(first.starts_with("{\"uptime_ns\":"), "{first}");
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    for line in lines {
        let line = line.unwrap();
        serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
}

#[test]
fn stats_reactors_pools_reset() {
    let url = start_engine();
    assert_eq!(
        ok(&url, &["stats", "reactors"]),
        "\
CORE  CPU  POLL MODE  ITERATIONS     BUSY     IDLE  BUSY %  MESSAGES
   0    4  busy          5000000  3.000 s  1.000 s    75.0        17
   1    5  busy          4000000  1.000 s  3.000 s    25.0         0
"
    );
    let v = json_ok(&url, &["stats", "reactors"]);
    assert_eq!(v["reactors"][0]["busy_ns"], json!(3 * SECOND));
    assert_eq!(v["reactors"].as_array().unwrap().len(), 2);

    assert_eq!(
        ok(&url, &["stats", "pools"]),
        "\
POOL     CAPACITY  CACHE SIZE  AVAILABLE  IN USE  EXHAUSTED
bdev_io      8192         128       8000     192          2

POOL      CORE  GETS  PUTS  CACHE HITS  CACHE MISSES  HIT %  EXHAUSTED
bdev_io      0   300   250         270            30   90.0          2
bdev_io  other     5     5           0             5    0.0          0
"
    );
    let v = json_ok(&url, &["stats", "pools"]);
    assert_eq!(v["pools"][0]["cores"][1]["core"], Value::Null);
    assert_eq!(v["pools"][0]["capacity"], 8192);

    assert_eq!(
        ok(&url, &["stats", "reset"]),
        "reset the IO counters of every device\n"
    );
    assert_eq!(
        ok(&url, &["stats", "reset", "m0"]),
        "reset the IO counters of device \"m0\"\n"
    );
    assert_eq!(json_ok(&url, &["stats", "reset"]), json!({}));
}

#[test]
fn engine_info_table_and_json_from_the_environment() {
    let url = start_engine();
    assert_eq!(
        ok(&url, &["engine", "info"]),
        "\
version        0.1.0
git revision   0123abc
cores          4, 5
poll mode      busy
uptime         1h 02m 03s
hugepages      2.0 MiB pages: 512 total, 500 free
accel modules  software
io pool size   8192
io pool cache  128
"
    );
    let out = ctl(&url)
        .env("IO_ENGINE_OUTPUT", "json")
        .args(["engine", "info"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        json!({
            "version": "0.1.0",
            "git_revision": "0123abc",
            "cores": [4, 5],
            "poll_mode": "busy",
            "uptime_ns": 3_723 * SECOND,
            "hugepages": {"page_size_bytes": 2 << 20, "total": 512, "free": 500},
            "accel_modules": ["software"],
            "io_pool_size": 8192,
            "io_pool_cache": 128,
            "accel_notes": [],
            "core_source": "",
            "allowed_cpus": [],
            "cpu_quota": 0.0,
        })
    );
}
