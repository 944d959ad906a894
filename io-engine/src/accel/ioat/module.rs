//! [`Ioat`]: the I/OAT accel module, the channels it started and their
//! counters; it hands one channel to each thread that asks while any is
//! left.
//!
//! Thread: [`Ioat`] is shared (`Arc`, `Send + Sync`); it is built on the
//! thread that starts the engine ([`IoatDevices::start`](super::IoatDevices::start),
//! which brings up every channel there) and hands one started channel to
//! each thread that asks (`create_channel`, called on the reactor that will
//! use it).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::driver::{Channel, DriverConfig, DriverCounters, Hardware};
use super::totals::Totals;
use crate::accel::{
    Completion, HardwareChannel, HardwarePool, Module, ModuleChannel, Opcode, Task, TaskId,
    human_bytes,
};

/// The module's name, as in `--accel-assign copy=ioat` and metrics.
pub const NAME: &str = "ioat";

/// The I/OAT accel module.
pub struct Ioat {
    pool: Arc<HardwarePool<Channel>>,
    fill: bool,
    max_request: usize,
    max_batch: usize,
    notes: Vec<String>,
}

impl Ioat {
    /// Starts a channel on each of `hardware`, whose memory the caller made
    /// device-visible itself (a test's own IOVA map); those that fail are
    /// left out, with a note saying why. Opened devices start through
    /// [`IoatDevices::start`](super::IoatDevices::start).
    pub fn start(hardware: Vec<Hardware>, cfg: &DriverConfig, notes: Vec<String>) -> Ioat {
        Ioat::start_each(
            hardware.into_iter().map(|h| (h, cfg.clone())).collect(),
            notes,
        )
    }

    /// As [`Ioat::start`], each device with its own configuration.
    pub fn start_each(hardware: Vec<(Hardware, DriverConfig)>, mut notes: Vec<String>) -> Ioat {
        let channels = HardwarePool::start_each(
            hardware
                .into_iter()
                .map(|(hw, cfg)| (hw.name().to_owned(), (hw, cfg))),
            |(hw, cfg)| Channel::start(hw, cfg),
            &mut notes,
        );
        let fill = !channels.is_empty() && channels.iter().all(Channel::supports_fill);
        let max_request = channels.iter().map(Channel::max_request).min().unwrap_or(0);
        let max_batch = channels
            .iter()
            .map(|c| c.ring_size() as usize - 1)
            .min()
            .unwrap_or(1);
        let pool = HardwarePool::new(channels, &mut notes);
        if pool.total() > 0 && !fill {
            notes.push("ioat: not every channel does block fill; fill runs on software".into());
        }
        Ioat {
            pool,
            fill,
            max_request,
            max_batch,
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

    /// What the module found, one line each.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Sums of the channels' driver counters.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for c in self.pool.counters() {
            let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
            t.descriptors += l(&c.descriptors);
            t.doorbells += l(&c.doorbells);
            t.completed += l(&c.completed);
            t.failed += l(&c.failed);
            t.invalid += l(&c.invalid);
            t.resubmitted += l(&c.resubmitted);
            t.halts += l(&c.halts);
            t.timeouts += l(&c.timeouts);
            t.bad_completions += l(&c.bad_completions);
            t.starts += l(&c.starts);
            t.ring_full += l(&c.ring_full);
        }
        t
    }

    /// Logs the notes: what was found at info, problems at warn.
    pub(super) fn log(&self) {
        self.pool.log(&self.notes);
    }
}

impl Module for Ioat {
    fn name(&self) -> &'static str {
        NAME
    }

    fn supports(&self, op: Opcode) -> bool {
        match op {
            Opcode::Copy => self.pool.total() > 0,
            Opcode::Fill => self.fill,
            _ => false,
        }
    }

    fn max_transfer(&self, op: Opcode) -> usize {
        if self.supports(op) {
            self.max_request
        } else {
            0
        }
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

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let t = self.totals();
        vec![
            ("descriptors", t.descriptors),
            ("doorbell_writes", t.doorbells),
            ("halts", t.halts),
            ("timeouts", t.timeouts),
            ("resubmitted", t.resubmitted),
            ("bad_completions", t.bad_completions),
            ("ring_full", t.ring_full),
        ]
    }
}

impl HardwareChannel for Channel {
    type Counters = DriverCounters;

    const MODULE: &'static str = NAME;
    const UNIT: &'static str = "channel";
    const NONE_USABLE: &'static str =
        "ioat: no I/OAT channel could be used; copy and fill run on the software module";
    const OTHERS_RUN: &'static str = "copy and fill on software";
    const START_FAILED: &'static str = "cannot start the channel";

    fn name(&self) -> &str {
        Channel::name(self)
    }

    fn describe(&self) -> String {
        format!(
            "{} (CBVER {}.{}, {} per descriptor{})",
            self.name(),
            self.version() >> 4,
            self.version() & 0xf,
            human_bytes(self.max_xfer()),
            if self.supports_fill() {
                ", block fill"
            } else {
                ""
            }
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
