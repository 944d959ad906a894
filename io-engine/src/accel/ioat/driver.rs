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
//! its buffers stop being contiguous in IOVA space; only the last
//! descriptor of a request remembers its task. A submission builds every
//! request of a batch, then flushes once: "completion update" on the last
//! built descriptor, then one DMACOUNT write. A request that does not fit
//! the free slots waits (in order) in a backlog and is built when
//! completions free slots; nothing is failed for lack of room.
//!
//! Completion: the completion word (CHANSTS format) names the last
//! descriptor done; every slot from the tail up to and including it is
//! retired, and the tasks whose last descriptor was among them succeed.
//! The word only moves at flush boundaries (only flushed descriptors carry
//! "completion update"), so when it has not moved for
//! [`DriverConfig::stall_check`] while requests are in flight the driver
//! reads CHANSTS itself, which the device updates after every descriptor
//! and which is the only place a halt shows (the completion word is not
//! written on an error: CHANCTRL has only ANY_ERR_ABORT_EN, as in SPDK).
//!
//! Failures:
//!
//! - HALTED: CHANERR says why. Descriptors up to CHANSTS's address
//!   completed; the request owning the next descriptor (the one that
//!   failed) fails with [`Status::EngineError`]; the requests after it,
//!   which the device never started, are built again, in order, after the
//!   channel is reset and brought up again, and complete normally.
//! - No progress for [`DriverConfig::timeout`]: every request in flight
//!   fails with `EngineError` (the device may have done part of any of
//!   them), the channel is reset and brought up again, and the backlog is
//!   built on the new ring.
//! - A completion word that names no descriptor in flight (corrupt or out
//!   of order): CHANSTS is read instead; if it too is unusable, the
//!   requests in flight fail and the channel is reset.
//! - A buffer with no IOVA (memory the device cannot reach): that request
//!   completes at once with [`Status::InvalidArgument`], as does one that
//!   needs more descriptors than the ring holds.
//! - A channel that cannot be brought up again is broken: its requests, and
//!   every later one, fail with `EngineError`, and it says so in the log.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use super::dma_buffer::DmaBuffer;
use super::dma_memory::DmaMemory;
use super::registers::Registers;
use super::spec::{self, chan, chancmd, chanctrl, chansts, control, desc, op};
use super::window::Window;
use crate::accel::{Completion, Opcode, Status, Task, TaskId};
use crate::env::tsc;

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
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            ring_size: DEFAULT_RING_SIZE,
            timeout: Duration::from_secs(1),
            stall_check: Duration::from_micros(100),
            start_timeout: Duration::from_secs(1),
        }
    }
}

/// Descriptors per ring unless told otherwise.
pub const DEFAULT_RING_SIZE: u32 = 4096;

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

#[inline]
fn bump(c: &AtomicU64, n: u64) {
    // One writer: the channel's thread.
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// A device a channel runs on.
pub struct Hardware {
    /// A name for messages (a PCI address, `model-N`).
    pub name: String,
    /// Its BAR0 registers.
    pub regs: Box<dyn Registers>,
    /// Memory it can reach.
    pub mem: Arc<dyn DmaMemory>,
    /// Whatever must live as long as the channel (a VFIO device, a model,
    /// the registration of the mapper that makes memory visible to it).
    pub keep: Option<Box<dyn std::any::Any + Send>>,
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
    /// First, so it is released (a model stopped, a VFIO device closed)
    /// before the ring's memory.
    hw: Hardware,
    cfg: DriverConfig,
    base: usize,
    ring: DmaBuffer,
    size: u32,
    mask: u32,
    head: u32,
    tail: u32,
    /// Head at the last flush.
    flushed: u32,
    /// Completed-descriptor address last seen (in the completion word or
    /// in CHANSTS).
    last_seen: u64,
    /// The completion word's value last acted on. Only a new value is
    /// looked at: once CHANSTS has shown more progress than the word, the
    /// word's old address lies behind the tail, and with a nearly full
    /// ring an address behind the tail cannot be told from one ahead.
    last_word: u64,
    /// The request ending at each slot.
    slots: Vec<Option<Request>>,
    /// Requests in the ring.
    in_ring: usize,
    /// Requests waiting for ring space, in order.
    backlog: VecDeque<Request>,
    max_xfer: u64,
    fill: bool,
    cbver: u8,
    windows: [Window; 4],
    window_next: usize,
    window_gen: u64,
    /// tsc of the last progress (or of the first request since).
    progress: u64,
    /// tsc of the last CHANSTS read.
    checked: u64,
    timeout_ticks: u64,
    stall_ticks: u64,
    broken: Option<String>,
    counters: Arc<DriverCounters>,
}

// SAFETY: a channel owns its ring (DMA memory reached only through volatile
// and atomic accessors) and its register handle (`Registers: Send`); it is
// handed between threads whole and used by one thread at a time.
unsafe impl Send for Channel {}

const EMPTY: Window = Window {
    va: 0,
    len: 0,
    iova: 0,
};

impl Channel {
    /// Starts a channel on `hw`: checks CBVER, reads XFERCAP and
    /// DMACAPABILITY, allocates the ring and the completion word, resets
    /// the channel and runs one null descriptor through it (SPDK's
    /// `ioat_channel_start`). Bus mastering is the backend's to enable
    /// before.
    pub fn start(hw: Hardware, cfg: DriverConfig) -> Result<Channel, StartError> {
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
        let fill = hw.regs.read32(spec::DMACAPABILITY) & spec::dmacap::BFILL != 0;
        let xfercap = hw.regs.read8(spec::XFERCAP) & spec::XFERCAP_MASK;
        let Some(max_xfer) = spec::max_transfer(xfercap) else {
            return Err(StartError::XferCap(xfercap));
        };
        let ring = match hw.mem.alloc(completion_offset(size) + spec::DESC_SIZE) {
            Ok(r) => r,
            Err(e) => return Err(StartError::Memory(e)),
        };
        let mut ch = Channel {
            base: spec::channel_base(0),
            ring,
            size,
            mask: size - 1,
            head: 0,
            tail: 0,
            flushed: 0,
            last_seen: 0,
            last_word: 0,
            slots: vec![None; size as usize],
            in_ring: 0,
            backlog: VecDeque::with_capacity(size as usize),
            max_xfer,
            fill,
            cbver,
            windows: [EMPTY; 4],
            window_next: 0,
            window_gen: u64::MAX,
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

    /// The longest request this channel takes.
    pub fn max_request(&self) -> usize {
        max_request(self.size, self.max_xfer)
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

    /// Suspends an active or idle channel, clears CHANERR and resets it
    /// (SPDK's `ioat_reset_hw`).
    fn reset_hw(&self) -> Result<(), StartError> {
        let busy = |v: u64| matches!(chansts::state(v), chansts::ACTIVE | chansts::IDLE);
        if busy(self.chansts()) {
            // SAFETY: SUSPEND starts no new DMA; what the device may still
            // reach is this channel's ring, which lives until the channel is
            // dropped (after a reset), and requests whose buffers are
            // reported done only once the device is stopped.
            unsafe {
                self.hw
                    .regs
                    .write8(self.base + chan::CHANCMD, chancmd::SUSPEND)
            };
            self.wait("the channel to suspend", |c| !busy(c.chansts()))?;
        }
        // Write-1-to-clear: writing the bits back clears them.
        let err = self.chanerr();
        // SAFETY: clearing CHANERR and RESET start no DMA: the channel is
        // suspended or halted, and RESET leaves it idle with no chain.
        unsafe {
            self.hw.regs.write32(self.base + chan::CHANERR, err);
            self.hw
                .regs
                .write8(self.base + chan::CHANCMD, chancmd::RESET);
        }
        self.wait("the channel reset", |c| {
            c.hw.regs.read8(c.base + chan::CHANCMD) & chancmd::RESET == 0
        })
    }

    /// (Re)starts the channel on a fresh ring: links the descriptors,
    /// resets the hardware, programs CHANCTRL, CHANCMP and CHAINADDR, and
    /// runs one null descriptor. Requests in the ring are forgotten (the
    /// caller has failed or saved them).
    fn init(&mut self) -> Result<(), StartError> {
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
        self.window_gen = u64::MAX;
        bump(&self.counters.starts, 1);

        self.reset_hw()?;
        let regs = &self.hw.regs;
        // SAFETY: CHANCMP names the completion word and CHAINADDR the first
        // descriptor of this channel's ring (`self.ring`, a DMA region the
        // channel owns and frees only after resetting the device on drop);
        // every descriptor of the ring was just zeroed and linked to the
        // next one, and none runs before the DMACOUNT write.
        unsafe {
            regs.write16(self.base + chan::CHANCTRL, chanctrl::ANY_ERR_ABORT_EN);
            regs.write64(self.base + chan::CHANCMP, self.ring.iova() + cmp as u64);
            regs.write64(self.base + chan::CHAINADDR, self.ring.iova());
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
        let null = self.slot_iova(0);
        self.wait("the null descriptor", |c| {
            let st = c.chansts();
            chansts::state(st) == chansts::IDLE && chansts::addr(st) == null
        })?;
        self.wait("the null descriptor's completion", |c| {
            chansts::addr(c.ring.load_u64(cmp)) == null
        })?;
        self.tail = 1;
        self.last_seen = null;
        self.last_word = self.ring.load_u64(cmp);
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

    /// Flush: "completion update" on the last built descriptor, then one
    /// DMACOUNT write. Nothing to do when nothing was built since the last.
    fn flush(&mut self) {
        if self.head == self.flushed {
            return;
        }
        let off = self.slot_off(self.head.wrapping_sub(1)) + desc::CONTROL;
        let ctl = self.ring.read_u32(off);
        self.ring.write_u32(off, ctl | control::COMPLETION_UPDATE);
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
        let g = self.hw.mem.generation();
        if g != self.window_gen {
            self.windows = [EMPTY; 4];
            self.window_gen = g;
        }
        let w = match self.windows.iter().find(|w| w.contains(addr)) {
            Some(w) => *w,
            None => {
                let w = self.hw.mem.window(addr)?;
                self.windows[self.window_next] = w;
                self.window_next = (self.window_next + 1) % self.windows.len();
                w
            }
        };
        let off = addr - w.va;
        Some((w.iova + off as u64, (w.len - off).min(len)))
    }

    #[inline]
    fn free_slots(&self) -> u32 {
        self.size - self.head.wrapping_sub(self.tail) - 1
    }

    /// Writes the descriptors of `r`, or none of them.
    fn build(&mut self, r: Request) -> Result<(), BuildError> {
        let start = self.head;
        let empty = self.head == self.tail;
        let mut done = 0usize;
        while done < r.len {
            if self.free_slots() == 0 {
                self.head = start;
                return Err(if empty {
                    BuildError::TooBig
                } else {
                    BuildError::RingFull
                });
            }
            let left = r.len - done;
            let Some((dst, dlen)) = self.translate(r.dst + done, left) else {
                self.head = start;
                return Err(BuildError::NoIova);
            };
            let mut n = dlen.min(self.max_xfer as usize);
            let (src, ctl) = if r.fill {
                (spec::fill_pattern(r.pattern), control::with_op(op::FILL, 0))
            } else {
                let Some((src, slen)) = self.translate(r.src + done, left) else {
                    self.head = start;
                    return Err(BuildError::NoIova);
                };
                n = n.min(slen);
                (src, control::with_op(op::COPY, 0))
            };
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

    /// Retires every slot from the tail through `addr`; false when `addr`
    /// names no descriptor in flight.
    fn retire_through(&mut self, addr: u64, done: &mut Vec<(TaskId, Completion)>) -> bool {
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

    /// Acts on a CHANSTS-format status: retires what it says is done.
    /// Returns whether anything moved, or `Err` when it names no
    /// descriptor in flight.
    fn process(&mut self, status: u64, done: &mut Vec<(TaskId, Completion)>) -> Result<bool, ()> {
        let addr = chansts::addr(status);
        if addr == self.last_seen {
            return Ok(false);
        }
        if self.retire_through(addr, done) {
            Ok(true)
        } else {
            Err(())
        }
    }

    /// Reports finished requests; returns how many it added to `done`.
    pub fn poll(&mut self, done: &mut Vec<(TaskId, Completion)>) -> usize {
        let before = done.len();
        if self.in_ring > 0 {
            let word = self.ring.load_u64(completion_offset(self.size));
            let moved = if word == self.last_word {
                false
            } else {
                self.last_word = word;
                match self.process(word, done) {
                    Ok(m) => m,
                    Err(()) => {
                        bump(&self.counters.bad_completions, 1);
                        self.check(done, true)
                    }
                }
            };
            let now = tsc::now();
            if moved {
                self.progress = now;
            } else if self.in_ring > 0
                && now.wrapping_sub(self.progress) > self.stall_ticks
                && now.wrapping_sub(self.checked) > self.stall_ticks
            {
                self.checked = now;
                if !self.check(done, false) && now.wrapping_sub(self.progress) > self.timeout_ticks
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

    /// Reads CHANSTS and acts on it: a halt, or progress the completion
    /// word has not shown. Returns whether anything moved.
    fn check(&mut self, done: &mut Vec<(TaskId, Completion)>, after_bad_word: bool) -> bool {
        let st = self.chansts();
        if chansts::state(st) == chansts::HALTED {
            self.halted(st, done);
            return true;
        }
        match self.process(st, done) {
            Ok(true) => {
                self.progress = tsc::now();
                true
            }
            Ok(false) => false,
            Err(()) => {
                let why = format!(
                    "ioat {}: the device reported descriptor {:#x} complete, which is not in \
                     flight (CHANSTS {st:#x}{}); failing the requests in flight and resetting \
                     the channel",
                    self.hw.name,
                    chansts::addr(st),
                    if after_bad_word {
                        ", after a completion word that was not usable either"
                    } else {
                        ""
                    }
                );
                tracing::error!("{why}");
                self.fail_ring(done);
                self.restart(done);
                true
            }
        }
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

    /// The channel halted: what CHANSTS says completed succeeds, the next
    /// request fails, the rest is built again after a restart.
    fn halted(&mut self, st: u64, done: &mut Vec<(TaskId, Completion)>) {
        bump(&self.counters.halts, 1);
        let err = self.chanerr();
        let addr = chansts::addr(st);
        if addr != self.last_seen && !self.retire_through(addr, done) {
            tracing::error!(
                "ioat {}: halted with CHANERR {err:#x} ({}) and a completed-descriptor address \
                 ({addr:#x}) outside the ring; failing every request in flight",
                self.hw.name,
                spec::chanerr::describe(err)
            );
            self.fail_ring(done);
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
            "ioat {}: channel halted, CHANERR {err:#x} ({}); failing 1 request, building {} \
             again after a reset",
            self.hw.name,
            spec::chanerr::describe(err),
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
        self.fail_ring(done);
        self.restart(done);
    }

    /// Brings the channel up again; a channel that will not come up is
    /// broken and fails everything it holds.
    fn restart(&mut self, done: &mut Vec<(TaskId, Completion)>) {
        if let Err(e) = self.init() {
            let why = format!(
                "ioat {}: the channel cannot be restarted ({e}); its requests fail from now on",
                self.hw.name
            );
            tracing::error!("{why}");
            self.broken = Some(why);
            self.fail_ring(done);
            while let Some(r) = self.backlog.pop_front() {
                bump(&self.counters.failed, 1);
                done.push((r.id, Completion::with(Status::EngineError)));
            }
        }
    }
}

impl Drop for Channel {
    /// Stops the device from touching the ring (suspend and reset) before
    /// the ring's memory goes; the hardware (`hw`, the first field) is
    /// released after.
    fn drop(&mut self) {
        if self.broken.is_none()
            && let Err(e) = self.reset_hw()
        {
            tracing::warn!("ioat {}: reset at shutdown: {e}", self.hw.name);
        }
    }
}
