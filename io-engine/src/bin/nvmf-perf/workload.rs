//! `-w`: the IO pattern, with spdk_nvme_perf's names, and Copy.
//!
//! Thread: any (a plain value).

use serde::Serialize;

/// What each command does and where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    Randread,
    /// Random writes.
    Randwrite,
    /// Random reads and writes, -M percent reads.
    Randrw,
    /// Copy commands of -o bytes from a random range to another.
    Copy,
}

impl Workload {
    /// Whether offsets are random.
    pub fn random(self) -> bool {
        !matches!(self, Workload::Read | Workload::Write)
    }

    /// Whether anything is read back (what -y checks).
    pub fn reads(self) -> bool {
        !matches!(self, Workload::Write | Workload::Randwrite)
    }
}
