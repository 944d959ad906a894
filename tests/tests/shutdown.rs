//! SIGTERM while fio writes and verifies over NBD (what a rolling update of
//! the DaemonSet does to a node under load): the daemon drains (each
//! connection answers what it has read, closes, releases its device) and
//! exits 0 within the grace period; fio loses its server but never sees a
//! data error: every block it read back matched what it wrote.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use io_engine_tests::daemon::Daemon;
use io_engine_tests::http;
use io_engine_tests::tools::{TempDir, system_tool};
use serde_json::Value;

/// fio's errno for a verification failure (EILSEQ).
const EILSEQ: i64 = 84;

/// fio, killed if still running when dropped.
struct Fio(Child);

impl Drop for Fio {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// fio writing 16 KiB blocks with two jobs over `uri` and verifying them
/// as it goes (`verify_backlog`), for at most `seconds`; its JSON report
/// goes to `report`, its messages to `log`.
fn start_fio(uri: &str, seconds: u32, report: &std::path::Path, log: &std::path::Path) -> Fio {
    let err = std::fs::File::create(log).expect("fio's log");
    let child = Command::new(system_tool("fio", "fio"))
        .args([
            "--name=term",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--rw=randwrite",
            "--bs=16k",
            "--iodepth=16",
            "--numjobs=2",
            "--size=32m",
            "--offset_increment=32m",
            "--verify=crc32c",
            "--verify_state_save=0",
            "--verify_backlog=64",
            "--verify_fatal=1",
            "--time_based",
            &format!("--runtime={seconds}"),
            "--output-format=json",
            &format!("--output={}", report.display()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .expect("cannot start fio");
    Fio(child)
}

/// Waits (at most `timeout`) for fio to exit by itself.
fn wait_fio(fio: &mut Fio, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = fio.0.try_wait().expect("fio's status") {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "fio still runs after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The jobs of fio's JSON report.
fn jobs(report: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(report).expect("fio's report");
    let json: Value = serde_json::from_str(&text[text.find('{').expect("JSON")..])
        .unwrap_or_else(|e| panic!("fio's report: {e}\n{text}"));
    json["jobs"].as_array().expect("jobs").clone()
}

/// `io_engine_bdev_ops_total{bdev="BDEV",op="OP"}` on the daemon's /metrics.
fn ops(d: &Daemon, bdev: &str, op: &str) -> f64 {
    let body = http::get(&d.metrics_url())
        .map(|r| r.text())
        .unwrap_or_default();
    let series = format!("io_engine_bdev_ops_total{{bdev=\"{bdev}\",op=\"{op}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn fio_verification_catches_a_device_that_loses_writes() {
    // The check below means something only if fio's verification fails on
    // bad data: a null device drops every write and reads zeroes.
    let dir = TempDir::new("fio-null");
    let d = Daemon::start_quiet(["--bdev", "null:///z0?size_mb=64", "--share", "z0"]);
    let (report, log) = (dir.path().join("fio.json"), dir.path().join("fio.log"));
    let mut fio = start_fio(&d.nbd_uri("z0"), 20, &report, &log);
    let status = wait_fio(&mut fio, Duration::from_secs(30));
    assert!(!status.success(), "fio verified a null device");
    let errors: Vec<i64> = jobs(&report)
        .iter()
        .map(|j| j["error"].as_i64().unwrap_or(0))
        .collect();
    assert!(errors.contains(&EILSEQ), "fio's errors: {errors:?}");
}

#[test]
fn sigterm_during_fio_verify_load_drains_and_exits_0() {
    let dir = TempDir::new("fio-term");
    let mut d = Daemon::start_quiet([
        "--bdev",
        "malloc:///t0?size_mb=64&blk_size=4096",
        "--share",
        "t0",
    ]);
    let (report, log) = (dir.path().join("fio.json"), dir.path().join("fio.log"));
    let mut fio = start_fio(&d.nbd_uri("t0"), 30, &report, &log);
    // Load: writes, and the reads that verify them, flowing.
    let deadline = Instant::now() + Duration::from_secs(20);
    while ops(&d, "t0", "read") < 2000.0 {
        assert!(
            Instant::now() < deadline,
            "fio's IO did not flow:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let (status, took) = d.terminate();
    let stderr = d.stderr();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM\n{stderr}"
    );
    assert!(took < Duration::from_secs(5), "the drain took {took:?}");
    assert!(stderr.contains("io-engine stopped"), "{stderr}");
    // Drained: nothing still in flight, no device still open when the
    // devices went (the only warning allowed is the one about hugepages).
    for line in stderr.lines() {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let level = record["level"].as_str().unwrap_or("");
        let message = record["fields"]["message"].as_str().unwrap_or("");
        assert!(
            level == "INFO"
                || level == "DEBUG"
                || message.starts_with("hugepages are not reserved"),
            "the drain logged {level}: {message}\n{stderr}"
        );
    }

    // fio loses its server and stops by itself; the loss is a connection
    // error, never a verification error.
    wait_fio(&mut fio, Duration::from_secs(10));
    let messages = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !messages.to_lowercase().contains("verify"),
        "fio saw bad data:\n{messages}"
    );
    let jobs = jobs(&report);
    assert_eq!(jobs.len(), 2);
    for j in &jobs {
        assert_ne!(
            j["error"].as_i64(),
            Some(EILSEQ),
            "a verification error: {j}"
        );
        let written = j["write"]["io_bytes"].as_u64().unwrap_or(0);
        let verified = j["read"]["io_bytes"].as_u64().unwrap_or(0);
        assert!(
            written > 0 && verified > 0,
            "fio wrote {written} and verified {verified} bytes before the signal"
        );
    }
}
