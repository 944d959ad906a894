//! The I/OAT accel module: copy and fill on Intel I/OAT DMA channels,
//! driven from userspace.
//!
//! Thread: [`Ioat`] is shared (`Arc`, `Send + Sync`); it is built on the
//! thread that starts the engine (probing and bringing up every channel
//! there) and hands one started channel to each thread that asks
//! (`create_channel`, called on the reactor that will use it) while any
//! is left. An [`IoatChannel`] is used only by that reactor; when it is
//! dropped its channel goes back to the pool for the next thread.
//!
//! The parts, each behind a seam so the driver runs unchanged on real
//! hardware and on the model:
//!
//! - [`spec`]: registers, descriptor layout, opcodes, PCI ids;
//! - [`regs`]: the two seams, [`Registers`](regs::Registers) and
//!   [`DmaMemory`](regs::DmaMemory);
//! - [`driver`]: the channel driver (bring-up, ring, submission,
//!   completion, recovery);
//! - [`vfio`]: the VFIO backend (sysfs discovery, container, group,
//!   device, BAR0 mapping, bus mastering, IOMMU mappings of every DMA
//!   region);
//! - [`model`]: a software I/OAT device for tests and demos.
//!
//! One channel per reactor while channels last: SPDK gives each thread
//! its own I/OAT channel too (one PCI function is one channel). A reactor
//! that finds none left runs copy and fill on software, and the framework
//! records a note saying so.

pub mod driver;
pub mod model;
pub mod regs;
pub mod spec;
pub mod vfio;

#[cfg(test)]
mod tests;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use driver::{Channel, DriverConfig, DriverCounters, Hardware};
use model::{IoatModel, ModelConfig};

use super::{Completion, Module, ModuleChannel, Opcode, Submission, Task, TaskId};

/// The module's name, as in `--accel-assign copy=ioat` and metrics.
pub const NAME: &str = "ioat";

/// The least progress timeout of a model channel made from flags.
pub const MODEL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How to find channels for the module.
#[derive(Debug, Clone, Default)]
pub struct IoatOptions {
    /// Use I/OAT functions bound to vfio-pci (`--ioat`).
    pub hardware: bool,
    /// Only these PCI addresses (`--ioat-devices`); empty: every one found.
    pub devices: Vec<String>,
    /// Model channels to make (`--ioat-model N`).
    pub model_channels: usize,
    /// How each channel is run.
    pub driver: DriverConfig,
    /// What the model devices report.
    pub model: ModelConfig,
}

/// The I/OAT flags the daemon, accel-perf and bdev-perf share.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct IoatArgs {
    /// Run copy and fill on the Intel I/OAT DMA functions bound to
    /// vfio-pci (see docs/ioat.md). Without a usable one the engine runs on
    /// software and says why (in the log and in GetInfo's accel notes).
    #[arg(long = "ioat", env = "IO_ENGINE_IOAT", conflicts_with = "ioat_model")]
    pub ioat: bool,

    /// With --ioat: only these PCI functions, e.g. 0000:00:04.0 (comma
    /// separated).
    #[arg(
        long = "ioat-devices",
        value_name = "BDF",
        env = "IO_ENGINE_IOAT_DEVICES",
        value_delimiter = ',',
        requires = "ioat"
    )]
    pub ioat_devices: Vec<String>,

    /// Run copy and fill on N channels of the I/OAT device model: a
    /// software I/OAT device (a thread per channel) behind the same driver,
    /// for demos and tests; it measures the driver, not hardware.
    #[arg(
        long = "ioat-model",
        value_name = "N",
        env = "IO_ENGINE_IOAT_MODEL",
        default_value_t = 0
    )]
    pub ioat_model: usize,
}

impl IoatArgs {
    /// The options these flags ask for.
    pub fn options(&self) -> IoatOptions {
        IoatOptions {
            hardware: self.ioat,
            devices: self.ioat_devices.clone(),
            model_channels: self.ioat_model,
            ..IoatOptions::default()
        }
    }

    /// The module these flags ask for, as the offload list of an
    /// [`Accel`](super::Accel) (empty without I/OAT flags).
    pub fn modules(&self) -> Vec<Arc<dyn Module>> {
        Ioat::from_options(&self.options())
            .map(|m| Arc::new(m) as Arc<dyn Module>)
            .into_iter()
            .collect()
    }
}

impl IoatOptions {
    /// Whether any I/OAT flag asked for the module.
    pub fn wanted(&self) -> bool {
        self.hardware || self.model_channels > 0
    }
}

/// Channels not held by a thread, and the counters of all.
struct Pool {
    free: Mutex<Vec<Channel>>,
}

/// The I/OAT accel module.
pub struct Ioat {
    pool: Arc<Pool>,
    total: usize,
    fill: bool,
    max_request: usize,
    max_batch: usize,
    notes: Vec<String>,
    counters: Vec<Arc<DriverCounters>>,
    /// The started channels' devices (PCI addresses; `model-N` for the
    /// device model), for [`Module::implementation`].
    channel_names: Vec<String>,
}

impl Ioat {
    /// The module the options ask for, with what it found said in its
    /// notes (and the log). `None` when no I/OAT flag was given.
    pub fn from_options(opts: &IoatOptions) -> Option<Ioat> {
        if !opts.wanted() {
            return None;
        }
        let mut hardware = Vec::new();
        let mut notes = Vec::new();
        if opts.hardware {
            let found =
                vfio::open_all(&vfio::SysfsRoot::system(), &vfio::SystemVfio, &opts.devices);
            hardware.extend(found.hardware.into_iter().map(|h| (h, opts.driver.clone())));
            notes.extend(found.notes);
        }
        // The model's device thread shares the CPUs with everything else
        // (on a 2-CPU test machine, with the reactors and other tests): a
        // stall of a second there is the machine, not the model. Real
        // hardware keeps the configured timeout.
        let model_driver = DriverConfig {
            timeout: opts.driver.timeout.max(MODEL_TIMEOUT),
            ..opts.driver.clone()
        };
        for _ in 0..opts.model_channels {
            hardware.push((
                model_hardware(IoatModel::new(opts.model.clone())),
                model_driver.clone(),
            ));
        }
        let m = Ioat::start_each(hardware, notes);
        m.log();
        Some(m)
    }

    /// A module of `n` model channels (tests, demos).
    pub fn model(n: usize, model: ModelConfig, driver: &DriverConfig) -> Ioat {
        let hw = (0..n)
            .map(|_| model_hardware(IoatModel::new(model.clone())))
            .collect();
        Ioat::start(hw, driver, Vec::new())
    }

    /// Starts a channel on each of `hardware`; those that fail are left
    /// out, with a note saying why.
    pub fn start(hardware: Vec<Hardware>, cfg: &DriverConfig, notes: Vec<String>) -> Ioat {
        Ioat::start_each(
            hardware.into_iter().map(|h| (h, cfg.clone())).collect(),
            notes,
        )
    }

    /// As [`Ioat::start`], each device with its own configuration.
    pub fn start_each(hardware: Vec<(Hardware, DriverConfig)>, mut notes: Vec<String>) -> Ioat {
        let mut channels = Vec::new();
        for (hw, cfg) in hardware {
            let name = hw.name.clone();
            match Channel::start(hw, cfg) {
                Ok(ch) => channels.push(ch),
                Err(e) => notes.push(format!(
                    "ioat {name}: cannot start the channel: {e}; it is not used"
                )),
            }
        }
        let total = channels.len();
        let fill = total > 0 && channels.iter().all(Channel::supports_fill);
        let max_request = channels.iter().map(Channel::max_request).min().unwrap_or(0);
        let max_batch = channels
            .iter()
            .map(|c| c.ring_size() as usize - 1)
            .min()
            .unwrap_or(1);
        if total == 0 {
            notes.push(
                "ioat: no I/OAT channel could be used; copy and fill run on the software module"
                    .into(),
            );
        } else {
            let list: Vec<String> = channels
                .iter()
                .map(|c| {
                    format!(
                        "{} (CBVER {}.{}, {} per descriptor{})",
                        c.name(),
                        c.version() >> 4,
                        c.version() & 0xf,
                        human(c.max_xfer()),
                        if c.supports_fill() {
                            ", block fill"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            notes.push(format!(
                "ioat: {total} channel{} ready: {}; one per reactor while they last, the \
                 other reactors run copy and fill on software",
                if total == 1 { "" } else { "s" },
                list.join(", ")
            ));
            if !fill {
                notes.push("ioat: not every channel does block fill; fill runs on software".into());
            }
        }
        let counters = channels.iter().map(|c| c.counters().clone()).collect();
        let channel_names = channels.iter().map(|c| c.name().to_string()).collect();
        Ioat {
            pool: Arc::new(Pool {
                free: Mutex::new(channels),
            }),
            total,
            fill,
            max_request,
            max_batch,
            notes,
            counters,
            channel_names,
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

    /// What the module found, one line each.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Sums of the channels' driver counters.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for c in &self.counters {
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

    fn log(&self) {
        for n in &self.notes {
            if self.total > 0 && n.contains("ready") {
                tracing::info!("{n}");
            } else {
                tracing::warn!("{n}");
            }
        }
    }
}

/// Totals of the driver counters of every channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Descriptors written (null descriptors included).
    pub descriptors: u64,
    /// DMACOUNT writes.
    pub doorbells: u64,
    /// Requests that succeeded.
    pub completed: u64,
    /// Requests failed with an engine error.
    pub failed: u64,
    /// Requests refused by the driver.
    pub invalid: u64,
    /// Requests built again after a halt.
    pub resubmitted: u64,
    /// Halts.
    pub halts: u64,
    /// Timeouts.
    pub timeouts: u64,
    /// Unusable completion words.
    pub bad_completions: u64,
    /// Channel starts.
    pub starts: u64,
    /// Requests that waited for ring space.
    pub ring_full: u64,
}

/// A model device as hardware for a channel (the channel keeps it alive).
pub fn model_hardware(m: IoatModel) -> Hardware {
    Hardware {
        name: m.name(),
        regs: Box::new(m.registers()),
        mem: Arc::new(m.memory()),
        keep: Some(Box::new(m)),
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

impl Module for Ioat {
    fn name(&self) -> &'static str {
        NAME
    }

    fn supports(&self, op: Opcode) -> bool {
        match op {
            Opcode::Copy => self.total > 0,
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
        match self.channel_names.as_slice() {
            [] => "no channel".into(),
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
        Some(Box::new(IoatChannel {
            ch: Some(ch),
            pool: self.pool.clone(),
        }))
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

/// One reactor's I/OAT channel.
pub struct IoatChannel {
    ch: Option<Channel>,
    pool: Arc<Pool>,
}

impl IoatChannel {
    fn ch(&mut self) -> &mut Channel {
        self.ch.as_mut().expect("the channel is held until drop")
    }
}

impl ModuleChannel for IoatChannel {
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
}

impl Drop for IoatChannel {
    fn drop(&mut self) {
        let Some(ch) = self.ch.take() else { return };
        if ch.in_flight() > 0 {
            // The framework drops a channel only with nothing in flight;
            // should it not, the device must stop (dropping the channel
            // resets it) before the buffers go, and the channel is lost.
            tracing::warn!(
                "ioat {}: channel released with {} requests in flight; resetting it, it is \
                 not used again",
                ch.name(),
                ch.in_flight()
            );
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
