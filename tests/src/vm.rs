//! The micro-VM harness for tests that need the real Linux initiators
//! (the kernel's nbd client, nvme-tcp): runs a shell script inside a fresh
//! QEMU guest through `scripts/vm` and returns its exit status and console.
//!
//! The guest runs this machine's own tools (nvme-cli, fio, nbd-client) over a
//! read-only 9p share of the root filesystem with a tmpfs overlay, and
//! reaches only the 127.0.0.1 ports forwarded to it, as `10.0.2.100:PORT`
//! ([`GUEST_HOST`]). docs/vm.md describes the guest.
//!
//! Thread: the test threads. Runs are serialized by a process-wide lock
//! (the VM is emulated and CPU-heavy: one at a time); the cache of kernel
//! and initramfs is prepared once per test process.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use crate::{output_with_timeout, workspace_root};

/// The address the guest reaches a forwarded 127.0.0.1 port on.
pub const GUEST_HOST: &str = "10.0.2.100";

/// The default bound on one VM run, boot to power-off.
pub const DEFAULT_VM_TIMEOUT: Duration = Duration::from_secs(240);

/// Longest `scripts/vm --prepare` may take: the first one downloads and
/// unpacks the kernel package.
pub const PREPARE_TIMEOUT: Duration = Duration::from_secs(600);

/// How long past its own timeout `scripts/vm` may take to kill QEMU and
/// report before the test gives up on it.
const KILL_MARGIN: Duration = Duration::from_secs(30);

/// The line the guest prints last; `scripts/vm` exits with its status.
const STATUS_MARKER: &str = "VM-EXIT-STATUS=";

/// `scripts/vm` in the workspace.
pub fn script() -> PathBuf {
    workspace_root().join("scripts").join("vm")
}

/// One VM run to make: the ports it may reach and its bound. The VM has
/// `scripts/vm`'s default size, 2 vCPUs (for two NVMe/TCP I/O queues) and
/// 512 MiB.
#[derive(Clone, Debug)]
pub struct Vm {
    forwards: Vec<u16>,
    timeout: Duration,
}

/// What a VM run left: the guest script's exit status (124: the VM outlived
/// its timeout; 125: it ended without a status) and what it printed.
#[derive(Clone, Debug)]
pub struct VmOutput {
    /// `scripts/vm`'s exit status: the guest script's.
    pub status: i32,
    /// The guest console (the script's stdout and stderr, and the kernel's
    /// warnings), without the status line.
    pub console: String,
    /// `scripts/vm`'s and QEMU's own messages.
    pub stderr: String,
}

impl VmOutput {
    /// Whether the guest script exited with 0.
    pub fn success(&self) -> bool {
        self.status == 0
    }

    /// The console text between the lines `BEGIN` and `END` (exclusive), as
    /// a guest script prints them around a file it wants to hand back (say
    /// `echo BEGIN; cat out.json; echo END`); panics when they are missing.
    pub fn between(&self, begin: &str, end: &str) -> String {
        let mut lines = self.console.lines().skip_while(|l| l.trim_end() != begin);
        assert!(lines.next().is_some(), "no {begin} line in:\n{self}");
        let mut inside = Vec::new();
        for line in lines {
            if line.trim_end() == end {
                return inside.join("\n");
            }
            inside.push(line);
        }
        panic!("no {end} line after {begin} in:\n{self}");
    }
}

impl std::fmt::Display for VmOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "guest exit status {}\n--- console ---\n{}\n--- scripts/vm stderr ---\n{}",
            self.status, self.console, self.stderr
        )
    }
}

impl Default for Vm {
    fn default() -> Self {
        Vm::new()
    }
}

impl Vm {
    /// A VM with no forwarded port and [`DEFAULT_VM_TIMEOUT`].
    pub fn new() -> Vm {
        Vm {
            forwards: Vec::new(),
            timeout: DEFAULT_VM_TIMEOUT,
        }
    }

    /// Lets the guest reach 127.0.0.1:`port` of this machine as
    /// `10.0.2.100:port`, one host connection per guest connection.
    pub fn forward(mut self, port: u16) -> Vm {
        self.forwards.push(port);
        self
    }

    /// Bounds the run (boot to power-off): QEMU is killed after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Vm {
        self.timeout = timeout;
        self
    }

    /// Runs `script` with the guest's /bin/sh (from this machine's root
    /// filesystem, in the workspace directory) and returns its status and
    /// console. Waits for any other VM of this process to end first.
    pub fn run(&self, script: &str) -> VmOutput {
        prepare();
        let _one_at_a_time = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        let mut cmd = Command::new(self::script());
        cmd.current_dir(workspace_root());
        for port in &self.forwards {
            cmd.arg("--fwd").arg(port.to_string());
        }
        cmd.arg("--timeout")
            .arg(self.timeout.as_secs().max(1).to_string())
            .arg("--")
            .arg(script);
        let out = output_with_timeout(cmd, self.timeout + KILL_MARGIN);
        let console = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with(STATUS_MARKER))
            .collect::<Vec<_>>()
            .join("\n");
        VmOutput {
            status: out.status.code().unwrap_or(-1),
            console,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// [`Vm::run`] that must exit with 0; panics with the console otherwise.
    pub fn run_ok(&self, script: &str) -> VmOutput {
        let out = self.run(script);
        assert!(out.success(), "the guest script failed: {out}");
        out
    }
}

/// One VM at a time in this process.
static RUNNING: Mutex<()> = Mutex::new(());

/// Builds (or checks) the cache of kernel and initramfs with `scripts/vm
/// --prepare`, once per process; panics with its output when that fails.
pub fn prepare() {
    static PREPARED: OnceLock<()> = OnceLock::new();
    PREPARED.get_or_init(|| {
        let mut cmd = Command::new(script());
        cmd.current_dir(workspace_root()).arg("--prepare");
        let out = output_with_timeout(cmd, PREPARE_TIMEOUT);
        assert!(
            out.status.success(),
            "`scripts/vm --prepare` failed ({})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(console: &str) -> VmOutput {
        VmOutput {
            status: 0,
            console: console.into(),
            stderr: String::new(),
        }
    }

    #[test]
    fn between_returns_the_lines_inside_the_markers() {
        let out = output("boot\nBEGIN\n{\"a\": 1}\nsecond\nEND\nafter");
        assert_eq!(out.between("BEGIN", "END"), "{\"a\": 1}\nsecond");
        assert_eq!(output("BEGIN\nEND").between("BEGIN", "END"), "");
    }

    #[test]
    fn between_panics_without_its_markers() {
        for console in ["no markers", "BEGIN\nunterminated"] {
            let out = output(console);
            assert!(std::panic::catch_unwind(|| out.between("BEGIN", "END")).is_err());
        }
    }
}
