//! Control-plane benchmarks of the real daemon binary, driven by a real gRPC
//! client and a plain HTTP scraper: start-up time to a serving gRPC port,
//! idle RSS, Create+Destroy latency of a 1 MiB malloc device, and the time
//! of a /metrics scrape with 100 devices.
//!
//! Run: `cargo bench -p io-engine --bench control_plane [-- --json]`.
//! Thread: the bench's main thread and a small tokio runtime for the client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use io_engine_api::v1 as pb;
use pb::bdev_service_client::BdevServiceClient;

const DAEMON: &str = env!("CARGO_BIN_EXE_io-engine");

/// A daemon on OS-assigned loopback ports; killed on drop.
struct Daemon {
    child: Child,
    grpc: String,
    metrics: String,
}

impl Daemon {
    fn start(core: u32) -> (Daemon, Duration) {
        let t0 = Instant::now();
        let mut child = Command::new(DAEMON)
            .args(["-l", &core.to_string(), "--grpc-addr", "127.0.0.1:0"])
            .args(["--metrics-addr", "127.0.0.1:0", "--log-format", "json"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the daemon");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let (grpc, metrics) = loop {
            let line = lines.next().expect("daemon exited").unwrap();
            if !line.contains("io-engine serving") {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            let f = &v["fields"];
            break (
                f["grpc"].as_str().unwrap().to_string(),
                f["metrics"].as_str().unwrap().to_string(),
            );
        };
        // Serving = a gRPC call answers.
        let rt = runtime();
        rt.block_on(async {
            loop {
                if let Ok(mut c) = pb::engine_service_client::EngineServiceClient::connect(format!(
                    "http://{grpc}"
                ))
                .await
                    && c.get_info(pb::GetInfoRequest {}).await.is_ok()
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let ready = t0.elapsed();
        std::thread::spawn(move || for _ in lines {});
        (
            Daemon {
                child,
                grpc,
                metrics,
            },
            ready,
        )
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn scrape(addr: &str) -> (Duration, usize) {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = Vec::new();
    s.read_to_end(&mut body).unwrap();
    (t.elapsed(), body.len())
}

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let core = io_engine::env::cores::allowed_cpus().unwrap().cpus()[0];

    // Start-up: 10 starts, median and worst.
    let mut starts: Vec<Duration> = (0..10).map(|_| Daemon::start(core).1).collect();
    starts.sort();
    let (daemon, _) = Daemon::start(core);
    std::thread::sleep(Duration::from_secs(1));
    let rss = daemon.rss_kib();

    let rt = runtime();
    let (mut create, mut destroy, mut pair) = (Vec::new(), Vec::new(), Vec::new());
    rt.block_on(async {
        let mut c = BdevServiceClient::connect(format!("http://{}", daemon.grpc))
            .await
            .unwrap();
        for i in 0..1000 {
            let name = format!("b{i}");
            let t0 = Instant::now();
            c.create(pb::CreateBdevRequest {
                uri: format!("malloc:///{name}?size_mb=1"),
            })
            .await
            .unwrap();
            let t1 = Instant::now();
            c.destroy(pb::DestroyBdevRequest { name }).await.unwrap();
            let t2 = Instant::now();
            create.push(t1 - t0);
            destroy.push(t2 - t1);
            pair.push(t2 - t0);
        }
        for i in 0..100 {
            c.create(pb::CreateBdevRequest {
                uri: format!("malloc:///s{i}?size_mb=1"),
            })
            .await
            .unwrap();
        }
    });
    for v in [&mut create, &mut destroy, &mut pair] {
        v.sort();
    }
    let _ = scrape(&daemon.metrics); // warm
    let mut scrapes: Vec<(Duration, usize)> = (0..100).map(|_| scrape(&daemon.metrics)).collect();
    scrapes.sort();
    let scrape_times: Vec<Duration> = scrapes.iter().map(|s| s.0).collect();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;

    if json {
        println!(
            "{}",
            serde_json::json!({
                "startup_ms": { "p50": ms(percentile(&starts, 0.5)), "max": ms(starts[starts.len() - 1]) },
                "idle_rss_mib": rss as f64 / 1024.0,
                "create_ms": { "p50": ms(percentile(&create, 0.5)), "p99": ms(percentile(&create, 0.99)) },
                "destroy_ms": { "p50": ms(percentile(&destroy, 0.5)), "p99": ms(percentile(&destroy, 0.99)) },
                "create_destroy_ms": { "p50": ms(percentile(&pair, 0.5)), "p99": ms(percentile(&pair, 0.99)) },
                "scrape_100_devices_ms": { "p50": ms(percentile(&scrape_times, 0.5)), "p99": ms(percentile(&scrape_times, 0.99)), "bytes": scrapes[0].1 },
            })
        );
    } else {
        println!(
            "start-up to a serving gRPC port (10 starts): p50 {:.1} ms, max {:.1} ms",
            ms(percentile(&starts, 0.5)),
            ms(starts[starts.len() - 1])
        );
        println!("idle RSS after 1 s: {:.1} MiB", rss as f64 / 1024.0);
        for (what, v) in [
            ("Create", &create),
            ("Destroy", &destroy),
            ("Create+Destroy", &pair),
        ] {
            println!(
                "{what} of a 1 MiB malloc device (1000x, one client): p50 {:.3} ms, p99 {:.3} ms",
                ms(percentile(v, 0.5)),
                ms(percentile(v, 0.99))
            );
        }
        println!(
            "GET /metrics with 100 devices (100x): p50 {:.2} ms, p99 {:.2} ms, {} bytes",
            ms(percentile(&scrape_times, 0.5)),
            ms(percentile(&scrape_times, 0.99)),
            scrapes[0].1
        );
    }
}
