//! The I/OAT channel driver: bring-up, the descriptor ring, building copy
//! and fill requests, the doorbell, completion polling, and recovery from
//! a halted or stuck channel. It follows SPDK's `lib/ioat/ioat.c` and sees
//! the device only through [`Registers`] and [`DmaMemory`].
//!
//! Thread: a [`Channel`] is brought up on whichever thread probes the
//! device (the daemon's main thread, a test) and from then on used by one
//! thread at a time: the reactor whose accel channel holds it. It polls;
//! it never blocks on the device except while (re)starting the channel,
//! which waits for the device's reset and its first null descriptor.
//!
//! The ring: `ring_size` descriptors (a power of two) linked circularly
//! through `next`, with free-running `u32` head and tail (slot = index &
//! (size - 1), free slots = size - (head - tail) - 1). A request is split
//! into descriptors at the device's largest transfer (XFERCAP) and where
//! its buffers stop being contiguous in IOVA space; only its last
//! descriptor remembers its task (a zero-length request is one null
//! descriptor). A submission builds every request of a batch, then
//! flushes once: "completion update" on the batch's last descriptor (not
//! yet handed over), then one DMACOUNT write. A batch's work between two
//! completion writes is bounded ([`WorkBound`]: what a channel at an
//! assumed slowest rate does in a quarter of the timeout, 64 MiB and
//! 25 000 descriptors by default): a descriptor is at most the bound's
//! bytes, and when the next one would take the stretch past the bound,
//! the one before it gets "completion update" too, so a long legitimate
//! batch shows progress well before the timeout. No slot is written once the
//! doorbell has handed it over. A request that does not fit the free
//! slots waits (in order) in a backlog and is built when completions free
//! slots; nothing is failed for lack of room.
//!
//! Completion comes from the completion word only: it names the last
//! batch end done; every slot from the tail up to and including it is
//! retired, and the tasks whose last descriptor was among them succeed. A
//! value is taken only when it names a descriptor with "completion
//! update" (a flushed batch end) in flight, at or after the tail. One
//! completion write per batch, not per request (DPDK marks every
//! request's end, SPDK every descriptor): each write takes the cache line
//! the reactor polls, and on the model marking every request halved the
//! batched rate (`bench/accel-model`). CHANSTS is
//! never used to retire anything: the device may show a descriptor there
//! before its data and its completion write have landed, and a completion
//! word that lands after a CHANSTS read names an earlier end that, once
//! the tail has moved past it, looks like one a whole ring ahead. (SPDK's
//! `ioat_process_channel_events` and Linux's `__cleanup` advance from the
//! completion word alone and read CHANSTS for halts.) When the word has
//! not moved for [`DriverConfig::stall_check`] with requests in flight the
//! driver reads CHANSTS for its state and as a sign of life: idle with the
//! word short of the last batch end means a completion write was lost or
//! is still held, and the driver appends one null descriptor with
//! completion update (a nudge), whose write names everything before it;
//! an address that moved since the last look is progress for the timeout
//! (a long batch on a slow device writes its word only at its end) but
//! retires nothing.
//!
//! How a halt is learnt: the driver programs CHANCTRL with
//! ERR_COMPLETION_EN besides ANY_ERR_ABORT_EN ([`spec::chanctrl::RUN`], as
//! Linux's `IOAT_CHANCTRL_RUN`), so on an error the device writes the
//! completion word with the HALTED state and the address of the last
//! descriptor it completed. That write follows every earlier data write,
//! so what it names is done: Linux's `ioat_eh` cleans up to it and fails
//! the descriptor at the tail. (SPDK sets only ANY_ERR_ABORT_EN and so
//! never learns which descriptors completed before a halt.) A halt whose
//! completion write never lands (lost, or a device that makes none) is
//! found through CHANSTS at the first stall check after it (the word has
//! stood still for [`DriverConfig::stall_check`], 100 us by default), as
//! Linux's `ioat_timer_event` reads CHANSTS for a halt; not left to the
//! timeout.
//!
//! Failures:
//!
//! - HALTED (in the completion word): CHANERR says why. Descriptors up to
//!   the word's address completed; the request owning the next descriptor
//!   (the one that failed) fails with [`Status::EngineError`]; the
//!   requests after it, which the device never started, are built again,
//!   in order, after the channel is reset and brought up again, and
//!   complete normally.
//! - HALTED in CHANSTS at a stall check, with no HALTED completion word:
//!   which descriptors completed is unknown, so, as on a timeout, the
//!   channel is reset and every request in the ring fails with
//!   `EngineError`; the backlog is built on the new ring.
//! - No progress of the completion word for [`DriverConfig::timeout`]
//!   (a stall, a device that stopped without halting): every request
//!   in flight fails with `EngineError` (the device may have done part of
//!   any of them), the channel is reset and brought up again, and the
//!   backlog is built on the new ring. A slow device whose word or CHANSTS
//!   keeps moving is never timed out.
//! - A completion word that names no batch end in flight (corrupt or
//!   out of order) is counted and ignored; the stall check's nudge
//!   recovers a lost last word.
//! - A buffer with no IOVA (memory the device cannot reach): that request
//!   completes at once with [`Status::InvalidArgument`], as does one that
//!   needs more descriptors than the ring holds.
//! - A channel that cannot be brought up again is broken: every later
//!   request fails with `EngineError`, and it says so in the log.
//!
//! No request is reported done (success or failure) while the device may
//! still write its buffers. A restart resets the channel before anything
//! else; when the reset does not complete, the function's DMA is stopped
//! through [`PciConfig`] (a function-level reset, else bus mastering off,
//! read back) and only then are the requests of the ring failed. When even
//! that fails the channel keeps them (`in_flight` stays above 0), never
//! reports them, and leaks its ring rather than free memory the device may
//! write.

use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use super::spec::{self, chan, chancmd, chanctrl, chansts, control, desc, op};
use crate::accel::{Completion, Opcode, Status, Task, TaskId, bump};
use crate::env::dma::{DmaBuffer, DmaMemory, WindowCache};
use crate::env::tsc;
use crate::env::vfio::{
    PCI_COMMAND, PCI_COMMAND_BUS_MASTER, PciConfig, Registers, find_capability,
};

/// How a channel is run.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// Descriptors in the ring: a power of two, 16 to 65536 (DMACOUNT is
    /// 16 bits).
    pub ring_size: u32,
    /// How long requests may be in flight with no progress before they
    /// fail and the channel is reset.
    pub timeout: Duration,
    /// How long the completion word may stand still, with requests in
    /// flight, before the driver reads CHANSTS itself.
    pub stall_check: Duration,
    /// How long bring-up waits for each step (suspend, reset, the null
    /// descriptor). SPDK waits 20 ms for the reset and 10 ms for the null
    /// descriptor; real hardware needs microseconds, the device model's
    /// thread may wait for a CPU on a busy machine.
    pub start_timeout: Duration,
    /// The slowest data rate (bytes per second) the driver assumes of a
    /// busy channel, to bound the work between two completion writes
    /// ([`WorkBound`]).
    pub min_rate: u64,
    /// The slowest descriptor rate (descriptors per second) it assumes,
    /// likewise.
    pub min_descriptor_rate: u64,
}

/// The most work the driver puts between two completion writes (and in
/// one descriptor): what a channel at [`DriverConfig::min_rate`] and
/// [`DriverConfig::min_descriptor_rate`] finishes in a quarter of
/// [`DriverConfig::timeout`], so that a long legitimate batch writes its
/// completion word well before the timeout could fire. With the defaults
/// (1 s, 256 MiB/s, 100 000 descriptors/s): 64 MiB and 25 000
/// descriptors, more than a default ring of 4096 descriptors of a few
/// KiB holds, so batches of small requests keep one completion write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkBound {
    /// Bytes between two completion writes, and the largest descriptor
    /// (whole 4 KiB pages, at least one: the smallest XFERCAP).
    pub bytes: u64,
    /// Descriptors between two completion writes (at least 1).
    pub descriptors: u32,
}

impl WorkBound {
    /// The bound for `cfg`.
    pub fn of(cfg: &DriverConfig) -> WorkBound {
        let budget = cfg.timeout / 4;
        let scale = |rate: u64| (rate as u128 * budget.as_nanos() / 1_000_000_000) as u64;
        WorkBound {
            bytes: (scale(cfg.min_rate) / 4096 * 4096).max(4096),
            descriptors: scale(cfg.min_descriptor_rate).clamp(1, u32::MAX as u64) as u32,
        }
    }
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            ring_size: DEFAULT_RING_SIZE,
            timeout: Duration::from_secs(1),
            stall_check: Duration::from_micros(100),
            start_timeout: Duration::from_secs(1),
            min_rate: DEFAULT_MIN_RATE,
            min_descriptor_rate: DEFAULT_MIN_DESCRIPTOR_RATE,
        }
    }
}

/// Descriptors per ring unless told otherwise.
pub const DEFAULT_RING_SIZE: u32 = 4096;

/// The data rate the driver assumes of a channel unless told otherwise:
/// 256 MiB/s, an order of magnitude below what one I/OAT channel moves
/// (a few GB/s), so that a channel sharing memory bandwidth with
/// everything else still meets it.
pub const DEFAULT_MIN_RATE: u64 = 256 << 20;

/// The descriptor rate assumed unless told otherwise: 100 000 a second
/// (10 us each), far below a channel's millions.
pub const DEFAULT_MIN_DESCRIPTOR_RATE: u64 = 100_000;

/// Longest request a channel takes: a quarter of the ring's descriptors at
/// the device's largest transfer (so a request always fits an empty ring,
/// with room for splits at IOVA discontinuities), at most 1 GiB.
pub fn max_request(ring_size: u32, max_xfer: u64) -> usize {
    ((ring_size as u64 / 4) * max_xfer).min(1 << 30) as usize
}

/// Why a channel could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// CBVER below 3.0.
    #[error(
        "unsupported I/OAT version {major}.{minor} (CBVER {cbver:#04x}); 3.0 or later is needed"
    )]
    Version {
        /// The register's value.
        cbver: u8,
        /// Major version.
        major: u8,
        /// Minor version.
        minor: u8,
    },
    /// XFERCAP below 12.
    #[error("invalid XFERCAP {0} (below 12, a 4 KiB transfer)")]
    XferCap(u8),
    /// CHANCNT (bits 4:0) is 0.
    #[error("CHANCNT is 0: the function has no DMA channel")]
    NoChannel,
    /// CHANERR_INT read as all ones (Linux `ioat_reset_hw`: "channel error
    /// register unreachable").
    #[error(
        "the internal channel error register (CHANERR_INT, config space 0x180) reads \
         {0:#x}: the function is unreachable"
    )]
    ChanErrInt(u32),
    /// CHANERR_INT did not clear when written back (read after the write).
    #[error(
        "ioat {device}: the internal channel error register (CHANERR_INT, config space 0x180) \
         still reads {after:#x} after {before:#x} was written back to clear it: the channel \
         would stay halted after its reset; the device is refused"
    )]
    ChanErrIntStuck {
        /// The device.
        device: String,
        /// What was read and written back.
        before: u32,
        /// What it read after.
        after: u32,
    },
    /// Relaxed ordering stays enabled in Device Control after it was
    /// cleared (read after the write).
    #[error(
        "ioat {device}: relaxed ordering stays enabled in the PCI Express Device Control \
         register (reads {devctl:#06x} after the bit was cleared): the device's completion \
         write could pass the data writes before it, so a request could be reported done \
         before its data landed; the device is refused"
    )]
    RelaxedOrdering {
        /// The device.
        device: String,
        /// Device Control as read back.
        devctl: u16,
    },
    /// A ring size that is not a power of two in 16..=65536.
    #[error("ring size {0} must be a power of two from 16 to 65536")]
    RingSize(u32),
    /// The ring and completion word could not be allocated.
    #[error("cannot allocate the descriptor ring: {0}")]
    Memory(String),
    /// A bring-up step did not finish in time.
    #[error(
        "timed out after {timeout:?} waiting for {what} (CHANSTS {chansts:#x}, CHANERR {chanerr:#x}: {errors})"
    )]
    Timeout {
        /// The step.
        what: &'static str,
        /// How long it was given.
        timeout: Duration,
        /// CHANSTS then.
        chansts: u64,
        /// CHANERR then.
        chanerr: u32,
        /// CHANERR's bits by name.
        errors: String,
    },
}

/// What one channel has done, written by its thread and read by any.
#[derive(Debug, Default)]
pub struct DriverCounters {
    /// Descriptors written (null descriptors included).
    pub descriptors: AtomicU64,
    /// DMACOUNT writes.
    pub doorbells: AtomicU64,
    /// Requests completed with success.
    pub completed: AtomicU64,
    /// Requests failed with an engine error.
    pub failed: AtomicU64,
    /// Requests refused (no IOVA, too large for the ring).
    pub invalid: AtomicU64,
    /// Requests built again after a halt.
    pub resubmitted: AtomicU64,
    /// Halts seen.
    pub halts: AtomicU64,
    /// Timeouts.
    pub timeouts: AtomicU64,
    /// Completion words that named no descriptor in flight.
    pub bad_completions: AtomicU64,
    /// Times the channel was brought up (the first start included).
    pub starts: AtomicU64,
    /// Times a request waited in the backlog for ring space.
    pub ring_full: AtomicU64,
}

/// A device a channel runs on: its registers, its configuration space and
/// the memory it reaches, tied together by [`Hardware::new`]'s contract
/// (the fields are private so that safe code cannot pair a device with
/// memory it does not reach).
pub struct Hardware {
    /// A name for messages (a PCI address, `model-N`).
    name: String,
    /// Its BAR0 registers.
    regs: Box<dyn Registers>,
    /// Its PCI configuration space.
    pci: Box<dyn PciConfig>,
    /// Memory it can reach.
    mem: Arc<dyn DmaMemory>,
    /// Whatever must live as long as the channel (a VFIO device, a model,
    /// the registration of the mapper that makes memory visible to it).
    keep: Option<Box<dyn std::any::Any + Send>>,
}

impl Hardware {
    /// The device behind `regs` and `pci`, named `name` in messages, which
    /// reaches memory as `mem` says; `keep` lives as long as the channel
    /// (and is dropped after the device is stopped).
    ///
    /// # Safety
    ///
    /// `regs` and `pci` are one I/OAT function's BAR0 and configuration
    /// space (or a model's), and `mem` describes memory that function
    /// reaches ([`DmaMemory`]'s contract): every IOVA the channel takes
    /// from `mem` names, for this device, the memory `mem` says it does
    /// (an IOMMU mapping of the function's container, the model's own
    /// address space). The channel writes those IOVAs into registers and
    /// descriptors, so a mismatch would let the device write memory
    /// nobody gave it.
    pub unsafe fn new(
        name: String,
        regs: Box<dyn Registers>,
        pci: Box<dyn PciConfig>,
        mem: Arc<dyn DmaMemory>,
        keep: Option<Box<dyn std::any::Any + Send>>,
    ) -> Hardware {
        Hardware {
            name,
            regs,
            pci,
            mem,
            keep,
        }
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its configuration space (for the backends' tests).
    #[cfg(test)]
    pub(crate) fn pci(&self) -> &dyn PciConfig {
        self.pci.as_ref()
    }

    /// Keeps `later` alive with the device too, dropped after what it
    /// already keeps (the device first, then, say, the registration of the
    /// mapper that keeps its memory mapped).
    pub fn keep_also(&mut self, later: impl std::any::Any + Send) {
        self.keep = Some(Box::new((self.keep.take(), later)));
    }
}

/// One request as the driver keeps it until it completes (tasks are not
/// visible outside `submit`, and a request may be built again).
#[derive(Debug, Clone, Copy)]
struct Request {
    id: TaskId,
    fill: bool,
    dst: usize,
    src: usize,
    len: usize,
    pattern: u8,
}

/// Why a request was not built.
enum BuildError {
    /// Not enough free slots now.
    RingFull,
    /// It needs more descriptors than the ring holds.
    TooBig,
    /// A buffer the device cannot reach.
    NoIova,
}

/// Where the completion word sits in the ring buffer: after the ring.
fn completion_offset(ring_size: u32) -> usize {
    ring_size as usize * spec::DESC_SIZE
}

/// One I/OAT channel.
pub struct Channel {
    /// Released (a model stopped, a VFIO device closed) after `Drop for
    /// Channel` has stopped the device and freed (or leaked) the ring.
    hw: Hardware,
    cfg: DriverConfig,
    base: usize,
    /// Dropped by `Drop for Channel` only once the device is proven
    /// stopped; leaked otherwise.
    ring: ManuallyDrop<DmaBuffer>,
    size: u32,
    mask: u32,
    head: u32,
    tail: u32,
    /// Head at the last flush.
    flushed: u32,
    /// Completed-descriptor address last retired through (from the
    /// completion word).
    last_seen: u64,
    /// The completion word's value last acted on: only a new value is
    /// looked at.
    last_word: u64,
    /// CHANSTS's address at the last stall check: a change is the
    /// device's sign of life between completion words (never a reason to
    /// retire anything).
    status_seen: u64,
    /// The request ending at each slot.
    slots: Vec<Option<Request>>,
    /// Requests in the ring.
    in_ring: usize,
    /// Requests waiting for ring space, in order.
    backlog: VecDeque<Request>,
    max_xfer: u64,
    /// The largest descriptor built: XFERCAP's transfer, at most the
    /// work bound's bytes.
    xfer: u64,
    /// The most work between two completion writes.
    bound: WorkBound,
    /// Bytes and descriptors built since the last one marked with
    /// "completion update" (or the last handed over).
    unmarked_bytes: u64,
    unmarked_descs: u32,
    fill: bool,
    cbver: u8,
    /// Whether the function has CHANERR_INT ([`spec::has_chanerr_int`]).
    chanerr_int: bool,
    /// The function's DMA was stopped through its configuration space (a
    /// function-level reset or bus mastering off).
    dma_off: bool,
    windows: WindowCache,
    /// tsc of the last progress (or of the first request since).
    progress: u64,
    /// tsc of the last CHANSTS read.
    checked: u64,
    timeout_ticks: u64,
    stall_ticks: u64,
    broken: Option<String>,
    counters: Arc<DriverCounters>,
}

impl Channel {
    /// Starts a channel on `hw`: checks CBVER and CHANCNT, reads XFERCAP
    /// and DMACAPABILITY, clears relaxed ordering, allocates the ring and
    /// the completion word, resets the channel and runs one null descriptor
    /// through it (SPDK's `ioat_channel_start`, Linux `ioat3_dma_probe`).
    /// Bus mastering is the backend's to enable before.
    ///
    /// Crate-private: the channel programs the device with IOVAs from
    /// `hw`'s memory, which is sound because [`Hardware::new`]'s contract
    /// (an `unsafe fn`) ties that memory to the device.
    pub(crate) fn start(hw: Hardware, cfg: DriverConfig) -> Result<Channel, StartError> {
        let size = cfg.ring_size;
        if !size.is_power_of_two() || !(16..=65536).contains(&size) {
            return Err(StartError::RingSize(size));
        }
        let cbver = hw.regs.read8(spec::CBVER);
        if cbver < spec::CBVER_MIN {
            return Err(StartError::Version {
                cbver,
                major: cbver >> 4,
                minor: cbver & 0xf,
            });
        }
        // Linux `ioat_enumerate_channels` reads CHANCNT (bits 4:0); a 3.x
        // function has one channel, and the driver runs channel 0.
        if hw.regs.read8(spec::CHANCNT) & spec::CHANCNT_MASK == 0 {
            return Err(StartError::NoChannel);
        }
        let fill = hw.regs.read32(spec::DMACAPABILITY) & spec::dmacap::BFILL != 0;
        // XFERCAP 0 is 4 GiB, as SPDK `ioat_channel_start` and the
        // specification read it (Linux `ioat_enumerate_channels` instead
        // enumerates no channel); below 12 is invalid (both).
        let xfercap = hw.regs.read8(spec::XFERCAP) & spec::XFERCAP_MASK;
        let Some(max_xfer) = spec::max_transfer(xfercap) else {
            return Err(StartError::XferCap(xfercap));
        };
        clear_relaxed_ordering(&hw)?;
        let chanerr_int = spec::has_chanerr_int(cbver, hw.pci.device_id());
        let bound = WorkBound::of(&cfg);
        let ring = match hw.mem.alloc(completion_offset(size) + spec::DESC_SIZE) {
            Ok(r) => r,
            Err(e) => return Err(StartError::Memory(e)),
        };
        let mut ch = Channel {
            base: spec::channel_base(0),
            ring: ManuallyDrop::new(ring),
            size,
            mask: size - 1,
            head: 0,
            tail: 0,
            flushed: 0,
            last_seen: 0,
            last_word: 0,
            status_seen: 0,
            slots: vec![None; size as usize],
            in_ring: 0,
            backlog: VecDeque::with_capacity(size as usize),
            max_xfer,
            xfer: max_xfer.min(bound.bytes),
            bound,
            unmarked_bytes: 0,
            unmarked_descs: 0,
            fill,
            cbver,
            chanerr_int,
            dma_off: false,
            windows: WindowCache::default(),
            progress: 0,
            checked: 0,
            timeout_ticks: tsc::ns_to_ticks(cfg.timeout.as_nanos() as u64),
            stall_ticks: tsc::ns_to_ticks(cfg.stall_check.as_nanos() as u64),
            broken: None,
            counters: Arc::new(DriverCounters::default()),
            cfg,
            hw,
        };
        ch.init()?;
        Ok(ch)
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.hw.name
    }

    /// Whether the device does block fill.
    pub fn supports_fill(&self) -> bool {
        self.fill
    }

    /// The largest transfer of one descriptor.
    pub fn max_xfer(&self) -> u64 {
        self.max_xfer
    }

    /// The longest request this channel takes (its descriptors at most
    /// the work bound's bytes each).
    pub fn max_request(&self) -> usize {
        max_request(self.size, self.xfer)
    }

    /// The most work the channel puts between two completion writes.
    pub fn work_bound(&self) -> WorkBound {
        self.bound
    }

    /// CBVER.
    pub fn version(&self) -> u8 {
        self.cbver
    }

    /// Descriptors in the ring.
    pub fn ring_size(&self) -> u32 {
        self.size
    }

    /// Its counters.
    pub fn counters(&self) -> &Arc<DriverCounters> {
        &self.counters
    }

    /// Why the channel stopped working, if it did.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Requests the channel holds (in the ring or waiting for room).
    pub fn in_flight(&self) -> usize {
        self.in_ring + self.backlog.len()
    }

    /// CHANERR_INT, on a function that has it (for the log beside CHANERR
    /// when the channel halts).
    pub fn chanerr_int(&self) -> Option<u32> {
        self.chanerr_int
            .then(|| self.hw.pci.read32(spec::CHANERR_INT))
    }

    /// CHANERR by name, and CHANERR_INT beside it on a function that has
    /// it: what a halt's log line says.
    fn halt_errors(&self) -> String {
        let err = self.chanerr();
        let mut s = format!("CHANERR {err:#x} ({})", spec::chanerr::describe(err));
        if let Some(int) = self.chanerr_int() {
            s.push_str(&format!(", CHANERR_INT {int:#x}"));
        }
        s
    }

    /// IOVA of ring slot `i`.
    #[inline]
    fn slot_iova(&self, i: u32) -> u64 {
        self.ring.iova() + ((i & self.mask) as u64) * spec::DESC_SIZE as u64
    }

    #[inline]
    fn slot_off(&self, i: u32) -> usize {
        ((i & self.mask) as usize) * spec::DESC_SIZE
    }

    fn chansts(&self) -> u64 {
        self.hw.regs.read64(self.base + chan::CHANSTS)
    }

    fn chanerr(&self) -> u32 {
        self.hw.regs.read32(self.base + chan::CHANERR)
    }

    fn timeout(&self, what: &'static str) -> StartError {
        let chanerr = self.chanerr();
        StartError::Timeout {
            what,
            timeout: self.cfg.start_timeout,
            chansts: self.chansts(),
            chanerr,
            errors: spec::chanerr::describe(chanerr),
        }
    }

    /// Waits until `done` holds, or the start timeout.
    fn wait(
        &self,
        what: &'static str,
        mut done: impl FnMut(&Self) -> bool,
    ) -> Result<(), StartError> {
        let start = Instant::now();
        let mut spins = 0u32;
        while !done(self) {
            if start.elapsed() > self.cfg.start_timeout {
                return Err(self.timeout(what));
            }
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(10));
            }
        }
        Ok(())
    }

    /// Suspends an active or idle channel, clears CHANERR (and CHANERR_INT
    /// where the function has it) and resets it (SPDK's `ioat_reset_hw`,
    /// Linux `ioat_reset_hw`). A channel that does not suspend in time is
    /// reset anyway, with a warning: Linux ignores `ioat_quiesce`'s timeout
    /// and SPDK's `ioat_channel_start` ignores `ioat_reset_hw`'s result.
    /// Ok only once the reset has completed: the device is stopped.
    fn reset_hw(&self) -> Result<(), StartError> {
        let busy = |v: u64| matches!(chansts::state(v), chansts::ACTIVE | chansts::IDLE);
        if busy(self.chansts()) {
            self.command(chancmd::SUSPEND);
            if let Err(e) = self.wait("the channel to suspend", |c| !busy(c.chansts())) {
                tracing::warn!("ioat {}: {e}; resetting it anyway", self.hw.name);
            }
        }
        // Write-1-to-clear: writing the bits back clears them.
        let err = self.chanerr();
        // SAFETY: clearing CHANERR starts no DMA.
        unsafe { self.hw.regs.write32(self.base + chan::CHANERR, err) };
        if self.chanerr_int {
            // Linux: a value of all ones means the function is gone.
            let int = self.hw.pci.read32(spec::CHANERR_INT);
            if int == u32::MAX {
                return Err(StartError::ChanErrInt(int));
            }
            self.hw.pci.write32(spec::CHANERR_INT, int);
            // Read back: a latched error that does not clear keeps the
            // channel halted through the reset.
            let after = self.hw.pci.read32(spec::CHANERR_INT);
            if after & int != 0 {
                return Err(StartError::ChanErrIntStuck {
                    device: self.hw.name.clone(),
                    before: int,
                    after,
                });
            }
        }
        self.command(chancmd::RESET);
        self.wait("the channel reset", |c| {
            c.hw.regs.read8(c.base + chan::CHANCMD) & chancmd::RESET == 0
        })
    }

    /// One CHANCMD write: SUSPEND or RESET, which start no DMA (the
    /// driver never writes RESUME or other commands).
    fn command(&self, cmd: u8) {
        debug_assert!(matches!(cmd, chancmd::SUSPEND | chancmd::RESET));
        // SAFETY: SUSPEND and RESET stop the channel, they start nothing;
        // what the device may still reach is this channel's ring, which
        // lives until the device is proven stopped, and requests reported
        // only once it is.
        unsafe { self.hw.regs.write8(self.base + chan::CHANCMD, cmd) };
    }

    /// A 64-bit register written as two 32-bit halves, low then high, as
    /// Linux writes CHAINADDR and CHANCMP (`ioat_set_chainaddr`,
    /// `ioat_alloc_chan_resources`): a device need not decode 64-bit
    /// accesses there.
    ///
    /// # Safety
    ///
    /// As for [`Registers::write32`]: `v` must name memory of this channel's
    /// (the ring, the completion word) when `off` is CHAINADDR or CHANCMP,
    /// which take effect at the next doorbell.
    unsafe fn write_halves(&self, off: usize, v: u64) {
        // SAFETY: the caller's contract.
        unsafe {
            self.hw.regs.write32(self.base + off, v as u32);
            self.hw.regs.write32(self.base + off + 4, (v >> 32) as u32);
        }
    }

    /// Stops the function's DMA through its configuration space, after a
    /// channel reset that did not complete: a function-level reset, else
    /// bus mastering off, read back. True once the device can no longer
    /// reach memory.
    fn stop_dma(&mut self) -> bool {
        let pci = &self.hw.pci;
        let stopped = pci.function_reset() || {
            pci.set_bus_master(false);
            pci.read16(PCI_COMMAND) & PCI_COMMAND_BUS_MASTER == 0
        };
        self.dma_off |= stopped;
        stopped
    }

    /// Starts the channel: resets the hardware, then brings it up on a
    /// fresh ring.
    fn init(&mut self) -> Result<(), StartError> {
        self.reset_hw()?;
        self.bring_up()
    }

    /// Brings a channel that was just reset up on a fresh ring: links the
    /// descriptors, programs CHANCTRL, CHANCMP and CHAINADDR, and runs one
    /// null descriptor. The ring is rewritten only now that the device is
    /// stopped.
    fn bring_up(&mut self) -> Result<(), StartError> {
        for i in 0..self.size {
            let off = self.slot_off(i);
            self.ring.write_u32(off + desc::SIZE, 0);
            self.ring.write_u32(off + desc::CONTROL, 0);
            self.ring.write_u64(off + desc::SRC, 0);
            self.ring.write_u64(off + desc::DST, 0);
            self.ring.write_u64(off + desc::NEXT, self.slot_iova(i + 1));
            for k in 0..4 {
                self.ring.write_u64(off + desc::OP_SPECIFIC + 8 * k, 0);
            }
            self.slots[i as usize] = None;
        }
        let cmp = completion_offset(self.size);
        self.ring.store_u64(cmp, 0);
        self.head = 0;
        self.tail = 0;
        self.flushed = 0;
        self.last_seen = 0;
        self.in_ring = 0;
        self.unmarked_bytes = 0;
        self.unmarked_descs = 0;
        self.windows = WindowCache::default();
        bump(&self.counters.starts, 1);

        // SAFETY: CHANCMP names the completion word and CHAINADDR the first
        // descriptor of this channel's ring (`self.ring`, a DMA region the
        // channel owns and frees only once the device is proven stopped);
        // every descriptor of the ring was just zeroed and linked to the
        // next one, and none runs before the DMACOUNT write below.
        unsafe {
            self.hw
                .regs
                .write16(self.base + chan::CHANCTRL, chanctrl::RUN);
            self.write_halves(chan::CHANCMP, self.ring.iova() + cmp as u64);
            self.write_halves(chan::CHAINADDR, self.ring.iova());
        }

        // One null descriptor (size 8), with completion update.
        let off = self.slot_off(0);
        self.ring.write_u32(off + desc::SIZE, spec::NULL_SIZE);
        self.ring.write_u32(
            off + desc::CONTROL,
            control::with_op(op::COPY, control::NULL | control::COMPLETION_UPDATE),
        );
        self.head = 1;
        bump(&self.counters.descriptors, 1);
        self.doorbell();
        // Done once the channel is IDLE and the completion word written
        // (it was zeroed; IDLE's state bit makes it non-zero), whatever
        // address they report: SPDK `ioat_channel_start` waits for IDLE
        // only and takes the tail from the completion word; a function need
        // not report the null descriptor's address.
        self.wait("the null descriptor", |c| {
            chansts::state(c.chansts()) == chansts::IDLE && c.ring.load_u64(cmp) != 0
        })?;
        self.tail = 1;
        self.last_seen = chansts::addr(self.chansts());
        self.last_word = self.ring.load_u64(cmp);
        self.status_seen = self.last_seen;
        self.progress = tsc::now();
        Ok(())
    }

    /// DMACOUNT = head: hands every descriptor built so far to the device.
    #[inline]
    fn doorbell(&mut self) {
        // The descriptors (plain volatile stores) must reach memory before
        // the device learns of them.
        fence(Ordering::Release);
        // SAFETY: the descriptors up to `head` lie in this channel's ring
        // and name the null descriptor or the buffers of requests the
        // driver holds (IOVAs of windows the mapper keeps mapped while the
        // regions live); their owners get them back only once the driver
        // reports the request done, which it does only when the device can
        // no longer write them.
        unsafe {
            self.hw
                .regs
                .write16(self.base + chan::DMACOUNT, self.head as u16)
        };
        self.flushed = self.head;
        bump(&self.counters.doorbells, 1);
    }

    /// Flush: "completion update" on the last descriptor built (not yet
    /// handed over), then one DMACOUNT write for everything built since
    /// the last flush. Nothing to do when nothing was built since then.
    fn flush(&mut self) {
        if self.head == self.flushed {
            return;
        }
        let off = self.slot_off(self.head.wrapping_sub(1)) + desc::CONTROL;
        let ctl = self.ring.read_u32(off);
        self.ring.write_u32(off, ctl | control::COMPLETION_UPDATE);
        self.unmarked_bytes = 0;
        self.unmarked_descs = 0;
        if self.in_ring > 0 && self.progress_idle() {
            self.progress = tsc::now();
        }
        self.doorbell();
    }

    /// Whether the ring had nothing in flight before this flush (so the
    /// progress clock starts now).
    fn progress_idle(&self) -> bool {
        self.tail == self.flushed
    }

    /// The IOVA of `addr` and how many of the next `len` bytes are
    /// contiguous there.
    #[inline]
    fn translate(&mut self, addr: usize, len: usize) -> Option<(u64, usize)> {
        self.windows.translate(&*self.hw.mem, addr, len)
    }

    #[inline]
    fn free_slots(&self) -> u32 {
        self.size - self.head.wrapping_sub(self.tail) - 1
    }

    /// Writes a null descriptor (no transfer, size 8 as SPDK's
    /// `ioat_prep_null`: a size of 0 is a length error) with "completion
    /// update" at the head.
    fn put_null(&mut self) {
        let off = self.slot_off(self.head);
        self.ring.write_u32(off + desc::SIZE, spec::NULL_SIZE);
        self.ring.write_u32(
            off + desc::CONTROL,
            control::with_op(op::COPY, control::NULL | control::COMPLETION_UPDATE),
        );
        self.ring.write_u64(off + desc::SRC, 0);
        self.ring.write_u64(off + desc::DST, 0);
        self.slots[(self.head & self.mask) as usize] = None;
        self.head = self.head.wrapping_add(1);
        self.unmarked_bytes = 0;
        self.unmarked_descs = 0;
    }

    /// Writes the descriptors of `r`, or none of them ("completion update"
    /// goes on the batch's last descriptor at the flush). A zero-length
    /// request is one null descriptor (SPDK's `ioat_submit_copy`: "null
    /// descriptor for null transfer"), which carries completion update.
    fn build(&mut self, r: Request) -> Result<(), BuildError> {
        let start = self.head;
        let saved = (self.unmarked_bytes, self.unmarked_descs);
        let empty = self.head == self.tail;
        if r.len == 0 {
            if self.free_slots() == 0 {
                return Err(BuildError::RingFull);
            }
            self.put_null();
        }
        let mut done = 0usize;
        while done < r.len {
            if self.free_slots() == 0 {
                self.undo(start, saved);
                return Err(if empty {
                    BuildError::TooBig
                } else {
                    BuildError::RingFull
                });
            }
            let left = r.len - done;
            let Some((dst, dlen)) = self.translate(r.dst + done, left) else {
                self.undo(start, saved);
                return Err(BuildError::NoIova);
            };
            let mut n = dlen.min(self.xfer as usize);
            let (src, opcode) = if r.fill {
                (spec::fill_pattern(r.pattern), op::FILL)
            } else {
                let Some((src, slen)) = self.translate(r.src + done, left) else {
                    self.undo(start, saved);
                    return Err(BuildError::NoIova);
                };
                n = n.min(slen);
                (src, op::COPY)
            };
            self.bound_work(n as u64);
            let ctl = control::with_op(opcode, 0);
            let off = self.slot_off(self.head);
            self.ring.write_u32(off + desc::SIZE, n as u32);
            self.ring.write_u32(off + desc::CONTROL, ctl);
            self.ring.write_u64(off + desc::SRC, src);
            self.ring.write_u64(off + desc::DST, dst);
            self.slots[(self.head & self.mask) as usize] = None;
            self.head = self.head.wrapping_add(1);
            done += n;
        }
        self.slots[(self.head.wrapping_sub(1) & self.mask) as usize] = Some(r);
        bump(
            &self.counters.descriptors,
            self.head.wrapping_sub(start) as u64,
        );
        self.in_ring += 1;
        Ok(())
    }

    /// Before a descriptor of `n` bytes is built at the head: when it
    /// would take the work since the last completion write past the bound
    /// ([`WorkBound`]), the descriptor before it, if not yet handed over,
    /// gets "completion update", so that no stretch between two
    /// completion writes holds more than the bound (each descriptor holds
    /// at most the bound's bytes). Retiring through a descriptor that ends
    /// no request is fine: the request is reported at its last one.
    fn bound_work(&mut self, n: u64) {
        let over = self.unmarked_bytes + n > self.bound.bytes
            || self.unmarked_descs >= self.bound.descriptors;
        if over && self.head != self.flushed {
            let off = self.slot_off(self.head.wrapping_sub(1)) + desc::CONTROL;
            let ctl = self.ring.read_u32(off);
            self.ring.write_u32(off, ctl | control::COMPLETION_UPDATE);
            self.unmarked_bytes = 0;
            self.unmarked_descs = 0;
        }
        self.unmarked_bytes += n;
        self.unmarked_descs += 1;
    }

    /// Takes back the descriptors built from `start` on (none was handed
    /// over), and the work count from before them.
    fn undo(&mut self, start: u32, saved: (u64, u32)) {
        self.head = start;
        (self.unmarked_bytes, self.unmarked_descs) = saved;
    }

    /// Builds `r`, or queues it, or completes it as refused.
    fn place(&mut self, r: Request, done: &mut Vec<(TaskId, Completion)>) {
        if !self.backlog.is_empty() {
            self.backlog.push_back(r);
            return;
        }
        match self.build(r) {
            Ok(()) => {}
            Err(BuildError::RingFull) => {
                bump(&self.counters.ring_full, 1);
                self.backlog.push_back(r);
            }
            Err(BuildError::TooBig | BuildError::NoIova) => {
                bump(&self.counters.invalid, 1);
                done.push((r.id, Completion::with(Status::InvalidArgument)));
            }
        }
    }

    /// Builds backlog requests while they fit.
    fn drain_backlog(&mut self, done: &mut Vec<(TaskId, Completion)>) {
        while let Some(&r) = self.backlog.front() {
            match self.build(r) {
                Ok(()) => {
                    self.backlog.pop_front();
                }
                Err(BuildError::RingFull) => break,
                Err(BuildError::TooBig | BuildError::NoIova) => {
                    self.backlog.pop_front();
                    bump(&self.counters.invalid, 1);
                    done.push((r.id, Completion::with(Status::InvalidArgument)));
                }
            }
        }
    }

    /// Takes the copy and fill `tasks`, task `k` named `first + k`:
    /// builds each, then flushes once.
    pub fn submit(&mut self, tasks: &[Task], first: TaskId, done: &mut Vec<(TaskId, Completion)>) {
        for (k, t) in tasks.iter().enumerate() {
            let id = first + k as TaskId;
            let fill = match t.op {
                Opcode::Copy => false,
                Opcode::Fill if self.fill => true,
                _ => {
                    done.push((id, Completion::with(Status::InvalidArgument)));
                    continue;
                }
            };
            if self.broken.is_some() {
                bump(&self.counters.failed, 1);
                done.push((id, Completion::with(Status::EngineError)));
                continue;
            }
            let r = Request {
                id,
                fill,
                dst: t.dst as usize,
                src: t.src as usize,
                len: t.len,
                pattern: t.fill,
            };
            self.place(r, done);
        }
        self.flush();
    }

    /// Retires every slot from the tail through the descriptor at `addr`;
    /// false when `addr` names no descriptor in flight or, unless `any`,
    /// one without "completion update" (a completion word only names
    /// those; a halted one names the last descriptor done, whichever).
    fn retire_through(
        &mut self,
        addr: u64,
        done: &mut Vec<(TaskId, Completion)>,
        any: bool,
    ) -> bool {
        let ring = self.ring.iova();
        if addr < ring || addr >= ring + self.size as u64 * spec::DESC_SIZE as u64 {
            return false;
        }
        let idx = ((addr - ring) / spec::DESC_SIZE as u64) as u32;
        let delta = idx.wrapping_sub(self.tail) & self.mask;
        let in_flight = self.flushed.wrapping_sub(self.tail);
        if delta >= in_flight {
            return false;
        }
        if !any
            && self.ring.read_u32(self.slot_off(idx) + desc::CONTROL) & control::COMPLETION_UPDATE
                == 0
        {
            return false;
        }
        for _ in 0..=delta {
            let i = (self.tail & self.mask) as usize;
            if let Some(r) = self.slots[i].take() {
                self.in_ring -= 1;
                bump(&self.counters.completed, 1);
                done.push((r.id, Completion::SUCCESS));
            }
            self.tail = self.tail.wrapping_add(1);
        }
        self.last_seen = addr;
        true
    }

    /// Reads the completion word and acts on a new value: retires through
    /// the request end it names, or handles the halt it reports. Returns
    /// whether anything moved. A value that names nothing in flight is
    /// counted and ignored (CHANSTS is never used instead: see the module
    /// doc).
    fn take_word(&mut self, done: &mut Vec<(TaskId, Completion)>) -> bool {
        let word = self.ring.load_u64(completion_offset(self.size));
        if word == self.last_word {
            return false;
        }
        self.last_word = word;
        let addr = chansts::addr(word);
        if chansts::state(word) == chansts::HALTED {
            self.halted(addr, done);
            return true;
        }
        if addr == self.last_seen {
            return false;
        }
        if self.retire_through(addr, done, false) {
            return true;
        }
        bump(&self.counters.bad_completions, 1);
        tracing::debug!(
            "ioat {}: completion word {word:#x} names no batch end in flight; ignored",
            self.hw.name
        );
        false
    }

    /// Reports finished requests; returns how many it added to `done`.
    pub fn poll(&mut self, done: &mut Vec<(TaskId, Completion)>) -> usize {
        if self.broken.is_some() {
            // What it still holds is never reported (see `restart`).
            return 0;
        }
        let before = done.len();
        if self.in_ring > 0 {
            let moved = self.take_word(done);
            let now = tsc::now();
            if moved {
                self.progress = now;
            } else if self.in_ring > 0
                && now.wrapping_sub(self.progress) > self.stall_ticks
                && now.wrapping_sub(self.checked) > self.stall_ticks
            {
                self.checked = now;
                if !self.check(done)
                    && self.in_ring > 0
                    && now.wrapping_sub(self.progress) > self.timeout_ticks
                {
                    self.timed_out(done);
                }
            }
        }
        if !self.backlog.is_empty() {
            self.drain_backlog(done);
            self.flush();
        }
        done.len() - before
    }

    /// The completion word has stood still for the stall check: reads
    /// CHANSTS, only for its state and as a sign of life, never to retire
    /// anything (what CHANSTS names may not have landed in memory yet). A
    /// halt is then learnt from the completion word, which CHANCTRL's
    /// ERR_COMPLETION_EN has the device write with the HALTED state (wait
    /// for it; the timeout covers a device that cannot write it). A
    /// channel idle at the last descriptor handed over whose word does not
    /// name it lost (or has not yet made visible) a completion write:
    /// [`Channel::nudge`]. A CHANSTS address that changed since the last
    /// check is progress for the timeout (a long batch on a slow device
    /// writes its completion word only at its end) but retires nothing.
    /// Returns whether anything moved.
    fn check(&mut self, done: &mut Vec<(TaskId, Completion)>) -> bool {
        let st = self.chansts();
        // A word written since the last look counts first (the device
        // writes it before CHANSTS shows the descriptor done).
        if self.take_word(done) {
            self.progress = tsc::now();
            return true;
        }
        // Halted, and the completion word (read after CHANSTS) does not
        // say so: its halt write was lost, or the device makes none. Act
        // now rather than wait out the timeout.
        if chansts::state(st) == chansts::HALTED {
            self.halted_unreported(st, done);
            return true;
        }
        // Idle at the last descriptor handed over: done with everything,
        // yet the word is short of it (a stale IDLE from before the
        // doorbell names an earlier descriptor).
        if chansts::state(st) == chansts::IDLE
            && chansts::addr(st) == self.slot_iova(self.flushed.wrapping_sub(1))
        {
            self.nudge();
        }
        let addr = chansts::addr(st);
        if addr != self.status_seen {
            self.status_seen = addr;
            self.progress = tsc::now();
            return true;
        }
        false
    }

    /// Appends one null descriptor with "completion update" and rings the
    /// doorbell: its completion write comes after every earlier
    /// descriptor's, so it names the end of everything in flight. At most
    /// one at a time (none while the last descriptor handed over is
    /// already one), none when the ring is full.
    fn nudge(&mut self) {
        let last = self.flushed.wrapping_sub(1);
        let pending = self.slots[(last & self.mask) as usize].is_none()
            && self.ring.read_u32(self.slot_off(last) + desc::CONTROL) & control::NULL != 0;
        if pending || self.free_slots() == 0 || self.head != self.flushed {
            return;
        }
        self.put_null();
        bump(&self.counters.descriptors, 1);
        self.doorbell();
    }

    /// Fails every request in the ring.
    fn fail_ring(&mut self, done: &mut Vec<(TaskId, Completion)>) {
        for i in 0..self.size as usize {
            if let Some(r) = self.slots[i].take() {
                bump(&self.counters.failed, 1);
                done.push((r.id, Completion::with(Status::EngineError)));
            }
        }
        self.in_ring = 0;
    }

    /// The channel halted and its completion word says so, naming `addr`,
    /// the last descriptor done (Linux's `ioat_eh`: `__cleanup` up to the
    /// completion word, then the descriptor at the tail is the one that
    /// failed). What completed succeeds, the request owning the next
    /// descriptor fails, the rest is built again after a restart.
    fn halted(&mut self, addr: u64, done: &mut Vec<(TaskId, Completion)>) {
        bump(&self.counters.halts, 1);
        let errors = self.halt_errors();
        let nothing_new =
            addr == self.last_seen || addr == self.slot_iova(self.tail.wrapping_sub(1));
        if !nothing_new && !self.retire_through(addr, done, true) {
            tracing::error!(
                "ioat {}: halted with {errors} and a completed-descriptor address ({addr:#x}) \
                 outside the ring; failing every request in flight",
                self.hw.name
            );
            self.restart(done);
            return;
        }
        // The descriptor at the tail failed: the request it belongs to is
        // the first one ending at or after it.
        let mut again = Vec::new();
        let mut failed = None;
        let mut i = self.tail;
        while i != self.flushed {
            if let Some(r) = self.slots[(i & self.mask) as usize].take() {
                if failed.is_none() {
                    failed = Some(r);
                } else {
                    again.push(r);
                }
            }
            i = i.wrapping_add(1);
        }
        // Built but not flushed (none: a submission always flushes) would
        // be kept too.
        while i != self.head {
            if let Some(r) = self.slots[(i & self.mask) as usize].take() {
                again.push(r);
            }
            i = i.wrapping_add(1);
        }
        self.in_ring = 0;
        tracing::warn!(
            "ioat {}: channel halted, {errors}; failing 1 request, building {} again after a \
             reset",
            self.hw.name,
            again.len()
        );
        if let Some(r) = failed {
            bump(&self.counters.failed, 1);
            done.push((r.id, Completion::with(Status::EngineError)));
        }
        bump(&self.counters.resubmitted, again.len() as u64);
        for r in again.into_iter().rev() {
            self.backlog.push_front(r);
        }
        self.restart(done);
    }

    /// CHANSTS says HALTED but the completion word does not (no halt
    /// write landed): which descriptors completed is unknown (CHANSTS's
    /// address is not proof that their data landed), so, as on a timeout,
    /// the channel is reset (proving the device stopped) and every request
    /// in the ring fails with `EngineError`; the backlog is built on the
    /// new ring. Found at the first stall check after the halt
    /// ([`DriverConfig::stall_check`]), not after the timeout.
    fn halted_unreported(&mut self, st: u64, done: &mut Vec<(TaskId, Completion)>) {
        bump(&self.counters.halts, 1);
        tracing::warn!(
            "ioat {}: channel halted (CHANSTS {st:#x}), {}, with no halt written to the \
             completion word; failing the {} requests in flight and resetting the channel",
            self.hw.name,
            self.halt_errors(),
            self.in_ring
        );
        self.restart(done);
    }

    /// No progress for the timeout: the requests in flight fail.
    fn timed_out(&mut self, done: &mut Vec<(TaskId, Completion)>) {
        bump(&self.counters.timeouts, 1);
        tracing::error!(
            "ioat {}: no progress for {:?} with {} requests in flight (CHANSTS {:#x}); failing \
             them and resetting the channel",
            self.hw.name,
            self.cfg.timeout,
            self.in_ring,
            self.chansts()
        );
        self.restart(done);
    }

    /// Brings the channel up again. The device is reset (and proven
    /// stopped) before anything else; then the requests still in the ring
    /// fail, and the ring is rewritten with the backlog kept. A reset that
    /// does not complete stops the function's DMA through its
    /// configuration space; the channel is then broken, and fails its
    /// requests only if that worked: otherwise it keeps them, never
    /// reported, since the device may still write their buffers. A
    /// channel that will not come up is broken and fails its backlog, and
    /// every later request.
    fn restart(&mut self, done: &mut Vec<(TaskId, Completion)>) {
        let result = match self.reset_hw() {
            Ok(()) => {
                self.fail_ring(done);
                self.bring_up()
            }
            Err(e) if self.stop_dma() => {
                self.fail_ring(done);
                Err(e)
            }
            Err(e) => {
                let why = format!(
                    "ioat {}: the channel reset did not complete ({e}) and neither a function \
                     reset nor turning bus mastering off took: the device may still write the \
                     buffers of its {} requests in flight, which are never reported done; \
                     its requests fail from now on",
                    self.hw.name, self.in_ring
                );
                tracing::error!("{why}");
                self.broken = Some(why);
                self.fail_backlog(done);
                return;
            }
        };
        if let Err(e) = result {
            let why = format!(
                "ioat {}: the channel cannot be restarted ({e}); its requests fail from now on",
                self.hw.name
            );
            tracing::error!("{why}");
            self.broken = Some(why);
            self.fail_backlog(done);
        }
    }

    /// Fails every request waiting for ring space (the device never saw
    /// them).
    fn fail_backlog(&mut self, done: &mut Vec<(TaskId, Completion)>) {
        while let Some(r) = self.backlog.pop_front() {
            bump(&self.counters.failed, 1);
            done.push((r.id, Completion::with(Status::EngineError)));
        }
    }
}

/// Clears Relaxed Ordering in the function's PCI Express Device Control
/// register, as Linux `ioat3_dma_probe` does (the completion write must not
/// pass the data writes before it: the driver reports a request done on
/// the strength of that write). A function without the capability has
/// nothing to clear; one whose bit does not clear (read back after the
/// write) is refused.
fn clear_relaxed_ordering(hw: &Hardware) -> Result<(), StartError> {
    let pci = hw.pci.as_ref();
    let Some(cap) = find_capability(pci, spec::PCI_CAP_ID_EXP) else {
        return Ok(());
    };
    let at = cap + spec::PCI_EXP_DEVCTL;
    let ctl = pci.read16(at);
    if ctl & spec::PCI_EXP_DEVCTL_RELAX_EN == 0 {
        return Ok(());
    }
    pci.write16(at, ctl & !spec::PCI_EXP_DEVCTL_RELAX_EN);
    let devctl = pci.read16(at);
    if devctl & spec::PCI_EXP_DEVCTL_RELAX_EN != 0 {
        return Err(StartError::RelaxedOrdering {
            device: hw.name.clone(),
            devctl,
        });
    }
    Ok(())
}

impl Drop for Channel {
    /// Stops the device from touching the ring (suspend and reset, else
    /// its DMA stopped through configuration space) before the ring's
    /// memory goes; a ring the device may still reach is leaked. The
    /// hardware (`hw`) is released after.
    fn drop(&mut self) {
        let stopped = self.dma_off
            || match self.reset_hw() {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!("ioat {}: reset at shutdown: {e}", self.hw.name);
                    self.stop_dma()
                }
            };
        if stopped {
            // SAFETY: the ring is dropped once, here, and never used again
            // (this is the channel's drop); the device is stopped (reset, or
            // its DMA turned off), so it no longer reads or writes it.
            unsafe { ManuallyDrop::drop(&mut self.ring) };
        } else {
            tracing::error!(
                "ioat {}: the device could not be stopped; its ring ({} bytes) is leaked, not \
                 freed",
                self.hw.name,
                self.ring.len()
            );
        }
    }
}
