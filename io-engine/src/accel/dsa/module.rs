//! [`Dsa`]: the DSA accel module, the channels it made on work queues and
//! their counters; it hands one channel to each thread that asks while any
//! is left.
//!
//! Thread: [`Dsa`] is shared (`Arc`, `Send + Sync`); it is built on the
//! thread that starts the engine and hands one channel to each thread that
//! asks (`create_channel`, called on the reactor that will use it).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::driver::{Channel, DriverConfig, DriverCounters, Hardware, MAX_REQUEST};
use crate::accel::{
    Completion, Module, ModuleChannel, OFFLOAD_DRAIN_TIMEOUT, Opcode, Submission, Task, TaskId,
};

/// The module's name, as in `--accel-assign copy=dsa` and metrics.
pub const NAME: &str = "dsa";

/// Channels no thread holds.
struct ChannelPool {
    free: Mutex<Vec<Channel>>,
}

/// Sums of the driver counters of every channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Work descriptors written.
    pub descriptors: u64,
    /// Portal writes accepted (one per submission: a batch or a lone
    /// descriptor).
    pub portal_writes: u64,
    /// Batch descriptors among them.
    pub batches: u64,
    /// ENQCMD "retry" answers.
    pub retries: u64,
    /// Requests that succeeded.
    pub completed: u64,
    /// Requests failed with an engine error.
    pub failed: u64,
    /// Requests refused.
    pub invalid: u64,
    /// Partial completions (page faults).
    pub page_faults: u64,
    /// Pieces resumed after one.
    pub resumed: u64,
    /// Descriptors of a completed batch that never ran.
    pub not_run: u64,
    /// Faulting pages touched before a resumption.
    pub touched: u64,
    /// Timeouts.
    pub timeouts: u64,
}

/// The DSA accel module.
pub struct Dsa {
    pool: Arc<ChannelPool>,
    total: usize,
    /// Per opcode: every channel's device runs it.
    ops: [bool; Opcode::COUNT],
    max_batch: usize,
    notes: Vec<String>,
    counters: Vec<Arc<DriverCounters>>,
    names: Vec<String>,
}

impl Dsa {
    /// A channel on each of `hardware` (those that fail are left out, with
    /// a note saying why).
    pub fn start(hardware: Vec<Hardware>, cfg: &DriverConfig, mut notes: Vec<String>) -> Dsa {
        let mut channels = Vec::new();
        for hw in hardware {
            let name = hw.wq.info().name.clone();
            match Channel::start(hw, cfg.clone()) {
                Ok(ch) => channels.push(ch),
                Err(e) => notes.push(format!(
                    "dsa {name}: cannot use the work queue: {e}; it is not used"
                )),
            }
        }
        let total = channels.len();
        if total == 0 {
            notes.push(
                "dsa: no DSA work queue could be used; every opcode runs on the software module"
                    .into(),
            );
        } else {
            let list: Vec<String> = channels
                .iter()
                .map(|c| {
                    format!(
                        "{} ({}, {} per descriptor, batches of {})",
                        c.name(),
                        if c.dedicated() { "dedicated" } else { "shared" },
                        human(c.max_transfer()),
                        c.batch_max()
                    )
                })
                .collect();
            notes.push(format!(
                "dsa: {total} work queue{} ready: {}; one per reactor while they last, the other \
                 reactors run on software",
                if total == 1 { "" } else { "s" },
                list.join(", ")
            ));
        }
        let ops = Opcode::ALL.map(|op| total > 0 && channels.iter().all(|c| c.supports(op)));
        let missing: Vec<&str> = Opcode::ALL
            .into_iter()
            .filter(|op| total > 0 && !ops[op.index()])
            .map(Opcode::name)
            .collect();
        if !missing.is_empty() {
            notes.push(format!(
                "dsa: not every work queue's device runs {}; {} on software",
                missing.join(", "),
                if missing.len() == 1 {
                    "it runs"
                } else {
                    "they run"
                }
            ));
        }
        let counters = channels.iter().map(|c| c.counters().clone()).collect();
        let names = channels.iter().map(|c| c.name().to_string()).collect();
        Dsa {
            pool: Arc::new(ChannelPool {
                free: Mutex::new(channels),
            }),
            total,
            ops,
            max_batch: cfg.max_batch.max(1) as usize,
            notes,
            counters,
            names,
        }
    }

    /// Channels the module has (held by threads or free).
    pub fn channels(&self) -> usize {
        self.total
    }

    /// Channels no thread holds now.
    pub fn free_channels(&self) -> usize {
        self.pool
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Sums of the channels' driver counters.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for c in &self.counters {
            let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
            t.descriptors += l(&c.descriptors);
            t.portal_writes += l(&c.portal_writes);
            t.batches += l(&c.batches);
            t.retries += l(&c.retries);
            t.completed += l(&c.completed);
            t.failed += l(&c.failed);
            t.invalid += l(&c.invalid);
            t.page_faults += l(&c.page_faults);
            t.resumed += l(&c.resumed);
            t.not_run += l(&c.not_run);
            t.touched += l(&c.touched);
            t.timeouts += l(&c.timeouts);
        }
        t
    }

    /// Logs the notes: what was found at info, problems at warn.
    pub fn log(&self) {
        for n in &self.notes {
            if self.total > 0 && n.contains("ready") {
                tracing::info!("{n}");
            } else {
                tracing::warn!("{n}");
            }
        }
    }
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b.is_multiple_of(1 << 30) => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

impl Module for Dsa {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Every framework opcode: copy (memory move), fill, compare,
    /// dualcast, crc32c (CRC generation) and copy_crc32c (copy with CRC
    /// generation).
    fn supports(&self, op: Opcode) -> bool {
        self.ops[op.index()]
    }

    fn max_transfer(&self, op: Opcode) -> usize {
        if self.supports(op) { MAX_REQUEST } else { 0 }
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }

    fn implementation(&self) -> String {
        match self.names.as_slice() {
            [] => "no work queue".into(),
            names => names.join(", "),
        }
    }

    fn create_channel(&self) -> Option<Box<dyn ModuleChannel>> {
        let ch = self
            .pool
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()?;
        Some(Box::new(DsaChannel {
            ch: Some(ch),
            pool: self.pool.clone(),
        }))
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    /// `doorbell_writes` is the portal writes (the name accel-perf and
    /// the metrics use for every offload module's doorbells).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let t = self.totals();
        vec![
            ("descriptors", t.descriptors),
            ("doorbell_writes", t.portal_writes),
            ("portal_writes", t.portal_writes),
            ("batch_descriptors", t.batches),
            ("retries", t.retries),
            ("page_faults", t.page_faults),
            ("resumed", t.resumed),
            ("not_run", t.not_run),
            ("touched", t.touched),
            ("timeouts", t.timeouts),
        ]
    }
}

/// One reactor's DSA channel.
pub struct DsaChannel {
    ch: Option<Channel>,
    pool: Arc<ChannelPool>,
}

impl DsaChannel {
    fn ch(&mut self) -> &mut Channel {
        self.ch.as_mut().expect("the channel is held until drop")
    }
}

impl ModuleChannel for DsaChannel {
    fn submit(
        &mut self,
        tasks: &[Task],
        first: TaskId,
        done: &mut Vec<(TaskId, Completion)>,
    ) -> Submission {
        self.ch().submit(tasks, first, done);
        Submission::Submitted
    }

    fn poll(&mut self, done: &mut Vec<(TaskId, Completion)>) -> usize {
        self.ch().poll(done)
    }

    fn in_flight(&self) -> usize {
        self.ch.as_ref().map_or(0, Channel::in_flight)
    }

    /// A broken channel never reports what it still holds.
    fn stuck(&self) -> bool {
        self.ch
            .as_ref()
            .is_some_and(|c| c.broken().is_some() && c.in_flight() > 0)
    }
}

impl Drop for DsaChannel {
    /// Drains the channel, then gives it back to the pool; one that still
    /// holds requests past the deadline (or is broken) is not used again,
    /// and one with submissions in flight leaks its descriptor memory.
    fn drop(&mut self) {
        let mut done = Vec::new();
        let left = self.drain(&mut done, Instant::now() + OFFLOAD_DRAIN_TIMEOUT);
        let Some(ch) = self.ch.take() else { return };
        if left > 0 {
            tracing::error!(
                "dsa {}: channel released with {left} requests still held after \
                 {OFFLOAD_DRAIN_TIMEOUT:?}; it is not used again",
                ch.name()
            );
            std::mem::forget(ch);
            return;
        }
        if ch.broken().is_some() {
            return;
        }
        self.pool
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(ch);
    }
}
