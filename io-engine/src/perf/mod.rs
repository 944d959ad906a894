//! Performance jobs: drive devices at a fixed queue depth from reactors and
//! measure IOPS, bandwidth and latency, as SPDK's bdevperf does. Used by the
//! `bdev-perf` binary and by the daemon's `PerfService`.
//!
//! Thread: [`start`] and [`RunningPerf`] are used from any thread (a
//! benchmark's main thread, the control plane); each job runs on its
//! reactor (see `job`).

pub mod args;
mod job;

pub use job::{JobResult, Progress, Workload};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::bdev::{BdevError, BdevRegistry};
use crate::env::tsc;
use crate::pool::{BufPool, BufPoolError, PoolConfig};
use crate::reactor::{ReactorError, Reactors, Reply};
use job::{Job, JobSpec};

/// Longest run accepted: 30 days.
pub const MAX_SECONDS: f64 = 30.0 * 24.0 * 3600.0;

/// Bumped by [`cancel_all`]; a job stops when it sees it change.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// Ends every running job early (their IOs in flight still complete and
/// they report what they did): for a daemon that is shutting down.
pub fn cancel_all() {
    EPOCH.fetch_add(1, Ordering::Release);
}

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

/// Why a run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// The request itself is wrong.
    #[error("{0}")]
    Invalid(String),
    /// A device could not be opened.
    #[error(transparent)]
    Bdev(#[from] BdevError),
    /// IO buffers could not be had.
    #[error(transparent)]
    Buffers(#[from] BufPoolError),
    /// A reactor did not run its job.
    #[error(transparent)]
    Reactor(#[from] ReactorError),
    /// A job failed to start on its reactor.
    #[error("job on core {core} for {bdev}: {reason}")]
    Job {
        /// Reactor index.
        core: usize,
        /// Device name.
        bdev: String,
        /// What failed.
        reason: String,
    },
}

struct RunningJob {
    core: usize,
    bdev: String,
    progress: Arc<Progress>,
    reply: Reply<Result<JobResult, String>>,
}

/// Jobs started and running.
pub struct RunningPerf {
    jobs: Vec<RunningJob>,
    cpus: Vec<u32>,
}

/// Checks `spec` against the devices and starts one job per core and device.
pub fn start(
    reactors: &Reactors,
    registry: &BdevRegistry,
    spec: &PerfSpec,
) -> Result<RunningPerf, PerfError> {
    // Taken first: a cancel while the jobs are being set up ends them too.
    let epoch = EPOCH.load(Ordering::Acquire);
    let invalid = |m: String| Err(PerfError::Invalid(m));
    if spec.bdevs.is_empty() {
        return invalid("no device given".into());
    }
    if !(spec.seconds > 0.0 && spec.seconds <= MAX_SECONDS) {
        return invalid(format!(
            "run time {} s: give a number of seconds above 0 and at most {MAX_SECONDS} (30 days)",
            spec.seconds
        ));
    }
    if spec.queue_depth == 0 || spec.queue_depth > 65536 {
        return invalid(format!(
            "queue depth {} is not in 1..=65536",
            spec.queue_depth
        ));
    }
    if spec.io_size == 0 || spec.io_size > 64 << 20 {
        return invalid(format!("IO size {} is not in 1..=64 MiB", spec.io_size));
    }
    if spec.read_percent > 100 {
        return invalid(format!("read percent {} is above 100", spec.read_percent));
    }
    let cores: Vec<usize> = if spec.cores.is_empty() {
        (0..reactors.len()).collect()
    } else {
        spec.cores.clone()
    };
    if let Some(&bad) = cores.iter().find(|&&c| c >= reactors.len()) {
        return invalid(format!(
            "no reactor {bad}: this engine runs {}",
            reactors.len()
        ));
    }
    let stripes = cores.len() as u64 * spec.queue_depth as u64;
    let mut devices = Vec::new();
    for name in &spec.bdevs {
        let desc = registry.open(name)?;
        let bdev = desc.bdev();
        if !spec.io_size.is_multiple_of(bdev.block_size() as u64) {
            return invalid(format!(
                "IO size {} is not a multiple of {name}'s block size {}",
                spec.io_size,
                bdev.block_size()
            ));
        }
        if spec.verify {
            if !bdev.stores_data() {
                return invalid(format!(
                    "-y needs devices that store data; {name} ({}) discards writes",
                    bdev.product()
                ));
            }
            if bdev.size_bytes() / spec.io_size < stripes {
                return invalid(format!(
                    "-y gives every IO in flight its own blocks: {name} needs at least {stripes} \
                     IOs of {} bytes",
                    spec.io_size
                ));
            }
        } else if bdev.size_bytes() < spec.io_size {
            return invalid(format!(
                "{name} ({} bytes) is smaller than one IO of {} bytes",
                bdev.size_bytes(),
                spec.io_size
            ));
        }
        devices.push(desc);
    }

    // Buffers first (DMA memory, on this thread), then one job per core and device.
    let mut jobs = Vec::new();
    for (job_index, &core) in cores.iter().enumerate() {
        for (d, desc) in devices.iter().enumerate() {
            let bufs = BufPool::new(
                PoolConfig::new(format!("perf-{core}-{d}"), spec.queue_depth as usize, 1)
                    .cache_size(0),
                spec.io_size as usize,
            )?;
            let job = JobSpec {
                workload: spec.workload,
                io_size: spec.io_size,
                queue_depth: spec.queue_depth,
                read_percent: spec.read_percent,
                verify: spec.verify,
                seconds: spec.seconds,
                job_index: job_index as u32,
                jobs_on_device: cores.len() as u32,
                seed: 0x5eed_0000 + (core * 131 + d) as u64,
                epoch: (&EPOCH, epoch),
            };
            let progress = Arc::new(Progress::default());
            let bdev = desc.bdev().name().to_string();
            let (desc, p) = (desc.clone(), progress.clone());
            let reply = reactors.spawn_on(core, move || async move {
                match Job::start(&desc, job, bufs, p) {
                    Ok(rx) => rx.await.map_err(|_| "job dropped".to_string()),
                    Err(e) => Err(e),
                }
            });
            jobs.push(RunningJob {
                core,
                bdev,
                progress,
                reply,
            });
        }
    }
    let cpus = (0..reactors.len())
        .map(|i| reactors.cpu(i).unwrap_or(0))
        .collect();
    Ok(RunningPerf { jobs, cpus })
}

impl RunningPerf {
    /// IOs and bytes completed so far, over every job.
    pub fn progress(&self) -> (u64, u64) {
        self.jobs.iter().fold((0, 0), |(i, b), j| {
            (
                i + j.progress.ios.load(Ordering::Relaxed),
                b + j.progress.bytes.load(Ordering::Relaxed),
            )
        })
    }

    /// Waits for every job (blocking the calling thread) and returns its figures.
    pub fn wait(self) -> Result<Vec<JobRow>, PerfError> {
        let cpus = self.cpus;
        self.jobs
            .into_iter()
            .map(|j| {
                let r = j.reply.wait()?;
                Self::row(&cpus, j.core, j.bdev, r)
            })
            .collect()
    }

    /// Waits for every job (asynchronously) and returns its figures.
    pub async fn finish(self) -> Result<Vec<JobRow>, PerfError> {
        let mut rows = Vec::new();
        for j in self.jobs {
            let r = j.reply.await?;
            rows.push(Self::row(&self.cpus, j.core, j.bdev, r)?);
        }
        Ok(rows)
    }

    fn row(
        cpus: &[u32],
        core: usize,
        bdev: String,
        r: Result<JobResult, String>,
    ) -> Result<JobRow, PerfError> {
        match r {
            Ok(r) => Ok(JobRow::new(
                core,
                cpus.get(core).copied().unwrap_or(0),
                bdev,
                &r,
            )),
            Err(reason) => Err(PerfError::Job { core, bdev, reason }),
        }
    }
}

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
    fn new(core: usize, cpu: u32, bdev: String, r: &JobResult) -> JobRow {
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
