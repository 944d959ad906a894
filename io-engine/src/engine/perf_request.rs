//! A perf run as a client asks for it: the fields a client may leave unset
//! take the defaults of `bdev-perf` (4 KiB IOs, queue depth 32, half reads),
//! and the workload comes by name. [`PerfRequest::spec`] makes the
//! [`PerfSpec`] that `perf::start` checks against the devices and runs.
//!
//! Thread: any; plain data.

use clap::ValueEnum;

use crate::bdev::Quoted;
use crate::perf::{PerfError, PerfSpec, Workload};

/// What a client asks to run; `None` takes the default.
#[derive(Debug, Clone, Default)]
pub struct PerfRequest {
    /// Devices (registry names).
    pub bdevs: Vec<String>,
    /// Reactor indices; empty: every reactor.
    pub cores: Vec<usize>,
    /// IO pattern: `read`, `write`, `randread`, `randwrite` or `randrw`.
    pub workload: String,
    /// Bytes per IO ([`PerfRequest::DEFAULT_IO_SIZE`]).
    pub io_size: Option<u64>,
    /// IOs in flight per core and device ([`PerfRequest::DEFAULT_QUEUE_DEPTH`]).
    pub queue_depth: Option<u32>,
    /// Reads in percent, for `randrw` ([`PerfRequest::DEFAULT_READ_PERCENT`]).
    pub read_percent: Option<u32>,
    /// Write a pattern, read it back and compare.
    pub verify: bool,
    /// Run time in seconds.
    pub seconds: f64,
}

impl PerfRequest {
    /// Bytes per IO when unset (the one default bdev-perf uses too).
    pub const DEFAULT_IO_SIZE: u64 = PerfSpec::DEFAULT_IO_SIZE;
    /// IOs in flight per core and device when unset.
    pub const DEFAULT_QUEUE_DEPTH: u32 = PerfSpec::DEFAULT_QUEUE_DEPTH;
    /// Reads in percent (`randrw`) when unset.
    pub const DEFAULT_READ_PERCENT: u32 = PerfSpec::DEFAULT_READ_PERCENT;

    /// The run, defaults filled in; an unknown workload is
    /// [`PerfError::Invalid`]. The rest is checked by `perf::start`.
    pub fn spec(self) -> Result<PerfSpec, PerfError> {
        let workload = Workload::from_str(&self.workload, true).map_err(|_| {
            PerfError::Invalid(format!(
                "unknown workload {}: expected read, write, randread, randwrite or randrw",
                Quoted(&self.workload)
            ))
        })?;
        Ok(PerfSpec {
            bdevs: self.bdevs,
            cores: self.cores,
            workload,
            io_size: self.io_size.unwrap_or(Self::DEFAULT_IO_SIZE),
            queue_depth: self.queue_depth.unwrap_or(Self::DEFAULT_QUEUE_DEPTH),
            read_percent: self.read_percent.unwrap_or(Self::DEFAULT_READ_PERCENT),
            verify: self.verify,
            seconds: self.seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_fields_take_the_defaults_and_a_bad_workload_is_invalid() {
        let spec = PerfRequest {
            workload: "RandRW".into(),
            ..PerfRequest::default()
        }
        .spec()
        .unwrap();
        assert_eq!(spec.workload, Workload::Randrw);
        assert_eq!(
            (spec.io_size, spec.queue_depth, spec.read_percent),
            (4096, 32, 50)
        );
        let spec = PerfRequest {
            workload: "read".into(),
            io_size: Some(512),
            queue_depth: Some(1),
            read_percent: Some(0),
            ..PerfRequest::default()
        }
        .spec()
        .unwrap();
        assert_eq!(
            (spec.io_size, spec.queue_depth, spec.read_percent),
            (512, 1, 0)
        );
        let e = PerfRequest {
            workload: "sideways".into(),
            ..PerfRequest::default()
        }
        .spec()
        .unwrap_err();
        assert!(
            matches!(&e, PerfError::Invalid(m) if m.contains("unknown workload \"sideways\"")),
            "{e}"
        );
    }
}
