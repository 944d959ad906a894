//! The real Prometheus server (Debian package `prometheus`) for the tests
//! that check what Prometheus makes of the daemon's metrics, the dashboard's
//! queries and the alert rules: started on a free port of 127.0.0.1 with a
//! config of the test's, queried over its HTTP API, killed when dropped.
//!
//! Thread: the calling test thread; every wait is bounded.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use io_engine_api::v1 as pb;
use serde_json::Value;

use crate::daemon::Daemon;
use crate::http;

/// Longest wait for Prometheus to have scraped what a query asks for.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// The Prometheus server: killed (and reaped) when dropped.
pub struct Prometheus {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Prometheus {
    /// Starts `prometheus` on a free port of 127.0.0.1, keeping its
    /// config, data and log in `dir`; `config` gives the YAML of its config
    /// for the address it will listen on (`127.0.0.1:PORT`, for a job that
    /// scrapes Prometheus itself).
    pub fn start(dir: &Path, config: impl FnOnce(&str) -> String) -> Prometheus {
        let addr = format!("127.0.0.1:{}", free_port());
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config(&addr)).expect("prometheus.yml");
        let log = dir.join("prometheus.log");
        let out = File::create(&log).expect("the Prometheus log file");
        let err = out.try_clone().expect("the Prometheus log file");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start prometheus (Debian package `prometheus`): {e}")
            });
        Prometheus {
            child,
            url: format!("http://{addr}"),
            log,
        }
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The result vector of an instant query, or why there is none yet
    /// (not up yet, or an error). Panics if Prometheus has exited.
    pub fn try_query(&mut self, query: &str) -> Result<Vec<Value>, String> {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("prometheus exited ({status}):\n{}", self.log());
        }
        let url = format!("{}/api/v1/query?query={}", self.url, encode(query));
        let resp = http::get(&url)?;
        let body: Value = serde_json::from_slice(&resp.body)
            .map_err(|e| format!("{url}: {} is not JSON: {e}", resp.status))?;
        if resp.status != 200 || body["status"] != "success" {
            return Err(format!("{url}: {} {body}", resp.status));
        }
        body["data"]["result"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("{url}: no result vector: {body}"))
    }

    /// Polls `query` every 250 ms until `done` accepts its result, for at
    /// most [`QUERY_TIMEOUT`]; returns that result.
    pub fn query_until(&mut self, query: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + QUERY_TIMEOUT;
        loop {
            let last = self.try_query(query);
            if let Ok(result) = &last
                && done(result)
            {
                return result.clone();
            }
            if Instant::now() >= deadline {
                panic!(
                    "Prometheus query {query:?} not as expected within {QUERY_TIMEOUT:?}; \
                     last answer: {last:?}\n--- prometheus log ---\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- prometheus log ---\n{}", self.log());
        }
    }
}

/// A port of 127.0.0.1 nothing listens on (as of now).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// Percent-encodes a query parameter value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of a series in an instant-query result (`[time, "value"]`).
pub fn value(series: &Value) -> f64 {
    series["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no value in {series}"))
}

/// Runs the daemon's PerfService on `bdev` (`workload`: randread,
/// randwrite, randrw) for `seconds` at queue depth 8 in 4 KiB IOs; asserts
/// that IOs were done and none failed, and returns how many.
pub fn run_perf(d: &Daemon, bdev: &str, workload: &str, seconds: f64) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mut perf = pb::perf_service_client::PerfServiceClient::new(d.channel().await);
        let resp = perf
            .run(pb::RunPerfRequest {
                bdevs: vec![bdev.into()],
                workload: workload.into(),
                io_size: 4096,
                queue_depth: 8,
                seconds,
                ..Default::default()
            })
            .await
            .expect("PerfService.Run")
            .into_inner();
        let total = resp.total.expect("a total");
        assert!(total.ios > 0 && total.failed == 0, "{total:?}");
        total.ios
    })
}
