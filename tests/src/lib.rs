//! Helpers for the end-to-end tests in `tests/tests/`: locating and running
//! the workspace's release binaries.
//!
//! Thread: the test threads. [`bin`] builds each binary at most once per test
//! process, behind a mutex, so tests running in parallel share one build.
//!
//! [`accel_perf`] drives accel-perf, bdev-perf's accel report and a
//! daemon's PerfService for the accel tests; [`backing`] makes the files, loop devices and ext4 mounts the
//! `uring://` and `aio://` devices sit on; [`certs`] writes a throw-away
//! PKI for the TLS tests; [`daemon`] runs the `io-engine` daemon under
//! test; [`grpcio`] runs Python gRPC clients (grpcio, stubs from
//! `proto/`) against it; [`http`] is the tiny HTTP client the tests read
//! `/metrics` and Prometheus's API with; [`prometheus`] runs the real
//! Prometheus server; [`tools`] finds the linters and validators of the
//! deployment files; [`vm`] runs scripts in a micro-VM with the real Linux
//! initiators.

pub mod accel_perf;
pub mod backing;
pub mod certs;
pub mod daemon;
pub mod grpcio;
pub mod http;
pub mod nvmf;
pub mod prometheus;
pub mod tools;
pub mod vm;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long [`run`] lets a binary run before killing it and failing the test.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The package holding the engine's binaries (bdev-perf, accel-perf, the daemon).
pub const ENGINE_PACKAGE: &str = "io-engine";

/// The cargo features the engine's binaries are built with: the I/OAT and
/// DSA device models, which the tests run (`--ioat-model`, `--dsa-model`). Every build of them
/// (here, the benches, docs/performance.md) uses this one set, so cargo
/// does not rebuild the engine between them.
pub const ENGINE_FEATURES: &str = "ioat-model,dsa-model";

/// The workspace root: the parent of this crate's directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives inside the workspace")
        .to_path_buf()
}

/// Cargo's target directory: `CARGO_TARGET_DIR` if set (a relative value is
/// taken from the workspace root), else `target/` in the workspace root.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => workspace_root().join(dir),
        _ => workspace_root().join("target"),
    }
}

/// Binaries already built by this process, by package and name.
static BUILT: Mutex<BTreeMap<(String, String), PathBuf>> = Mutex::new(BTreeMap::new());

/// The path of the release build of the engine binary `name`
/// (`target/release/NAME`), built first if needed.
///
/// See [`bin_in`].
pub fn bin(name: &str) -> PathBuf {
    bin_in(ENGINE_PACKAGE, name)
}

/// The path of the release build of binary `name` of workspace package
/// `package`.
///
/// The first call for a binary runs `cargo build --release -p PACKAGE --bin
/// NAME` (with `--features` [`ENGINE_FEATURES`] for [`ENGINE_PACKAGE`]): cargo itself decides whether the binary is missing or older than
/// its sources, and does nothing (in well under a second) when it is up to
/// date. Later calls return the path found then. Concurrent callers wait for
/// the one build. Panics, with cargo's output, if the build fails.
pub fn bin_in(package: &str, name: &str) -> PathBuf {
    // A panicking build leaves the map as it was; the next caller retries.
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    let key = (package.to_string(), name.to_string());
    if let Some(path) = built.get(&key) {
        return path.clone();
    }
    let path = build(package, name);
    built.insert(key, path.clone());
    path
}

/// Builds one release binary and returns the executable cargo reports.
fn build(package: &str, name: &str) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(workspace_root())
        .args(["build", "--release", "--package", package, "--bin", name])
        .arg("--message-format=json-render-diagnostics")
        .stdin(Stdio::null());
    if package == ENGINE_PACKAGE {
        cmd.args(["--features", ENGINE_FEATURES]);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cargo));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "`cargo build --release -p {package} --bin {name}` (features for {ENGINE_PACKAGE}: \
         {ENGINE_FEATURES}) failed ({}):\n{stderr}",
        out.status
    );
    // The compiler-artifact message names the executable wherever the target
    // directory is (CARGO_TARGET_DIR, .cargo/config.toml build.target-dir).
    let reported = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| {
            msg["reason"] == "compiler-artifact"
                && msg["target"]["name"] == name
                && msg["target"]["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|k| k == "bin"))
        })
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from));
    let path = reported.unwrap_or_else(|| target_dir().join("release").join(name));
    assert!(
        path.is_file(),
        "cargo built {package}/{name} but {} does not exist; cargo said:\n{stderr}",
        path.display()
    );
    path
}

/// Runs `bin` with `args`, stdin closed, and returns its status and output.
/// Kills it and panics if it runs longer than [`DEFAULT_TIMEOUT`].
pub fn run<I, S>(bin: impl AsRef<Path>, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_with_timeout(bin, args, DEFAULT_TIMEOUT)
}

/// [`run`] with a chosen timeout: a hung binary fails the test, with what it
/// printed so far, instead of hanging the test run.
pub fn run_with_timeout<I, S>(bin: impl AsRef<Path>, args: I, timeout: Duration) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(bin.as_ref());
    cmd.args(args);
    output_with_timeout(cmd, timeout)
}

/// Runs a prepared command (arguments, environment, directory as set on it),
/// stdin closed, and returns its status and output; kills it and panics if it
/// runs longer than `timeout`, showing what it printed so far.
pub fn output_with_timeout(cmd: Command, timeout: Duration) -> Output {
    output_with_input(cmd, None, timeout)
}

/// [`output_with_timeout`] for a command that must succeed: panics with its
/// status and everything it printed when it does not.
pub fn output_ok(cmd: Command, timeout: Duration) -> Output {
    let what = format!("{cmd:?}");
    let out = output_with_timeout(cmd, timeout);
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// [`output_with_timeout`] feeding `input` on stdin (then closing it), or
/// with stdin closed for `None`.
pub fn output_with_input(mut cmd: Command, input: Option<Vec<u8>>, timeout: Duration) -> Output {
    let shown = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let stdin = if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut child = cmd
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{shown}`: {e}"));
    // Feed stdin from its own thread: a child that does not read it must not
    // block the wait below. A child that exits early closes the pipe, which
    // ends the write with an error that does not matter here.
    let feeder = child.stdin.take().zip(input).map(|(mut pipe, input)| {
        std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut pipe, &input);
        })
    });
    // Drain both pipes while waiting, so a chatty child never blocks on a full pipe.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                kill(&mut child);
                let out = String::from_utf8_lossy(&join(stdout)).into_owned();
                let err = String::from_utf8_lossy(&join(stderr)).into_owned();
                panic!(
                    "`{shown}` did not finish within {timeout:?} and was killed\n\
                     --- stdout ---\n{out}\n--- stderr ---\n{err}"
                );
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => {
                kill(&mut child);
                panic!("waiting for `{shown}`: {e}");
            }
        }
    };
    if let Some(feeder) = feeder {
        // The child has exited, so its end of the pipe is closed.
        let _ = feeder.join();
    }
    Output {
        status,
        stdout: join(stdout),
        stderr: join(stderr),
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut pipe) = pipe {
            // A read error ends the capture; what was read so far is kept.
            let _ = pipe.read_to_end(&mut buf);
        }
        buf
    })
}

fn join(reader: JoinHandle<Vec<u8>>) -> Vec<u8> {
    reader.join().expect("pipe reader thread panicked")
}

fn kill(child: &mut Child) {
    // It may have exited just now; either way it is reaped below.
    let _ = child.kill();
    let _ = child.wait();
}

/// The CPUs this process may run on (its affinity mask), ascending: from
/// `Cpus_allowed_list` in /proc/self/status, or `0..available_parallelism`
/// where that file does not exist.
pub fn available_cpus() -> Vec<u32> {
    let from_proc = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|list| parse_cpu_list(list.trim()))
        });
    match from_proc {
        Some(Ok(cpus)) if !cpus.is_empty() => cpus,
        Some(Err(e)) => panic!("cannot parse Cpus_allowed_list in /proc/self/status: {e}"),
        _ => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            (0..n as u32).collect()
        }
    }
}

/// Parses a CPU list such as `0-3,8,10-11` (the kernel's format) into
/// ascending, distinct CPU numbers.
pub fn parse_cpu_list(list: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("{s:?} in {list:?} is not a CPU number"))
        };
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (num(lo)?, num(hi)?);
                if lo > hi {
                    return Err(format!("range {part:?} in {list:?} is reversed"));
                }
                cpus.extend(lo..=hi);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// The hex core mask (`-m`) selecting exactly `cpus`, e.g. `0x3` for 0 and 1.
/// Any width: CPU 70 gives a 72-bit mask.
pub fn cpu_mask(cpus: &[u32]) -> String {
    let top = cpus.iter().copied().max().unwrap_or(0) as usize;
    let mut nibbles = vec![0u8; top / 4 + 1];
    for &cpu in cpus {
        nibbles[cpu as usize / 4] |= 1 << (cpu % 4);
    }
    let digits: String = nibbles
        .iter()
        .rev()
        .map(|&n| char::from_digit(n as u32, 16).expect("a nibble is one hex digit"))
        .collect();
    format!("0x{digits}")
}

/// The entry for (`opcode`, `module`) in the `ops` of `io-engine-ctl accel
/// stats --output json`; panics when there is none.
pub fn accel_op<'a>(
    stats: &'a serde_json::Value,
    opcode: &str,
    module: &str,
) -> &'a serde_json::Value {
    stats["ops"]
        .as_array()
        .unwrap_or_else(|| panic!("no ops in {stats}"))
        .iter()
        .find(|o| o["opcode"] == opcode && o["module"] == module)
        .unwrap_or_else(|| panic!("no {opcode} on {module} in {stats}"))
}

/// Bytes a program wrote, as text (invalid UTF-8 replaced).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A JSON value that must be an unsigned integer.
pub fn u(v: &serde_json::Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{v} is not an unsigned integer"))
}

/// fio's arguments for a verify job over NBD at `uri`: two jobs, each
/// writing `size_mb` MiB of its own range with `bs` (a `--bs=` or
/// `--bsrange=` argument) at iodepth 16, then reading it all back and
/// checking its CRC-32C; JSON output for [`assert_fio_verified`].
pub fn fio_nbd_verify_args(uri: &str, bs: &str, size_mb: u64) -> Vec<String> {
    [
        "--name=verify",
        "--ioengine=nbd",
        &format!("--uri={uri}"),
        "--rw=randwrite",
        bs,
        "--iodepth=16",
        "--numjobs=2",
        &format!("--size={size_mb}m"),
        &format!("--offset_increment={size_mb}m"),
        "--verify=crc32c",
        "--verify_state_save=0",
        "--do_verify=1",
        "--verify_fatal=1",
        "--output-format=json",
    ]
    .map(String::from)
    .to_vec()
}

/// Asserts that the JSON report of [`fio_nbd_verify_args`]'s job (`stdout`,
/// after anything fio printed first) has two jobs without error, each
/// having written and read back (verified) at least `size_mb` MiB.
pub fn assert_fio_verified(stdout: &str, size_mb: u64, what: &str) {
    let start = stdout
        .find('{')
        .unwrap_or_else(|| panic!("{what}: no fio JSON in {stdout}"));
    let report: serde_json::Value = serde_json::from_str(&stdout[start..]).unwrap();
    let jobs = report["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{what}");
    for j in jobs {
        assert_eq!(j["error"], 0, "{what}");
        // Every written byte read back for verification.
        let (w, r) = (u(&j["write"]["io_bytes"]), u(&j["read"]["io_bytes"]));
        assert!(
            w >= size_mb << 20 && r >= size_mb << 20,
            "{what}: wrote {w}, verified {r}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_like_the_kernel_prints_them() {
        assert_eq!(parse_cpu_list("0-1"), Ok(vec![0, 1]));
        assert_eq!(parse_cpu_list("3,0-2,8"), Ok(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpu_list("5"), Ok(vec![5]));
        assert_eq!(parse_cpu_list("1,1-2"), Ok(vec![1, 2]));
        assert!(parse_cpu_list("2-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }

    #[test]
    fn this_process_may_run_somewhere() {
        let cpus = available_cpus();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]), "{cpus:?}");
        assert!(cpus.len() <= std::thread::available_parallelism().unwrap().get());
    }

    #[test]
    fn masks_set_one_bit_per_cpu() {
        assert_eq!(cpu_mask(&[0]), "0x1");
        assert_eq!(cpu_mask(&[0, 1]), "0x3");
        assert_eq!(cpu_mask(&[2]), "0x4");
        assert_eq!(cpu_mask(&[4]), "0x10");
        assert_eq!(cpu_mask(&[1, 7]), "0x82");
        assert_eq!(cpu_mask(&[64]), format!("0x1{}", "0".repeat(16)));
    }

    #[test]
    fn run_captures_status_and_both_streams() {
        let out = run("sh", ["-c", "echo out; echo err >&2; exit 3"]);
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[test]
    fn input_reaches_stdin() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "tr a-z A-Z"]);
        let out = output_with_input(cmd, Some(b"piped\n".to_vec()), DEFAULT_TIMEOUT);
        assert!(out.status.success());
        assert_eq!(out.stdout, b"PIPED\n");
    }

    #[test]
    fn run_kills_a_hung_binary() {
        let started = Instant::now();
        let panicked = std::panic::catch_unwind(|| {
            run_with_timeout("sleep", ["30"], Duration::from_millis(200))
        });
        let msg = panicked.expect_err("a hung child must fail the test");
        let msg = msg
            .downcast_ref::<String>()
            .expect("the panic names the command");
        assert!(msg.contains("sleep 30") && msg.contains("killed"), "{msg}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
