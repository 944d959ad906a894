//! [`Ioat`]: the I/OAT accel module, the channels it started and their
//! counters; it hands one channel to each thread that asks while any is
//! left.
//!
//! Thread: [`Ioat`] is shared (`Arc`, `Send + Sync`); it is built on the
//! thread that starts the engine ([`IoatDevices::start`](super::IoatDevices::start),
//! which brings up every channel there) and hands one started channel to
//! each thread that asks (`create_channel`, called on the reactor that will
//! use it).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use super::channel::IoatChannel;
use super::channel_pool::ChannelPool;
use super::driver::{Channel, DriverConfig, DriverCounters, Hardware};
use super::totals::Totals;
use crate::accel::{Module, ModuleChannel, Opcode};

/// The module's name, as in `--accel-assign copy=ioat` and metrics.
pub const NAME: &str = "ioat";

/// The I/OAT accel module.
pub struct Ioat {
    pool: Arc<ChannelPool>,
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
        let mut channels = Vec::new();
        for (hw, cfg) in hardware {
            let name = hw.name().to_owned();
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
            pool: Arc::new(ChannelPool {
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

    /// Logs the notes: what was found at info, problems at warn.
    pub(super) fn log(&self) {
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
        Some(Box::new(IoatChannel::new(ch, self.pool.clone())))
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
