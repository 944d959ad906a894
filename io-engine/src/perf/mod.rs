//! Performance jobs: drive devices at a fixed queue depth from reactors and
//! measure IOPS, bandwidth and latency, as SPDK's bdevperf does. Used by the
//! `bdev-perf` binary and by the daemon's `PerfService`.
//!
//! Thread: [`start`] and [`RunningPerf`] are used from any thread (a
//! benchmark's main thread, the control plane); each job runs on its
//! reactor (see `job`).

pub mod args;
mod job;
mod job_row;
mod perf_error;
mod perf_spec;
mod running_perf;

pub use job::{JobResult, Progress, Workload};
pub use job_row::JobRow;
pub use perf_error::PerfError;
pub use perf_spec::{MAX_SECONDS, PerfSpec};
pub use running_perf::{RunningPerf, cancel_all, start};
