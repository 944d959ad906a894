//! The figures of one job (one core driving one device), or of a run's
//! total, as bdev-perf and the perf service report them.
//!
//! Thread: any; plain data.

use super::job::JobResult;
use crate::env::tsc;

/// Figures of one job (one core driving one device), or of the total.
#[derive(Debug, Clone, serde::Serialize)]
pub struct JobRow {
    /// Reactor index (none for the total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core: Option<usize>,
    /// OS CPU (none for the total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// Device (none for the total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bdev: Option<String>,
    /// IOs completed successfully.
    pub ios: u64,
    /// Time from first submission to last completion.
    pub seconds: f64,
    /// IOs per second.
    pub iops: f64,
    /// MiB per second.
    pub mib_s: f64,
    /// Average latency, microseconds.
    pub avg_lat_us: f64,
    /// Smallest latency, microseconds.
    pub min_lat_us: f64,
    /// Largest latency, microseconds.
    pub max_lat_us: f64,
    /// IOs that failed.
    pub failed: u64,
    /// Verified reads that did not return what was written.
    pub miscompares: u64,
}

fn us(ticks: u64) -> f64 {
    tsc::ticks_to_ns(ticks) as f64 / 1000.0
}

impl JobRow {
    pub(super) fn new(core: usize, cpu: u32, bdev: String, r: &JobResult) -> JobRow {
        let seconds = (tsc::ticks_to_ns(r.elapsed_ticks) as f64 / 1e9).max(1e-9);
        JobRow {
            core: Some(core),
            cpu: Some(cpu),
            bdev: Some(bdev),
            ios: r.ios,
            seconds,
            iops: r.ios as f64 / seconds,
            mib_s: r.bytes as f64 / seconds / (1024.0 * 1024.0),
            avg_lat_us: if r.ios == 0 {
                0.0
            } else {
                us(r.lat_total_ticks) / r.ios as f64
            },
            min_lat_us: us(r.lat_min_ticks),
            max_lat_us: us(r.lat_max_ticks),
            failed: r.failed,
            miscompares: r.miscompares,
        }
    }

    /// The total of `rows`: sums, the longest time, the extreme latencies,
    /// the IO-weighted average latency.
    pub fn total(rows: &[JobRow]) -> JobRow {
        let ios: u64 = rows.iter().map(|r| r.ios).sum();
        let with_io = || rows.iter().filter(|r| r.ios > 0);
        JobRow {
            core: None,
            cpu: None,
            bdev: None,
            ios,
            seconds: rows.iter().map(|r| r.seconds).fold(0.0, f64::max),
            iops: rows.iter().map(|r| r.iops).sum(),
            mib_s: rows.iter().map(|r| r.mib_s).sum(),
            avg_lat_us: if ios == 0 {
                0.0
            } else {
                rows.iter()
                    .map(|r| r.avg_lat_us * r.ios as f64)
                    .sum::<f64>()
                    / ios as f64
            },
            min_lat_us: with_io()
                .map(|r| r.min_lat_us)
                .reduce(f64::min)
                .unwrap_or(0.0),
            max_lat_us: rows.iter().map(|r| r.max_lat_us).fold(0.0, f64::max),
            failed: rows.iter().map(|r| r.failed).sum(),
            miscompares: rows.iter().map(|r| r.miscompares).sum(),
        }
    }
}
