//! Starting a perf run (one job per core and device, each on its
//! reactor), waiting for it, and cancelling every run at once.
//!
//! Thread: [`start`] and [`RunningPerf`] are used from any thread (a
//! benchmark's main thread, the control plane); each job runs on its
//! reactor (see `job.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::job::{Job, JobResult, JobSpec, Progress};
use super::job_row::JobRow;
use super::perf_error::PerfError;
use super::perf_spec::{MAX_SECONDS, PerfSpec};
use crate::bdev::{BdevRegistry, Quoted};
use crate::pool::{BufPool, PoolConfig};
use crate::reactor::{Reactors, Reply};

/// Bumped by [`cancel_all`]; a job stops when it sees it change.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// Ends every running job early (their IOs in flight still complete and
/// they report what they did): for a daemon that is shutting down.
pub fn cancel_all() {
    EPOCH.fetch_add(1, Ordering::Release);
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
                "IO size {} is not a multiple of {}'s block size {}",
                spec.io_size,
                Quoted(name),
                bdev.block_size()
            ));
        }
        if spec.verify {
            if !bdev.stores_data() {
                return invalid(format!(
                    "-y needs devices that store data; {} ({}) discards writes",
                    Quoted(name),
                    bdev.product()
                ));
            }
            if bdev.size_bytes() / spec.io_size < stripes {
                return invalid(format!(
                    "-y gives every IO in flight its own blocks: {} needs at least {stripes} \
                     IOs of {} bytes",
                    Quoted(name),
                    spec.io_size
                ));
            }
        } else if bdev.size_bytes() < spec.io_size {
            return invalid(format!(
                "{} ({} bytes) is smaller than one IO of {} bytes",
                Quoted(name),
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
