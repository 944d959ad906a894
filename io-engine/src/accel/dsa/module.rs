//! [`Dsa`]: the DSA accel module, the channels it made on work queues and
//! their counters; it hands one channel to each thread that asks while any
//! is left.
//!
//! Thread: [`Dsa`] is shared (`Arc`, `Send + Sync`); it is built on the
//! thread that starts the engine and hands one channel to each thread that
//! asks (`create_channel`, called on the reactor that will use it).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::driver::{Channel, DriverConfig, DriverCounters, Hardware, MAX_REQUEST};
use super::totals::Totals;
use crate::accel::{
    Completion, HardwareChannel, HardwarePool, Module, ModuleChannel, Opcode, Task, TaskId,
    human_bytes,
};

/// The module's name, as in `--accel-assign copy=dsa` and metrics.
pub const NAME: &str = "dsa";

/// The DSA accel module.
pub struct Dsa {
    pool: Arc<HardwarePool<Channel>>,
    /// Per opcode: every channel's device runs it.
    ops: [bool; Opcode::COUNT],
    max_batch: usize,
    notes: Vec<String>,
}

impl Dsa {
    /// A channel on each of `hardware` (those that fail are left out, with
    /// a note saying why).
    pub fn start(hardware: Vec<Hardware>, cfg: &DriverConfig, mut notes: Vec<String>) -> Dsa {
        let channels = HardwarePool::start_each(
            hardware
                .into_iter()
                .map(|hw| (hw.wq.info().name.clone(), hw)),
            |hw| Channel::start(hw, cfg.clone()),
            &mut notes,
        );
        let total = channels.len();
        let ops = Opcode::ALL.map(|op| total > 0 && channels.iter().all(|c| c.supports(op)));
        let missing: Vec<&str> = Opcode::ALL
            .into_iter()
            .filter(|op| total > 0 && !ops[op.index()])
            .map(Opcode::name)
            .collect();
        let pool = HardwarePool::new(channels, &mut notes);
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
        Dsa {
            pool,
            ops,
            max_batch: cfg.max_batch.max(1) as usize,
            notes,
        }
    }

    /// Channels the module has (held by threads or free).
    pub fn channels(&self) -> usize {
        self.pool.total()
    }

    /// Channels no thread holds now.
    pub fn free_channels(&self) -> usize {
        self.pool.free()
    }

    /// Sums of the channels' driver counters.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for c in self.pool.counters() {
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
        self.pool.log(&self.notes);
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
        self.pool.implementation()
    }

    fn create_channel(&self) -> Option<Box<dyn ModuleChannel>> {
        self.pool.take()
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

impl HardwareChannel for Channel {
    type Counters = DriverCounters;

    const MODULE: &'static str = NAME;
    const UNIT: &'static str = "work queue";
    const NONE_USABLE: &'static str =
        "dsa: no DSA work queue could be used; every opcode runs on the software module";
    const OTHERS_RUN: &'static str = "on software";
    const START_FAILED: &'static str = "cannot use the work queue";

    fn name(&self) -> &str {
        Channel::name(self)
    }

    fn describe(&self) -> String {
        format!(
            "{} ({}, {} per descriptor, batches of {})",
            self.name(),
            if self.dedicated() {
                "dedicated"
            } else {
                "shared"
            },
            human_bytes(self.max_transfer()),
            self.batch_max()
        )
    }

    fn counters(&self) -> &Arc<DriverCounters> {
        Channel::counters(self)
    }

    fn submit(&mut self, tasks: &[Task], first: TaskId, done: &mut Vec<(TaskId, Completion)>) {
        Channel::submit(self, tasks, first, done);
    }

    fn poll(&mut self, done: &mut Vec<(TaskId, Completion)>) -> usize {
        Channel::poll(self, done)
    }

    fn in_flight(&self) -> usize {
        Channel::in_flight(self)
    }

    fn broken(&self) -> bool {
        Channel::broken(self).is_some()
    }
}
