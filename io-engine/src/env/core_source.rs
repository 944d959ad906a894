//! Where the reactors' cores came from: a flag, the cgroup CPU quota, or
//! the default. Shown by `engine info` so that an operator can tell why
//! the engine runs the reactors it runs.
//!
//! Thread: any; plain data.

use std::fmt;

/// How the daemon chose its cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreSource {
    /// A core list (`-l`, `--core-list`).
    List,
    /// A core mask (`-m`, `--reactor-mask`).
    Mask,
    /// A count of cores (`--core-count`), the first ones allowed.
    Count,
    /// One reactor per whole CPU of the cgroup CPU quota, on the first
    /// allowed CPUs.
    CpuQuota,
    /// No flag and no quota: the first allowed CPU.
    FirstAllowed,
}

impl CoreSource {
    /// The name `engine info` shows.
    pub fn name(self) -> &'static str {
        match self {
            CoreSource::List => "list",
            CoreSource::Mask => "mask",
            CoreSource::Count => "count",
            CoreSource::CpuQuota => "cpu quota",
            CoreSource::FirstAllowed => "first allowed CPU",
        }
    }
}

impl fmt::Display for CoreSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
