//! A real Python gRPC client: grpcio and grpcio-tools from PyPI, in the
//! venv `scripts/test` installs (its `install_grpcio`: TARGET/grpcio/venv,
//! pinned versions), with the engine's stubs generated from `proto/` by
//! `grpc_tools.protoc` into a temporary directory.
//!
//! A test writes its client as a Python script (a file under
//! `tests/python/`, or text) and runs it with [`PythonGrpc::run_file`] or
//! [`PythonGrpc::run_script`]: the stubs import as `io_engine.v1.*_pb2`
//! and `*_pb2_grpc`, and the venv also has grpcio-health-checking
//! (`grpc_health.v1`) and grpcio-reflection (`grpc_reflection.v1alpha`).
//! A missing venv fails the test with a line saying how to install it.
//!
//! Thread: the test threads.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::tools::{TempDir, run_ok};
use crate::{output_with_timeout, target_dir, workspace_root};

/// Longest a Python client may run.
pub const PYTHON_TIMEOUT: Duration = Duration::from_secs(60);

/// The venv's python (`TARGET/grpcio/venv/bin/python`); panics if it is
/// not installed.
pub fn python() -> PathBuf {
    let path = target_dir()
        .join("grpcio")
        .join("venv")
        .join("bin")
        .join("python");
    assert!(
        path.is_file(),
        "{} is missing: scripts/test installs grpcio into it (install_grpcio)",
        path.display()
    );
    path
}

/// The directory of the tests' Python scripts (`tests/python/`).
pub fn scripts_dir() -> PathBuf {
    workspace_root().join("tests").join("python")
}

/// The engine's Python stubs, generated once per value, and the way to run
/// scripts that import them.
pub struct PythonGrpc {
    stubs: TempDir,
}

impl PythonGrpc {
    /// Generates the stubs of every `.proto` under `proto/` into a new
    /// temporary directory (removed when this is dropped).
    pub fn new() -> PythonGrpc {
        let stubs = TempDir::new("grpcio-stubs");
        let root = workspace_root().join("proto");
        let mut protos = Vec::new();
        collect_protos(&root, &mut protos);
        assert!(!protos.is_empty(), "no .proto under {}", root.display());
        let mut cmd = Command::new(python());
        cmd.args(["-m", "grpc_tools.protoc"])
            .arg(format!("--proto_path={}", root.display()))
            .arg(format!("--python_out={}", stubs.path().display()))
            .arg(format!("--grpc_python_out={}", stubs.path().display()))
            .args(&protos);
        run_ok(cmd, None);
        PythonGrpc { stubs }
    }

    /// Where the stubs are (`io_engine/v1/*_pb2.py`).
    pub fn stubs_dir(&self) -> &Path {
        self.stubs.path()
    }

    /// Runs the Python file `script` with `args`, the stubs importable,
    /// within [`PYTHON_TIMEOUT`]; returns its status and output.
    pub fn run_file<I, S>(&self, script: impl AsRef<Path>, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command();
        cmd.arg(script.as_ref()).args(args);
        output_with_timeout(cmd, PYTHON_TIMEOUT)
    }

    /// [`PythonGrpc::run_file`] of the script text `source` (`python -c`;
    /// `sys.argv[1:]` are `args`).
    pub fn run_script<I, S>(&self, source: &str, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command();
        cmd.arg("-c").arg(source).args(args);
        output_with_timeout(cmd, PYTHON_TIMEOUT)
    }

    /// The venv's python with the stubs on `PYTHONPATH`, unbuffered, and
    /// no proxy (every address under test is local).
    fn command(&self) -> Command {
        let mut cmd = Command::new(python());
        cmd.env("PYTHONPATH", self.stubs.path())
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env_remove("http_proxy")
            .env_remove("https_proxy")
            .env_remove("grpc_proxy")
            .current_dir(workspace_root());
        cmd
    }
}

impl Default for PythonGrpc {
    fn default() -> Self {
        Self::new()
    }
}

/// Every `.proto` file under `dir`, recursively, in a stable order.
fn collect_protos(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_protos(&path, out);
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
}
