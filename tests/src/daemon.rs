//! The `io-engine` daemon under test: started on kernel-chosen ports of
//! 127.0.0.1, found by its `io-engine serving` log line, driven through gRPC
//! and `io-engine-ctl`, and always killed at the end of its test.
//!
//! Thread: the test threads. A [`Daemon`] owns one background thread that
//! drains the daemon's stderr into a shared buffer (so the daemon never
//! blocks on a full pipe and the test can read its log).

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use tonic::transport::{Channel, Endpoint};

use crate::{available_cpus, bin, bin_in, output_with_timeout};

/// Longest wait for the daemon's `io-engine serving` line.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest wait for the daemon to exit after a signal before it is killed
/// and the test fails.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest a run of `io-engine-ctl` may take.
pub const CTL_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest a daemon expected to fail at start may run.
pub const FAIL_TIMEOUT: Duration = Duration::from_secs(10);

/// Per-request deadline of [`Daemon::channel`].
pub const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest wait for a gRPC connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The package of the CLI.
pub const CTL_PACKAGE: &str = "io-engine-ctl";

/// The release build of the daemon, built first if needed.
pub fn daemon_bin() -> PathBuf {
    bin("io-engine")
}

/// The release build of `io-engine-ctl`, built first if needed.
pub fn ctl_bin() -> PathBuf {
    bin_in(CTL_PACKAGE, "io-engine-ctl")
}

/// Flags that keep a test daemon cheap: adaptive polling (reactors sleep
/// when idle) on one core, the first CPU this process may use.
pub fn quiet_args() -> Vec<String> {
    let cpu = available_cpus()[0];
    vec![
        "--poll-mode".into(),
        "adaptive".into(),
        "-l".into(),
        cpu.to_string(),
    ]
}

/// A command for `program` whose environment has no `IO_ENGINE_*` variable
/// of the test process (they would change the flags' defaults) and logs at
/// info level.
pub fn clean_command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("IO_ENGINE_") {
            cmd.env_remove(&key);
        }
    }
    cmd.env("RUST_LOG", "info");
    cmd
}

/// Runs the daemon with exactly `args` and `env` (nothing added) until it
/// exits, for flags that must make it fail at start; kills it and panics if
/// it runs longer than [`FAIL_TIMEOUT`]. Returns its output and how long it ran.
pub fn run_daemon_to_exit<I, S>(args: I, env: &[(&str, &str)]) -> (Output, Duration)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = clean_command(daemon_bin());
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let out = output_with_timeout(cmd, FAIL_TIMEOUT);
    (out, started.elapsed())
}

/// A running daemon. Dropping it kills the process (SIGKILL) if it still
/// runs, so no test leaves one behind, even when it fails.
pub struct Daemon {
    child: Child,
    grpc: SocketAddr,
    metrics: SocketAddr,
    nbd: Option<SocketAddr>,
    log: Arc<Mutex<String>>,
    exited: Option<ExitStatus>,
}

impl Daemon {
    /// Starts the daemon with `--grpc-addr 127.0.0.1:0 --metrics-addr
    /// 127.0.0.1:0 --log-format json` (and `--nbd-addr 127.0.0.1:0` unless
    /// `args` or `env` choose the NBD address) and then `args`, and waits (at most
    /// [`START_TIMEOUT`]) for its serving line. Panics, with its stderr, if it
    /// exits or stays silent before that.
    pub fn start<I, S>(args: I) -> Daemon
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::start_with_env(args, &[])
    }

    /// [`Daemon::start`] with [`quiet_args`] before `args`.
    pub fn start_quiet<I, S>(args: I) -> Daemon
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut all: Vec<std::ffi::OsString> = quiet_args().into_iter().map(Into::into).collect();
        all.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        Self::start(all)
    }

    /// [`Daemon::start`] with extra environment variables.
    pub fn start_with_env<I, S>(args: I, env: &[(&str, &str)]) -> Daemon
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::spawn(clean_command(daemon_bin()), args, env)
    }

    /// [`Daemon::start`] inside the cgroup whose `cgroup.procs` file is
    /// `procs`: a shell writes its pid there, then execs the daemon, so the
    /// daemon runs in the cgroup from its first instruction.
    pub fn start_in_cgroup<I, S>(procs: &Path, args: I) -> Daemon
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = clean_command("sh");
        cmd.args(["-c", r#"echo $$ > "$0" && exec "$@""#])
            .arg(procs)
            .arg(daemon_bin());
        Self::spawn(cmd, args, &[])
    }

    /// Starts `cmd` (the daemon, or a command that execs it with the
    /// arguments it is given) as [`Daemon::start_with_env`] describes.
    fn spawn<I, S>(mut cmd: Command, args: I, env: &[(&str, &str)]) -> Daemon
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        // Build the CLI now too: a build in the middle of a test (while a perf
        // run holds a device, say) would upset its timing.
        ctl_bin();
        let args: Vec<std::ffi::OsString> =
            args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        cmd.args([
            "--grpc-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ]);
        // The NBD listener's default port (10809) would be shared by every
        // daemon of a test run: a kernel-chosen one unless the test picks one.
        if !chooses_nbd_addr(&args, env) {
            cmd.args(["--nbd-addr", "127.0.0.1:0"]);
        }
        // The same for NVMe/TCP's default port (4420).
        if !args
            .iter()
            .any(|a| a.to_str().is_some_and(|a| a.starts_with("--nvmf-addr")))
            && !env.iter().any(|(k, _)| *k == "IO_ENGINE_NVMF_ADDR")
        {
            cmd.args(["--nvmf-addr", "127.0.0.1:0"]);
        }
        cmd.args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let shown = format!("{cmd:?}");
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        let lines = drain_stderr(child.stderr.take().expect("stderr is piped"), log.clone());
        // From here on a panic must not leave the child running.
        let mut guard = KillOnDrop(Some(child));
        let (grpc, metrics, nbd) = match wait_for_serving(&lines) {
            Ok(addrs) => addrs,
            Err(why) => {
                let child = guard.0.as_mut().expect("the child is held");
                let status = wait_timeout(child, Duration::from_secs(2));
                let _ = child.kill();
                let _ = child.wait();
                let text = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
                panic!(
                    "io-engine did not start ({why}; exit status {status:?})\n\
                     command: {shown}\n--- stderr ---\n{text}"
                );
            }
        };
        let child = guard.0.take().expect("the child is held");
        Daemon {
            child,
            grpc,
            metrics,
            nbd,
            log,
            exited: None,
        }
    }

    /// The first NVMe/TCP listening address, from the serving line.
    pub fn nvmf_addr(&self) -> SocketAddr {
        self.nvmf_addrs()[0]
    }

    /// Every NVMe/TCP listening address, from the serving line.
    pub fn nvmf_addrs(&self) -> Vec<SocketAddr> {
        let log = self
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        log.lines()
            .find_map(serving_nvmf_addresses)
            .filter(|a| !a.is_empty())
            .expect("the serving line names an NVMe/TCP address")
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The bound gRPC address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc
    }

    /// The bound metrics address.
    pub fn metrics_addr(&self) -> SocketAddr {
        self.metrics
    }

    /// The bound NBD (TCP) address, as the serving line gives it. Panics if
    /// that line had none.
    pub fn nbd_addr(&self) -> SocketAddr {
        self.nbd
            .unwrap_or_else(|| panic!("the serving line gave no nbd address\n{}", self.stderr()))
    }

    /// `nbd://127.0.0.1:PORT/EXPORT`: the URI of export `export` over TCP.
    pub fn nbd_uri(&self, export: &str) -> String {
        format!("nbd://{}/{export}", self.nbd_addr())
    }

    /// `http://127.0.0.1:PORT` of the gRPC API.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// `http://127.0.0.1:PORT/metrics`.
    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.metrics)
    }

    /// What the daemon wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A gRPC channel to the daemon; each request has a [`RPC_TIMEOUT`]
    /// deadline.
    pub async fn channel(&self) -> Channel {
        self.channel_with_timeout(RPC_TIMEOUT).await
    }

    /// A gRPC channel whose requests have a deadline of `timeout`.
    pub async fn channel_with_timeout(&self, timeout: Duration) -> Channel {
        let endpoint = Endpoint::from_shared(self.grpc_endpoint())
            .expect("a valid URL")
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(timeout);
        match tokio::time::timeout(CONNECT_TIMEOUT * 2, endpoint.connect()).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(e)) => panic!(
                "cannot connect to {}: {e:?}\n--- daemon stderr ---\n{}",
                self.grpc_endpoint(),
                self.stderr()
            ),
            Err(_) => panic!("no connection to {} within 10 s", self.grpc_endpoint()),
        }
    }

    /// Runs `io-engine-ctl --endpoint URL ARGS...` (at most [`CTL_TIMEOUT`])
    /// and returns its output.
    pub fn ctl<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = clean_command(ctl_bin());
        cmd.arg("--endpoint").arg(self.grpc_endpoint()).args(args);
        output_with_timeout(cmd, CTL_TIMEOUT)
    }

    /// Runs `io-engine-ctl ARGS` and asserts it succeeded with nothing on
    /// stderr; returns its stdout.
    pub fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "io-engine-ctl {args:?} failed ({}):\n{stderr}\n{stdout}",
            out.status
        );
        assert!(
            stderr.is_empty(),
            "io-engine-ctl {args:?} wrote on stderr: {stderr}"
        );
        stdout
    }

    /// [`Daemon::ctl_ok`] with `--output json`; parses what it printed.
    pub fn ctl_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["--output", "json"]);
        let text = self.ctl_ok(&all);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("io-engine-ctl {all:?} printed no JSON ({e}):\n{text}"))
    }

    /// The daemon's resident set size (VmRSS in /proc/PID/status), KiB.
    pub fn rss_kib(&self) -> u64 {
        let path = format!("/proc/{}/status", self.pid());
        let status =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmRSS in {path}:\n{status}"))
    }

    /// Sends `signal` to the daemon.
    pub fn signal(&self, signal: Signal) {
        assert!(self.exited.is_none(), "the daemon has already exited");
        let pid = Pid::from_raw(self.pid() as i32).expect("a child's pid is positive");
        // The child is not reaped yet (`exited` is unset), so the pid is still ours.
        rustix::process::kill_process(pid, signal)
            .unwrap_or_else(|e| panic!("cannot send {signal:?} to io-engine: {e}"));
    }

    /// Sends SIGTERM and waits (at most [`STOP_TIMEOUT`]) for the daemon to
    /// exit: its exit status and how long the exit took.
    pub fn terminate(&mut self) -> (ExitStatus, Duration) {
        self.stop_with(Signal::TERM)
    }

    /// Sends `signal` and waits (at most [`STOP_TIMEOUT`]) for the daemon to
    /// exit; kills it and panics, with its stderr, if it does not.
    pub fn stop_with(&mut self, signal: Signal) -> (ExitStatus, Duration) {
        let started = Instant::now();
        self.signal(signal);
        match wait_timeout(&mut self.child, STOP_TIMEOUT) {
            Some(status) => {
                self.exited = Some(status);
                (status, started.elapsed())
            }
            None => {
                let _ = self.child.kill();
                self.exited = self.child.wait().ok();
                panic!(
                    "io-engine still ran {STOP_TIMEOUT:?} after {signal:?} and was killed\n\
                     --- stderr ---\n{}",
                    self.stderr()
                );
            }
        }
    }

    /// Whether the process is still running (not exited).
    pub fn is_running(&mut self) -> bool {
        if self.exited.is_some() {
            return false;
        }
        match self.child.try_wait() {
            Ok(Some(status)) => {
                self.exited = Some(status);
                false
            }
            _ => true,
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.exited.is_none() {
            // It may have exited by itself; either way it is reaped here.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- io-engine (gRPC {}) stderr ---\n{}",
                self.grpc,
                self.stderr()
            );
        }
    }
}

/// Kills the child it holds when dropped (a start that panicked).
struct KillOnDrop(Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `child` until it exits or `timeout` passes.
fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => return None,
        }
    }
}

/// Appends every stderr line to `log` and sends it on the returned channel
/// (until the receiver is gone); the channel closes at end of file.
fn drain_stderr(stderr: ChildStderr, log: Arc<Mutex<String>>) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    log.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push_str(&line);
                    let _ = tx.send(line.trim_end().to_owned());
                }
            }
        }
    });
    rx
}

/// Whether `args` or `env` set the NBD listening address themselves.
fn chooses_nbd_addr(args: &[std::ffi::OsString], env: &[(&str, &str)]) -> bool {
    args.iter().any(|a| {
        let a = a.to_string_lossy();
        a == "--nbd-addr" || a.starts_with("--nbd-addr=")
    }) || env.iter().any(|(k, _)| *k == "IO_ENGINE_NBD_ADDR")
}

/// Reads log lines until the serving line and returns its gRPC, metrics
/// and NBD addresses.
fn wait_for_serving(
    lines: &Receiver<String>,
) -> Result<(SocketAddr, SocketAddr, Option<SocketAddr>), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                if let Some((grpc, metrics)) = serving_addresses(&line)? {
                    return Ok((grpc, metrics, serving_nbd_address(&line)));
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                return Err(format!("no serving line within {START_TIMEOUT:?}"));
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err("stderr closed before the serving line".into());
            }
        }
    }
}

/// The addresses in a JSON `io-engine serving` log line; `None` for any
/// other line.
pub fn serving_addresses(line: &str) -> Result<Option<(SocketAddr, SocketAddr)>, String> {
    let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
        return Ok(None);
    };
    let fields = &event["fields"];
    if fields["message"] != "io-engine serving" {
        return Ok(None);
    }
    let addr = |key: &str| -> Result<SocketAddr, String> {
        fields[key]
            .as_str()
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| format!("the serving line has no {key} address: {line}"))
    };
    Ok(Some((addr("grpc")?, addr("metrics")?)))
}

/// The `nbd` address of a JSON `io-engine serving` log line; `None` for any
/// other line, or a serving line without one.
pub fn serving_nbd_address(line: &str) -> Option<SocketAddr> {
    let event = serde_json::from_str::<serde_json::Value>(line).ok()?;
    let fields = &event["fields"];
    if fields["message"] != "io-engine serving" {
        return None;
    }
    fields["nbd"].as_str()?.parse().ok()
}

/// The first `nvmf` address of a JSON `io-engine serving` log line;
/// `None` for any other line, or a serving line without one.
pub fn serving_nvmf_address(line: &str) -> Option<SocketAddr> {
    serving_nvmf_addresses(line)?.first().copied()
}

/// Every `nvmf` address of a JSON `io-engine serving` log line, in the
/// order of the `--nvmf-addr` flags; `None` for any other line.
pub fn serving_nvmf_addresses(line: &str) -> Option<Vec<SocketAddr>> {
    let event = serde_json::from_str::<serde_json::Value>(line).ok()?;
    let fields = &event["fields"];
    if fields["message"] != "io-engine serving" {
        return None;
    }
    fields["nvmf"]
        .as_str()?
        .split(',')
        .map(|a| a.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serving_line_gives_both_addresses() {
        let line = r#"{"timestamp":"t","level":"INFO","fields":{"message":"io-engine serving","grpc":"127.0.0.1:1234","metrics":"127.0.0.1:5678","devices":0},"target":"io_engine"}"#;
        let (grpc, metrics) = serving_addresses(line).unwrap().unwrap();
        assert_eq!(grpc.port(), 1234);
        assert_eq!(metrics.port(), 5678);
        assert_eq!(serving_addresses("plain text").unwrap(), None);
        let other = r#"{"fields":{"message":"device created"}}"#;
        assert_eq!(serving_addresses(other).unwrap(), None);
        let broken = r#"{"fields":{"message":"io-engine serving","grpc":"x"}}"#;
        assert!(serving_addresses(broken).is_err());
    }

    #[test]
    fn the_serving_line_gives_the_nbd_address() {
        let line = r#"{"fields":{"message":"io-engine serving","grpc":"127.0.0.1:1","metrics":"127.0.0.1:2","nbd":"127.0.0.1:10809"}}"#;
        assert_eq!(
            serving_nbd_address(line),
            Some("127.0.0.1:10809".parse().unwrap())
        );
        let without = r#"{"fields":{"message":"io-engine serving","grpc":"127.0.0.1:1"}}"#;
        assert_eq!(serving_nbd_address(without), None);
        let other = r#"{"fields":{"message":"device created","nbd":"127.0.0.1:3"}}"#;
        assert_eq!(serving_nbd_address(other), None);
    }

    #[test]
    fn a_chosen_nbd_address_is_kept() {
        let os = |v: &[&str]| {
            v.iter()
                .map(Into::into)
                .collect::<Vec<std::ffi::OsString>>()
        };
        assert!(!chooses_nbd_addr(&os(&["--share", "m0"]), &[]));
        assert!(chooses_nbd_addr(&os(&["--nbd-addr", "127.0.0.1:5"]), &[]));
        assert!(chooses_nbd_addr(&os(&["--nbd-addr=127.0.0.1:5"]), &[]));
        assert!(chooses_nbd_addr(
            &[],
            &[("IO_ENGINE_NBD_ADDR", "127.0.0.1:5")]
        ));
        assert!(!chooses_nbd_addr(&os(&["--nbd-socket", "/tmp/s"]), &[]));
    }
}
