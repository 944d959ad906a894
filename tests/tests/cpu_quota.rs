//! The daemon sized by its cgroup CPU quota, with the real binary in a real
//! cgroup: a cgroup v1 cpu cgroup with a quota of one CPU, on a machine
//! whose cpuset allows two or more. Without core flags the daemon runs one
//! reactor and warns, naming the allowed CPUs and the quota; with
//! `--core-count 2` it runs two as asked, and warns. `engine info` and
//! `/metrics` show the choice. Also the refusals of `--core-count`.
//!
//! Needs root and the cgroup v1 cpu controller at /sys/fs/cgroup/cpu (the
//! development machines have both); without them the test fails, saying
//! so, rather than skip.

use std::path::{Path, PathBuf};
use std::time::Duration;

use io_engine_tests::available_cpus;
use io_engine_tests::daemon::{Daemon, run_daemon_to_exit};
use io_engine_tests::http;

/// Where the cgroup v1 cpu controller is mounted on the test machines.
const CPU_CONTROLLER: &str = "/sys/fs/cgroup/cpu";

/// A cgroup v1 cpu cgroup of its own, removed on drop (after the daemons in
/// it are gone), even when the test fails.
struct CpuCgroup(PathBuf);

impl CpuCgroup {
    /// A new cgroup with a quota of `quota_us` every `period_us`.
    fn new(tag: &str, quota_us: u64, period_us: u64) -> CpuCgroup {
        let controller = Path::new(CPU_CONTROLLER);
        assert!(
            controller.join("cpu.cfs_quota_us").is_file(),
            "this test needs the cgroup v1 cpu controller at {CPU_CONTROLLER} (cpu.cfs_quota_us), \
             and root to create a cgroup there; this machine has no such controller mounted"
        );
        let dir = controller.join(format!("io-engine-test-{tag}-{}", std::process::id()));
        // One left by a killed run of this test.
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| {
            panic!(
                "cannot create the cgroup {} (this test must run as root): {e}",
                dir.display()
            )
        });
        let cgroup = CpuCgroup(dir);
        cgroup.write("cpu.cfs_period_us", &period_us.to_string());
        cgroup.write("cpu.cfs_quota_us", &quota_us.to_string());
        cgroup
    }

    fn write(&self, file: &str, value: &str) {
        let path = self.0.join(file);
        std::fs::write(&path, value)
            .unwrap_or_else(|e| panic!("cannot write {value} to {}: {e}", path.display()));
    }

    /// Its `cgroup.procs`, for [`Daemon::start_in_cgroup`].
    fn procs(&self) -> PathBuf {
        self.0.join("cgroup.procs")
    }
}

impl Drop for CpuCgroup {
    fn drop(&mut self) {
        // The daemon's threads leave the cgroup as the kernel reaps them:
        // allow it a moment.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("cgroup {} left behind (still busy)", self.0.display());
    }
}

/// The allowed CPUs; the test needs at least two (a cpuset larger than the
/// one-CPU quota).
fn two_or_more_cpus() -> Vec<u32> {
    let cpus = available_cpus();
    assert!(
        cpus.len() >= 2,
        "this test needs a cpuset of two CPUs or more, this process may use {cpus:?}"
    );
    cpus
}

/// The JSON array of `cpus`.
fn json_cpus(cpus: &[u32]) -> serde_json::Value {
    serde_json::json!(cpus)
}

/// The `io_engine_reactor_info` series of a /metrics body.
fn reactor_infos(metrics: &str) -> Vec<&str> {
    metrics
        .lines()
        .filter(|l| l.starts_with("io_engine_reactor_info{"))
        .collect()
}

#[test]
fn a_one_cpu_quota_runs_one_reactor_and_says_why() {
    let cpus = two_or_more_cpus();
    let cgroup = CpuCgroup::new("quota", 100_000, 100_000);
    let d = Daemon::start_in_cgroup(&cgroup.procs(), ["--poll-mode", "adaptive"]);
    let mine = std::fs::read_to_string(format!("/proc/{}/cgroup", d.pid())).unwrap();
    assert!(
        mine.lines().any(|l| l.ends_with(&format!(
            "/{}",
            cgroup.0.file_name().unwrap().to_string_lossy()
        ))),
        "the daemon runs in the cgroup: {mine}"
    );

    let info = d.ctl_json(&["engine", "info"]);
    assert_eq!(info["cores"], json_cpus(&cpus[..1]), "{info}");
    assert_eq!(info["core_source"], "cpu quota", "{info}");
    assert_eq!(info["allowed_cpus"], json_cpus(&cpus), "{info}");
    assert_eq!(info["cpu_quota"], 1.0, "{info}");
    let text = d.ctl_ok(&["engine", "info"]);
    assert!(text.contains("core source    cpu quota\n"), "{text}");
    assert!(text.contains("cpu quota      1.00 CPUs\n"), "{text}");

    let log = d.stderr();
    let warning = format!(
        "the cpuset allows {} CPUs ({}) but the CPU quota is 1.00 CPUs: running 1 reactor",
        cpus.len(),
        io_engine::env::cores::CoreSet::from_cpus(cpus.iter().copied()).unwrap()
    );
    assert!(
        log.lines()
            .any(|l| l.contains("\"level\":\"WARN\"") && l.contains(&warning)),
        "no warning {warning:?} in the log:\n{log}"
    );

    let metrics = http::get(&d.metrics_url()).unwrap().text();
    assert_eq!(http::sample(&metrics, "io_engine_cpu_quota_cores"), 1.0);
    assert_eq!(reactor_infos(&metrics).len(), 1, "{metrics}");
    drop(d);
}

#[test]
fn a_core_count_beyond_the_quota_is_obeyed_with_a_warning() {
    let cpus = two_or_more_cpus();
    let cgroup = CpuCgroup::new("count", 100_000, 100_000);
    let d = Daemon::start_in_cgroup(
        &cgroup.procs(),
        ["--poll-mode", "adaptive", "--core-count", "2"],
    );
    let info = d.ctl_json(&["engine", "info"]);
    assert_eq!(info["cores"], json_cpus(&cpus[..2]), "{info}");
    assert_eq!(info["core_source"], "count", "{info}");
    assert_eq!(info["cpu_quota"], 1.0, "{info}");
    let log = d.stderr();
    let warning = "running 2 reactors as the core count asks, but the CPU quota is 1.00 CPUs";
    assert!(
        log.lines()
            .any(|l| l.contains("\"level\":\"WARN\"") && l.contains(warning)),
        "no warning {warning:?} in the log:\n{log}"
    );
    let metrics = http::get(&d.metrics_url()).unwrap().text();
    assert_eq!(reactor_infos(&metrics).len(), 2, "{metrics}");
    drop(d);
}

/// A daemon command line: its flags and its environment.
type Start<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);

#[test]
fn bad_core_counts_are_refused_at_start() {
    let too_many = (available_cpus().len() + 1).to_string();
    let cases: [(Start, &str); 4] = [
        (
            (&["--core-count", &too_many], &[]),
            "but this process may run on",
        ),
        ((&["--core-count", "0"], &[]), "--core-count"),
        (
            (&["--core-count", "1", "-l", "0"], &[]),
            "cannot be used with",
        ),
        (
            (&["-m", "0x1"], &[("IO_ENGINE_CORE_COUNT", "1")]),
            "cannot be used with",
        ),
    ];
    for ((args, env), expected) in cases {
        let (out, _) = run_daemon_to_exit(args, env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.lines().count() == 1 && stderr.contains(expected),
            "{args:?} {env:?}: {stderr:?} lacks {expected:?}"
        );
    }
}
