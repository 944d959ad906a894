//! What a perf run is asked to do, and the longest run accepted.
//!
//! Thread: any; plain data.

use super::job::Workload;

/// Longest run accepted: 30 days.
pub const MAX_SECONDS: f64 = 30.0 * 24.0 * 3600.0;

/// What to run: every listed core drives every listed device.
#[derive(Debug, Clone)]
pub struct PerfSpec {
    /// Devices (registry names).
    pub bdevs: Vec<String>,
    /// Reactor indices; empty: every reactor.
    pub cores: Vec<usize>,
    /// IO pattern.
    pub workload: Workload,
    /// Bytes per IO, a multiple of every device's block size.
    pub io_size: u64,
    /// IOs in flight per core and device.
    pub queue_depth: u32,
    /// Reads in percent, for `randrw`.
    pub read_percent: u32,
    /// Write a pattern, read it back and compare.
    pub verify: bool,
    /// Run time.
    pub seconds: f64,
}

impl PerfSpec {
    /// Bytes per IO when a caller leaves it unset (bdev-perf's `-o`, the
    /// perf service's `io_size`).
    pub const DEFAULT_IO_SIZE: u64 = 4096;
    /// IOs in flight per core and device when unset.
    pub const DEFAULT_QUEUE_DEPTH: u32 = 32;
    /// Reads in percent (`randrw`) when unset.
    pub const DEFAULT_READ_PERCENT: u32 = 50;
}
