//! A software I/OAT device: one PCI function with one channel, behind the
//! same [`Registers`] seam as the real BAR0, executing descriptors against
//! the memory it was told is mapped (its [`IovaMap`]).
//!
//! Thread: the register file is shared. The driver's thread (a reactor)
//! reads and writes registers through [`ModelRegisters`]; the model's own
//! device thread (`ioat-model-N`) walks the descriptor chain, moves the
//! data, writes CHANSTS and the completion word, and executes CHANCMD
//! commands. Tests arm faults ([`Faults`]) and read counters from any
//! thread.
//!
//! How it maps to the specification (REFERENCE.md, "Intel I/OAT"):
//!
//! - Register file at the BAR0 offsets of [`spec`]: CHANCNT 1, XFERCAP,
//!   CBVER and DMACAPABILITY from [`ModelConfig`] (default 0x33, 1 MiB,
//!   block fill), channel 0 at 0x80. 64-bit registers also read as two
//!   32-bit halves. Writes to read-only registers are ignored.
//! - DMACOUNT is the doorbell: the device executes descriptors while its
//!   own running count differs from DMACOUNT (16-bit, wrapping). The first
//!   descriptor after a reset is read at CHAINADDR, each next one at the
//!   `next` field of the one before.
//! - Copy (op 0) and block fill (op 1, the 64-bit pattern repeated) and the
//!   null bit (no transfer). After each descriptor CHANSTS holds its
//!   address and the state (ACTIVE, or IDLE once the count reaches
//!   DMACOUNT); when it has "completion update", the same value is stored
//!   at CHANCMP.
//! - Errors halt the channel (as with ANY_ERR_ABORT_EN) and set CHANERR: an
//!   unaligned or unmapped chain address (CHAIN_ADDR_VALUE) or next pointer
//!   (NEXT_DESC_ALIGN, NEXT_DESC_ADDR); a source or destination not wholly
//!   inside one mapped window (SRC_ADDR, DEST_ADDR); a size of 0 or above
//!   XFERCAP (LENGTH); an unknown opcode (CONTROL); an unusable CHANCMP
//!   (COMPLETION_ADDR); an unknown CHANCMD value (CHANCMD). CHANSTS then
//!   reads HALTED with the address of the last completed descriptor; the
//!   completion word is only written on an error when CHANCTRL has
//!   ERR_COMPLETION_EN (SPDK, and this driver, do not set it).
//! - CHANCMD: RESET (self-clearing) clears CHANERR, CHANCTRL, CHAINADDR,
//!   CHANCMP, DMACOUNT and the running count and leaves the channel IDLE
//!   with no completed descriptor (the model's choice: the driver does not
//!   rely on the state after reset); SUSPEND stops after the current
//!   descriptor (SUSPENDED) and RESUME continues; ABORT halts the channel
//!   without an error bit.
//! - What the model does not do: interrupts, DCA, XOR/PQ/CRC, page-break
//!   and snoop bits (ignored), CHANERRMASK (stored, not applied), timing.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use super::identity_mapper::IdentityMapper;
use super::iova_map::IovaMap;
use super::mapped_memory::MappedMemory;
use super::registers::Registers;
use super::spec::{self, chan, chancmd, chanctrl, chanerr, chansts, control, desc, op};
use crate::env::dma::DmaMapper;

/// What a model device reports in its registers, and how its thread waits.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// CBVER (major 7:4, minor 3:0).
    pub cbver: u8,
    /// XFERCAP: log2 of the largest transfer (0: 4 GiB).
    pub xfercap: u8,
    /// DMACAPABILITY.
    pub dmacap: u32,
    /// How long the device thread spins idle before it parks.
    pub spin: Duration,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            cbver: 0x33,
            xfercap: 20,
            dmacap: spec::dmacap::BFILL | spec::dmacap::PB,
            spin: Duration::from_micros(50),
        }
    }
}

/// Counters of a model device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelCounters {
    /// Register reads.
    pub reads: u64,
    /// Register writes.
    pub writes: u64,
    /// DMACOUNT writes.
    pub doorbells: u64,
    /// Descriptors executed (data and null), errors excluded.
    pub descriptors: u64,
    /// Null descriptors among them.
    pub nulls: u64,
    /// Completion words written.
    pub completions: u64,
    /// Channel resets done.
    pub resets: u64,
    /// Halts (errors and aborts).
    pub halts: u64,
}

/// One register access, as recorded for the bring-up test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// A write (else a read).
    pub write: bool,
    /// Width in bits.
    pub width: u8,
    /// BAR0 offset.
    pub off: usize,
    /// Value read or written.
    pub value: u64,
}

/// How a corrupted completion write goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corruption {
    /// The value of the completion write before (out of order: it goes
    /// backwards).
    Stale,
    /// An address outside any descriptor ring.
    Wild,
}

/// Faults to inject, armed by tests from any thread.
#[derive(Debug, Default)]
pub struct Faults {
    /// Data descriptors fetched so far (nulls excluded).
    fetched: AtomicU64,
    /// Fail the data descriptor with this fetch number (0: none).
    fail_at: AtomicU64,
    /// After a failure, arm the next one this many descriptors later (0: once).
    fail_every: AtomicU64,
    /// The CHANERR bits of the injected failure.
    fail_bits: AtomicU32,
    /// Stop fetching descriptors until a reset.
    stall: AtomicBool,
    /// Completion writes so far.
    written: AtomicU64,
    /// Corrupt the completion write with this number (0: none).
    corrupt_at: AtomicU64,
    corrupt_wild: AtomicBool,
}

impl Faults {
    /// The `n`-th data descriptor from now fails (1: the next) with a source
    /// address error.
    pub fn fail_nth(&self, n: u64) {
        self.fail_bits.store(chanerr::SRC_ADDR, Ordering::Relaxed);
        self.fail_every.store(0, Ordering::Relaxed);
        self.fail_at.store(
            self.fetched.load(Ordering::Relaxed) + n.max(1),
            Ordering::Release,
        );
    }

    /// Every `n`-th data descriptor from now fails, with `bits` in CHANERR.
    pub fn fail_every(&self, n: u64, bits: u32) {
        self.fail_bits.store(bits, Ordering::Relaxed);
        self.fail_every.store(n.max(1), Ordering::Relaxed);
        self.fail_at.store(
            self.fetched.load(Ordering::Relaxed) + n.max(1),
            Ordering::Release,
        );
    }

    /// Stops injecting failures.
    pub fn clear(&self) {
        self.fail_at.store(0, Ordering::Release);
        self.corrupt_at.store(0, Ordering::Release);
        self.stall.store(false, Ordering::Release);
    }

    /// The channel stops fetching descriptors (it stays ACTIVE) until a
    /// reset.
    pub fn stall(&self) {
        self.stall.store(true, Ordering::Release);
    }

    /// The `n`-th completion write from now (1: the next) is corrupted.
    pub fn corrupt_completion(&self, n: u64, how: Corruption) {
        self.corrupt_wild
            .store(how == Corruption::Wild, Ordering::Relaxed);
        self.corrupt_at.store(
            self.written.load(Ordering::Relaxed) + n.max(1),
            Ordering::Release,
        );
    }
}

/// The register file and counters, shared by the register handle and the
/// device thread.
struct Shared {
    id: usize,
    cfg: ModelConfig,
    map: Arc<IovaMap>,
    genctrl: AtomicU8,
    intrctrl: AtomicU8,
    chanctrl: AtomicU16,
    chancmd: AtomicU8,
    dmacount: AtomicU16,
    chansts: AtomicU64,
    chainaddr: AtomicU64,
    chancmp: AtomicU64,
    chanerr: AtomicU32,
    chanerrmask: AtomicU32,
    reads: AtomicU64,
    writes: AtomicU64,
    doorbells: AtomicU64,
    descriptors: AtomicU64,
    nulls: AtomicU64,
    completions: AtomicU64,
    resets: AtomicU64,
    halts: AtomicU64,
    recording: AtomicBool,
    log: Mutex<Vec<Access>>,
    faults: Faults,
    sleeping: AtomicBool,
    stop: AtomicBool,
    /// Set until the device thread has left its loop.
    running: AtomicBool,
    thread: OnceLock<Thread>,
}

impl Shared {
    fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed)
            && let Some(t) = self.thread.get()
        {
            t.unpark();
        }
    }

    fn record(&self, write: bool, width: u8, off: usize, value: u64) {
        if write {
            self.writes.fetch_add(1, Ordering::Relaxed);
        } else {
            self.reads.fetch_add(1, Ordering::Relaxed);
        }
        if self.recording.load(Ordering::Relaxed) {
            self.log
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Access {
                    write,
                    width,
                    off,
                    value,
                });
        }
    }

    fn read(&self, width: u8, off: usize) -> u64 {
        const C: usize = spec::channel_base(0);
        let ld8 = |a: &AtomicU8| a.load(Ordering::Acquire) as u64;
        let v = match (width, off) {
            (8, spec::CHANCNT) => 1,
            (8, spec::XFERCAP) => self.cfg.xfercap as u64,
            (8, spec::GENCTRL) => ld8(&self.genctrl),
            (8, spec::INTRCTRL) => ld8(&self.intrctrl),
            (32, spec::ATTNSTATUS) => 0,
            (8, spec::CBVER) => self.cfg.cbver as u64,
            (16, spec::DEVICE_STATUS) => 0,
            (32, spec::DMACAPABILITY) => self.cfg.dmacap as u64,
            (16, o) if o == C + chan::CHANCTRL => self.chanctrl.load(Ordering::Acquire) as u64,
            (8, o) if o == C + chan::CHANCMD => ld8(&self.chancmd),
            (16, o) if o == C + chan::DMACOUNT => self.dmacount.load(Ordering::Acquire) as u64,
            (32, o) if o == C + chan::CHANERR => self.chanerr.load(Ordering::Acquire) as u64,
            (32, o) if o == C + chan::CHANERRMASK => {
                self.chanerrmask.load(Ordering::Acquire) as u64
            }
            (64, o) => self.read64(o).unwrap_or(0),
            (32, o) => match (self.read64(o & !7), o & 7) {
                (Some(v), 0) => v & 0xffff_ffff,
                (Some(v), 4) => v >> 32,
                _ => 0,
            },
            _ => 0,
        };
        self.record(false, width, off, v);
        v
    }

    fn read64(&self, off: usize) -> Option<u64> {
        const C: usize = spec::channel_base(0);
        match off {
            o if o == C + chan::CHANSTS => Some(self.chansts.load(Ordering::Acquire)),
            o if o == C + chan::CHAINADDR => Some(self.chainaddr.load(Ordering::Acquire)),
            o if o == C + chan::CHANCMP => Some(self.chancmp.load(Ordering::Acquire)),
            _ => None,
        }
    }

    fn write(&self, width: u8, off: usize, v: u64) {
        const C: usize = spec::channel_base(0);
        self.record(true, width, off, v);
        match (width, off) {
            (8, spec::GENCTRL) => self.genctrl.store(v as u8, Ordering::Release),
            (8, spec::INTRCTRL) => self.intrctrl.store(v as u8, Ordering::Release),
            (16, o) if o == C + chan::CHANCTRL => self.chanctrl.store(v as u16, Ordering::Release),
            (8, o) if o == C + chan::CHANCMD => {
                self.chancmd.store(v as u8, Ordering::Release);
                self.wake();
            }
            (16, o) if o == C + chan::DMACOUNT => {
                self.doorbells.fetch_add(1, Ordering::Relaxed);
                self.dmacount.store(v as u16, Ordering::Release);
                self.wake();
            }
            (64, o) if o == C + chan::CHAINADDR => self.chainaddr.store(v, Ordering::Release),
            (64, o) if o == C + chan::CHANCMP => self.chancmp.store(v, Ordering::Release),
            (32, o) if o == C + chan::CHAINADDR || o == C + chan::CHANCMP => {
                let r = if o == C + chan::CHAINADDR {
                    &self.chainaddr
                } else {
                    &self.chancmp
                };
                let old = r.load(Ordering::Acquire);
                r.store((old & !0xffff_ffff) | (v & 0xffff_ffff), Ordering::Release);
            }
            (32, o) if o == C + chan::CHAINADDR + 4 || o == C + chan::CHANCMP + 4 => {
                let r = if o == C + chan::CHAINADDR + 4 {
                    &self.chainaddr
                } else {
                    &self.chancmp
                };
                let old = r.load(Ordering::Acquire);
                r.store((old & 0xffff_ffff) | (v << 32), Ordering::Release);
            }
            (32, o) if o == C + chan::CHANERR => {
                self.chanerr.fetch_and(!(v as u32), Ordering::AcqRel);
            }
            (32, o) if o == C + chan::CHANERRMASK => {
                self.chanerrmask.store(v as u32, Ordering::Release)
            }
            _ => {}
        }
    }
}

/// A model I/OAT device (one function, one channel) and its device thread.
/// Dropping it stops the thread.
pub struct IoatModel {
    handle: ModelHandle,
    thread: Option<JoinHandle<()>>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

impl IoatModel {
    /// A device with an address space of its own, empty until its
    /// [`mapper`](IoatModel::mapper) is registered
    /// ([`register_mapper`](crate::env::dma::register_mapper)): from then on
    /// it sees every DMA region of the process at IOVA = virtual address,
    /// and nothing else.
    pub fn new(cfg: ModelConfig) -> IoatModel {
        IoatModel::with_map(cfg, Arc::new(IovaMap::new()))
    }

    /// A device whose address space is `map`, kept by the caller (and
    /// perhaps shared with other devices).
    pub(crate) fn with_map(cfg: ModelConfig, map: Arc<IovaMap>) -> IoatModel {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed) as usize;
        let shared = Arc::new(Shared {
            id,
            cfg,
            map,
            genctrl: AtomicU8::new(0),
            intrctrl: AtomicU8::new(0),
            chanctrl: AtomicU16::new(0),
            chancmd: AtomicU8::new(0),
            dmacount: AtomicU16::new(0),
            // Power-on: as after a reset.
            chansts: AtomicU64::new(chansts::IDLE),
            chainaddr: AtomicU64::new(0),
            chancmp: AtomicU64::new(0),
            chanerr: AtomicU32::new(0),
            chanerrmask: AtomicU32::new(0),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            doorbells: AtomicU64::new(0),
            descriptors: AtomicU64::new(0),
            nulls: AtomicU64::new(0),
            completions: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            halts: AtomicU64::new(0),
            recording: AtomicBool::new(false),
            log: Mutex::new(Vec::new()),
            faults: Faults::default(),
            sleeping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            running: AtomicBool::new(true),
            thread: OnceLock::new(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("ioat-model-{id}"))
            .spawn(move || {
                Device::new(s.clone()).run();
                s.running.store(false, Ordering::Release);
            })
            .expect("spawn the I/OAT model's device thread");
        let _ = shared.thread.set(thread.thread().clone());
        IoatModel {
            handle: ModelHandle { shared },
            thread: Some(thread),
        }
    }

    /// What makes DMA memory visible to this device: it maps every region
    /// it is told of into the device's address space at IOVA = virtual
    /// address. Whoever creates the device registers it.
    pub fn mapper(&self) -> Arc<dyn DmaMapper> {
        Arc::new(IdentityMapper(self.handle.shared.map.clone()))
    }

    /// The register seam of this device.
    pub fn registers(&self) -> ModelRegisters {
        ModelRegisters {
            shared: self.handle.shared.clone(),
        }
    }

    /// Device-visible memory of this device: allocations and translations
    /// through its address space.
    pub fn memory(&self) -> MappedMemory {
        MappedMemory::new(self.handle.shared.map.clone())
    }

    /// A handle on the device's counters, faults and log, usable after the
    /// model itself was handed to a driver.
    pub fn handle(&self) -> ModelHandle {
        ModelHandle {
            shared: self.handle.shared.clone(),
        }
    }
}

impl std::ops::Deref for IoatModel {
    type Target = ModelHandle;
    fn deref(&self) -> &ModelHandle {
        &self.handle
    }
}

/// Counters, faults and the access log of a model device.
#[derive(Clone)]
pub struct ModelHandle {
    shared: Arc<Shared>,
}

impl ModelHandle {
    /// A name for messages: `model-N`.
    pub fn name(&self) -> String {
        format!("model-{}", self.shared.id)
    }

    /// Its address space.
    pub fn map(&self) -> &Arc<IovaMap> {
        &self.shared.map
    }

    /// Whether the device thread still runs: true from the device's
    /// creation until its thread has left its loop (which dropping the
    /// [`IoatModel`] waits for).
    pub fn thread_running(&self) -> bool {
        self.shared.running.load(Ordering::Acquire)
    }

    /// Fault injection.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// The counters now.
    pub fn counters(&self) -> ModelCounters {
        let s = &self.shared;
        let l = |a: &AtomicU64| a.load(Ordering::Acquire);
        ModelCounters {
            reads: l(&s.reads),
            writes: l(&s.writes),
            doorbells: l(&s.doorbells),
            descriptors: l(&s.descriptors),
            nulls: l(&s.nulls),
            completions: l(&s.completions),
            resets: l(&s.resets),
            halts: l(&s.halts),
        }
    }

    /// Starts (or stops) recording register accesses; starting clears the
    /// log.
    pub fn record(&self, on: bool) {
        if on {
            self.shared
                .log
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
        }
        self.shared.recording.store(on, Ordering::Release);
    }

    /// The recorded accesses.
    pub fn log(&self) -> Vec<Access> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for IoatModel {
    fn drop(&mut self) {
        self.handle.shared.stop.store(true, Ordering::Release);
        self.handle.shared.wake();
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// The register seam of a model device (what the driver holds).
pub struct ModelRegisters {
    shared: Arc<Shared>,
}

impl Registers for ModelRegisters {
    fn read8(&self, off: usize) -> u8 {
        self.shared.read(8, off) as u8
    }
    fn read16(&self, off: usize) -> u16 {
        self.shared.read(16, off) as u16
    }
    fn read32(&self, off: usize) -> u32 {
        self.shared.read(32, off) as u32
    }
    fn read64(&self, off: usize) -> u64 {
        self.shared.read(64, off)
    }
    unsafe fn write8(&self, off: usize, v: u8) {
        self.shared.write(8, off, v as u64)
    }
    unsafe fn write16(&self, off: usize, v: u16) {
        self.shared.write(16, off, v as u64)
    }
    unsafe fn write32(&self, off: usize, v: u32) {
        self.shared.write(32, off, v as u64)
    }
    unsafe fn write64(&self, off: usize, v: u64) {
        self.shared.write(64, off, v)
    }
}

/// What the device thread keeps between descriptors.
struct Device {
    s: Arc<Shared>,
    /// Descriptors fetched since the reset (the count DMACOUNT is
    /// compared with).
    count: u16,
    /// IOVA of the next descriptor; `None` before the first one after a
    /// reset (then it is CHAINADDR).
    next: Option<u64>,
    /// CHANSTS state bits.
    state: u64,
    /// Address of the last completed descriptor.
    last: u64,
    /// The last value written to the completion word.
    last_written: u64,
}

/// Why a descriptor could not be executed: CHANERR bits.
type Fault = u32;

impl Device {
    fn new(s: Arc<Shared>) -> Device {
        Device {
            s,
            count: 0,
            next: None,
            state: chansts::IDLE,
            last: 0,
            last_written: 0,
        }
    }

    fn publish(&self) {
        self.s
            .chansts
            .store(self.last | self.state, Ordering::Release);
    }

    fn run(mut self) {
        let mut idle_since = Instant::now();
        loop {
            if self.s.stop.load(Ordering::Acquire) {
                return;
            }
            let cmd = self.s.chancmd.load(Ordering::Acquire);
            if cmd != 0 {
                self.command(cmd);
                idle_since = Instant::now();
                continue;
            }
            if self.runnable() {
                self.step();
                idle_since = Instant::now();
                continue;
            }
            if idle_since.elapsed() < self.s.cfg.spin {
                std::hint::spin_loop();
                continue;
            }
            self.s.sleeping.store(true, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            if !self.s.stop.load(Ordering::Acquire)
                && self.s.chancmd.load(Ordering::Acquire) == 0
                && !self.runnable()
            {
                std::thread::park_timeout(Duration::from_millis(200));
            }
            self.s.sleeping.store(false, Ordering::Relaxed);
        }
    }

    fn runnable(&self) -> bool {
        matches!(self.state, chansts::ACTIVE | chansts::IDLE)
            && !self.s.faults.stall.load(Ordering::Acquire)
            && self.count != self.s.dmacount.load(Ordering::Acquire)
    }

    fn command(&mut self, cmd: u8) {
        match cmd {
            chancmd::RESET => {
                let s = &self.s;
                s.chanerr.store(0, Ordering::Release);
                s.chanctrl.store(0, Ordering::Release);
                s.chainaddr.store(0, Ordering::Release);
                s.chancmp.store(0, Ordering::Release);
                s.dmacount.store(0, Ordering::Release);
                s.faults.stall.store(false, Ordering::Release);
                self.count = 0;
                self.next = None;
                self.last = 0;
                self.last_written = 0;
                self.state = chansts::IDLE;
                self.publish();
                s.resets.fetch_add(1, Ordering::Relaxed);
            }
            chancmd::SUSPEND => {
                if matches!(self.state, chansts::ACTIVE | chansts::IDLE) {
                    self.state = chansts::SUSPENDED;
                    self.publish();
                }
            }
            chancmd::RESUME => {
                if self.state == chansts::SUSPENDED {
                    self.state = chansts::IDLE;
                    self.publish();
                }
            }
            chancmd::ABORT => {
                self.state = chansts::HALTED;
                self.s.halts.fetch_add(1, Ordering::Relaxed);
                self.publish();
            }
            _ => self.halt(chanerr::CHANCMD),
        }
        // Self-clearing once done (RESET is what the driver waits on).
        self.s.chancmd.store(0, Ordering::Release);
    }

    fn halt(&mut self, bits: u32) {
        let s = &self.s;
        s.chanerr.fetch_or(bits, Ordering::AcqRel);
        self.state = chansts::HALTED;
        s.halts.fetch_add(1, Ordering::Relaxed);
        self.publish();
        if s.chanctrl.load(Ordering::Acquire) & chanctrl::ERR_COMPLETION_EN != 0 {
            let _ = self.write_completion(self.last | chansts::HALTED);
        }
    }

    fn write_completion(&mut self, v: u64) -> Result<(), Fault> {
        let cmp = self.s.chancmp.load(Ordering::Acquire);
        if !cmp.is_multiple_of(spec::CHANCMP_ALIGN as u64) {
            return Err(chanerr::COMPLETION_ADDR);
        }
        let p = self.s.map.resolve(cmp, 8).ok_or(chanerr::COMPLETION_ADDR)?;
        let f = &self.s.faults;
        let n = f.written.fetch_add(1, Ordering::Relaxed) + 1;
        let mut value = v;
        if f.corrupt_at.load(Ordering::Acquire) == n {
            f.corrupt_at.store(0, Ordering::Release);
            value = if f.corrupt_wild.load(Ordering::Relaxed) {
                v ^ (1 << 40)
            } else {
                self.last_written
            };
        }
        // SAFETY: `p` is 8 bytes inside a window of the device's address
        // space (resolve checked it), 8-aligned (windows start on page
        // boundaries and CHANCMP is 8-aligned); the driver reads it only
        // atomically.
        unsafe { AtomicU64::from_ptr(p.cast::<u64>()) }.store(value, Ordering::Release);
        self.last_written = v;
        self.s.completions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Fetches and executes one descriptor.
    fn step(&mut self) {
        let (addr, first) = match self.next {
            Some(a) => (a, false),
            None => (self.s.chainaddr.load(Ordering::Acquire), true),
        };
        if !addr.is_multiple_of(spec::DESC_SIZE as u64) {
            return self.halt(if first {
                chanerr::CHAIN_ADDR_VALUE
            } else {
                chanerr::NEXT_DESC_ALIGN
            });
        }
        let Some(d) = self.s.map.resolve(addr, spec::DESC_SIZE as u64) else {
            return self.halt(if first {
                chanerr::CHAIN_ADDR_VALUE
            } else {
                chanerr::NEXT_DESC_ADDR
            });
        };
        // SAFETY: `d` is 64 bytes inside a mapped window (resolve), 64-byte
        // aligned (windows are page aligned, addr is 64-aligned); the
        // driver finished writing it before the DMACOUNT store this thread
        // acquired, and reads here are volatile.
        let (size, ctl, src, dst, next) = unsafe {
            (
                d.add(desc::SIZE).cast::<u32>().read_volatile(),
                d.add(desc::CONTROL).cast::<u32>().read_volatile(),
                d.add(desc::SRC).cast::<u64>().read_volatile(),
                d.add(desc::DST).cast::<u64>().read_volatile(),
                d.add(desc::NEXT).cast::<u64>().read_volatile(),
            )
        };
        self.count = self.count.wrapping_add(1);
        self.state = chansts::ACTIVE;
        if let Err(bits) = self.execute(size, ctl, src, dst) {
            return self.halt(bits);
        }
        self.next = Some(next);
        self.last = addr;
        if self.count == self.s.dmacount.load(Ordering::Acquire) {
            self.state = chansts::IDLE;
        }
        self.s.descriptors.fetch_add(1, Ordering::Relaxed);
        self.publish();
        if ctl & control::COMPLETION_UPDATE != 0
            && let Err(bits) = self.write_completion(addr | self.state)
        {
            self.halt(bits);
        }
    }

    fn execute(&self, size: u32, ctl: u32, src: u64, dst: u64) -> Result<(), Fault> {
        if ctl & control::NULL != 0 {
            self.s.nulls.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let f = &self.s.faults;
        let n = f.fetched.fetch_add(1, Ordering::AcqRel) + 1;
        if f.fail_at.load(Ordering::Acquire) == n {
            let every = f.fail_every.load(Ordering::Relaxed);
            f.fail_at
                .store(if every > 0 { n + every } else { 0 }, Ordering::Release);
            return Err(f.fail_bits.load(Ordering::Relaxed));
        }
        let max = spec::max_transfer(self.s.cfg.xfercap).unwrap_or(4096);
        if size == 0 || size as u64 > max {
            return Err(chanerr::LENGTH);
        }
        let len = size as usize;
        let to = self
            .s
            .map
            .resolve(dst, size as u64)
            .ok_or(chanerr::DEST_ADDR)?;
        match control::op(ctl) {
            op::COPY => {
                let from = self
                    .s
                    .map
                    .resolve(src, size as u64)
                    .ok_or(chanerr::SRC_ADDR)?;
                // SAFETY: both ranges lie inside mapped windows (resolve);
                // the submitter keeps them valid and untouched while the
                // task is in flight (the accel contract). `copy` tolerates
                // overlap, which a device would not promise either.
                unsafe { std::ptr::copy(from, to, len) };
            }
            op::FILL => {
                let pattern = src.to_le_bytes();
                if pattern.iter().all(|&b| b == pattern[0]) {
                    // SAFETY: `len` bytes inside the mapped destination.
                    unsafe { std::ptr::write_bytes(to, pattern[0], len) };
                } else {
                    for i in 0..len {
                        // SAFETY: i < len, inside the mapped destination.
                        unsafe { to.add(i).write(pattern[i % 8]) };
                    }
                }
            }
            _ => return Err(chanerr::CONTROL),
        }
        Ok(())
    }
}
