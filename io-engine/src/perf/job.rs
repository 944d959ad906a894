//! One perf job: one device driven from one core at a fixed queue depth.
//!
//! Thread: a reactor. The job is created on its reactor and lives there; each
//! completion records the IO and submits the next one from the completion
//! callback, so the queue stays full without any other scheduling.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::bdev::{BdevDesc, IoChannel, IoCompletion, IoDone, IoRequest, IoType};
use crate::env::tsc;
use crate::env::xorshift::XorShift;
use crate::pool::{BufPool, IoBuf};

/// The IO pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Uniformly random reads.
    Randread,
    /// Uniformly random writes.
    Randwrite,
    /// Random reads and writes, `-M` percent reads.
    Randrw,
}

impl Workload {
    fn random(self) -> bool {
        matches!(
            self,
            Workload::Randread | Workload::Randwrite | Workload::Randrw
        )
    }
}

/// What a job is told to do.
#[derive(Debug, Clone)]
pub(super) struct JobSpec {
    pub(super) workload: Workload,
    pub(super) io_size: u64,
    pub(super) queue_depth: u32,
    pub(super) read_percent: u32,
    pub(super) verify: bool,
    pub(super) seconds: f64,
    /// This job's place among the jobs on the same device (verify stripes).
    pub(super) job_index: u32,
    pub(super) jobs_on_device: u32,
    pub(super) seed: u64,
    /// The cancellation epoch and its value when the run began: the job
    /// ends early once it changes (`perf::cancel_all`).
    pub(super) epoch: (&'static AtomicU64, u64),
}

/// Counters the main thread reads while the job runs (single writer).
/// Aligned to its own cache lines: jobs on different cores write theirs on
/// every IO, and must not share a line.
#[derive(Default)]
#[repr(align(128))]
pub struct Progress {
    /// IOs completed successfully.
    pub ios: AtomicU64,
    /// Bytes they moved.
    pub bytes: AtomicU64,
}

/// A finished job's raw figures, in cycle-clock ticks.
#[derive(Debug, Clone, Default)]
pub struct JobResult {
    /// IOs completed successfully.
    pub ios: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// First submission to last completion.
    pub elapsed_ticks: u64,
    /// Sum of latencies.
    pub lat_total_ticks: u64,
    /// Smallest latency.
    pub lat_min_ticks: u64,
    /// Largest latency.
    pub lat_max_ticks: u64,
    /// IOs that failed.
    pub failed: u64,
    /// Verified reads that did not match.
    pub miscompares: u64,
}

/// Per queue slot, in verify mode: the unit written and the write counter
/// that seeds its pattern.
#[derive(Clone, Copy, Default)]
struct VerifySlot {
    unit: u64,
    generation: u64,
}

pub(super) struct Job {
    ch: IoChannel,
    spec: JobSpec,

    units: u64,
    rng: Cell<XorShift>,
    seq_next: Cell<u64>,
    end_tsc: Cell<u64>,
    start_tsc: Cell<u64>,
    last_tsc: Cell<u64>,
    outstanding: Cell<u32>,
    ios: Cell<u64>,
    bytes: Cell<u64>,
    lat_total: Cell<u64>,
    lat_min: Cell<u64>,
    lat_max: Cell<u64>,
    failed: Cell<u64>,
    miscompares: Cell<u64>,
    verify_slots: RefCell<Vec<VerifySlot>>,
    progress: Arc<Progress>,
    /// The pool the queue slots' buffers came from; they return to it
    /// before the job drops.
    bufs: BufPool,
    /// Last field, so it drops last: the result goes out only once the
    /// channel (first field) has let go of the device, so whoever gets it
    /// may destroy the device at once.
    done: Reporter,
}

/// Sends the job's result when dropped.
struct Reporter {
    result: Cell<Option<JobResult>>,
    tx: Cell<Option<tokio::sync::oneshot::Sender<JobResult>>>,
}

impl Drop for Reporter {
    fn drop(&mut self) {
        if let (Some(r), Some(tx)) = (self.result.take(), self.tx.take()) {
            let _ = tx.send(r);
        }
    }
}

impl Job {
    /// Opens the device on this reactor and starts `queue_depth` IOs.
    /// The returned receiver yields the figures once the time is up and
    /// every IO has come back.
    pub(super) fn start(
        desc: &BdevDesc,
        spec: JobSpec,
        bufs: BufPool,
        progress: Arc<Progress>,
    ) -> Result<tokio::sync::oneshot::Receiver<JobResult>, String> {
        let ch = desc.open_channel().map_err(|e| e.to_string())?;
        let size = desc.bdev().size_bytes();
        let units = size / spec.io_size;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let qd = spec.queue_depth;
        let job = Rc::new(Job {
            ch,
            units,
            rng: Cell::new(XorShift::new(spec.seed)),
            seq_next: Cell::new(0),
            end_tsc: Cell::new(0),
            start_tsc: Cell::new(0),
            last_tsc: Cell::new(0),
            outstanding: Cell::new(0),
            ios: Cell::new(0),
            bytes: Cell::new(0),
            lat_total: Cell::new(0),
            lat_min: Cell::new(u64::MAX),
            lat_max: Cell::new(0),
            failed: Cell::new(0),
            miscompares: Cell::new(0),
            verify_slots: RefCell::new(vec![VerifySlot::default(); qd as usize]),
            progress,
            done: Reporter {
                result: Cell::new(None),
                tx: Cell::new(Some(tx)),
            },
            spec,
            bufs,
        });
        let now = tsc::now();
        job.start_tsc.set(now);
        job.last_tsc.set(now);
        let ticks = (job.spec.seconds * tsc::ticks_per_sec() as f64) as u64;
        job.end_tsc.set(now.saturating_add(ticks));
        for slot in 0..qd {
            let buf = job
                .bufs
                .get()
                .ok_or("buffer pool smaller than the queue depth")?;
            job.outstanding.set(job.outstanding.get() + 1);
            if job.spec.verify {
                job.clone().verify_write(slot, buf);
            } else {
                job.clone().next(slot, buf);
            }
        }
        Ok(rx)
    }

    /// A uniformly random value below `n` (Lemire's multiply-shift).
    #[inline(always)]
    fn below(&self, n: u64) -> u64 {
        let mut r = self.rng.get();
        let x = r.below(n);
        self.rng.set(r);
        x
    }

    /// Submits the next IO of the workload for queue slot `slot`.
    #[inline(always)]
    fn next(self: Rc<Self>, slot: u32, buf: IoBuf) {
        let spec = &self.spec;
        let unit = if spec.workload.random() {
            self.below(self.units)
        } else {
            let u = self.seq_next.get();
            self.seq_next
                .set(if u + 1 == self.units { 0 } else { u + 1 });
            u
        };
        let op = match spec.workload {
            Workload::Read | Workload::Randread => IoType::Read,
            Workload::Write | Workload::Randwrite => IoType::Write,
            Workload::Randrw => {
                if self.below(100) < spec.read_percent as u64 {
                    IoType::Read
                } else {
                    IoType::Write
                }
            }
        };
        let req = IoRequest {
            op,
            offset: unit * spec.io_size,
            len: spec.io_size,
            buf: Some(buf),
            src: 0,
            tag: slot as u64,
            fua: false,
        };
        self.submit(req);
    }

    #[inline(always)]
    fn submit(self: Rc<Self>, req: IoRequest) {
        if let Err(e) = self.ch.submit(req, self.clone()) {
            // The job builds only valid requests; a refusal is a bug worth
            // reporting as a failure, not a crash.
            self.failed.set(self.failed.get() + 1);
            tracing::error!("perf job: IO refused: {e}");
            self.retire();
        }
    }

    /// In verify mode each queue slot owns every `stripes`-th unit, so no two
    /// IOs in flight ever touch the same blocks.
    fn verify_unit(&self, slot: u32) -> u64 {
        let stripes = self.spec.jobs_on_device as u64 * self.spec.queue_depth as u64;
        let mine = self.spec.job_index as u64 * self.spec.queue_depth as u64 + slot as u64;
        self.below(self.units / stripes) * stripes + mine
    }

    fn verify_write(self: Rc<Self>, slot: u32, mut buf: IoBuf) {
        let unit = self.verify_unit(slot);
        let generation = {
            let mut slots = self.verify_slots.borrow_mut();
            let s = &mut slots[slot as usize];
            s.unit = unit;
            s.generation += 1;
            s.generation
        };
        fill_pattern(
            &mut buf.as_mut_slice()[..self.spec.io_size as usize],
            unit,
            generation,
        );
        let req =
            IoRequest::write(buf, unit * self.spec.io_size, self.spec.io_size).tag(slot as u64);
        self.submit(req);
    }

    fn verify_read(self: Rc<Self>, slot: u32, mut buf: IoBuf) {
        let unit = self.verify_slots.borrow()[slot as usize].unit;
        // Scribble over the pattern so a read that moves no data fails.
        buf.as_mut_slice()[..self.spec.io_size as usize].fill(0xee);
        let req = IoRequest::read(buf, unit * self.spec.io_size, self.spec.io_size)
            .tag(slot as u64 | VERIFY_READ);
        self.submit(req);
    }

    /// Whether to start another IO: before the deadline, and not cancelled.
    #[inline(always)]
    fn running(&self, now: u64) -> bool {
        let (epoch, started) = self.spec.epoch;
        now < self.end_tsc.get() && epoch.load(Ordering::Relaxed) == started
    }

    /// One queue slot is done for good; the last one records the result,
    /// which goes out when the job drops (see `done`).
    fn retire(&self) {
        let left = self.outstanding.get() - 1;
        self.outstanding.set(left);
        if left == 0 {
            let ios = self.ios.get();
            self.done.result.set(Some(JobResult {
                ios,
                bytes: self.bytes.get(),
                elapsed_ticks: self.last_tsc.get() - self.start_tsc.get(),
                lat_total_ticks: self.lat_total.get(),
                lat_min_ticks: if ios == 0 { 0 } else { self.lat_min.get() },
                lat_max_ticks: self.lat_max.get(),
                failed: self.failed.get(),
                miscompares: self.miscompares.get(),
            }));
        }
    }
}

/// Tag bit marking the read-back half of a verify pair.
const VERIFY_READ: u64 = 1 << 63;

impl IoCompletion for Job {
    #[inline]
    fn complete(self: Rc<Self>, mut io: IoDone) {
        let now = io.complete_tsc();
        let lat = io.latency_ticks();
        let tag = io.tag();
        let ok = io.status().is_ok();
        let len = io.len();
        let buf = io.take_buf();
        drop(io); // the IO object goes back to this core's cache first
        self.last_tsc.set(now);
        if ok {
            let ios = self.ios.get() + 1;
            let bytes = self.bytes.get() + len;
            self.ios.set(ios);
            self.bytes.set(bytes);
            self.progress.ios.store(ios, Ordering::Relaxed);
            self.progress.bytes.store(bytes, Ordering::Relaxed);
            self.lat_total.set(self.lat_total.get() + lat);
            if lat < self.lat_min.get() {
                self.lat_min.set(lat);
            }
            if lat > self.lat_max.get() {
                self.lat_max.set(lat);
            }
        } else {
            self.failed.set(self.failed.get() + 1);
        }
        let Some(buf) = buf else {
            self.retire();
            return;
        };
        let slot = (tag & !VERIFY_READ) as u32;
        if self.spec.verify {
            if tag & VERIFY_READ == 0 {
                // A write done: always read it back, even past the deadline.
                if ok {
                    return self.verify_read(slot, buf);
                }
            } else if ok {
                let s = self.verify_slots.borrow()[slot as usize];
                if !check_pattern(&buf.as_slice()[..len as usize], s.unit, s.generation) {
                    self.miscompares.set(self.miscompares.get() + 1);
                }
            }
            if self.running(now) {
                return self.verify_write(slot, buf);
            }
        } else if self.running(now) {
            return self.next(slot, buf);
        }
        self.retire();
    }
}

#[inline]
fn pattern_word(unit: u64, generation: u64, i: u64) -> u64 {
    let mut x = unit.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ generation.rotate_left(32) ^ i;
    x ^= x >> 31;
    x.wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

fn fill_pattern(buf: &mut [u8], unit: u64, generation: u64) {
    for (i, w) in buf.chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&pattern_word(unit, generation, i as u64).to_le_bytes());
    }
}

fn check_pattern(buf: &[u8], unit: u64, generation: u64) -> bool {
    buf.chunks_exact(8)
        .enumerate()
        .all(|(i, w)| w == pattern_word(unit, generation, i as u64).to_le_bytes())
}
