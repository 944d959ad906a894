//! A software I/OAT device: one PCI function with one channel, behind the
//! same [`Registers`] seam as the real BAR0, executing descriptors against
//! the memory it was told is mapped (its [`IovaMap`]).
//!
//! Thread: the register file is shared. The driver's thread (a reactor)
//! reads and writes registers through [`ModelRegisters`] and configuration
//! space through [`ModelPci`]; the model's own
//! device thread (`ioat-model-N`) walks the descriptor chain, moves the
//! data, writes CHANSTS and the completion word, and executes CHANCMD
//! commands. Tests arm faults ([`Faults`]) and read counters from any
//! thread.
//!
//! How it maps to the specification (REFERENCE.md, "Intel I/OAT"):
//!
//! - Register file at the BAR0 offsets of [`spec`]: CHANCNT, XFERCAP,
//!   CBVER and DMACAPABILITY from [`ModelConfig`] (default 1, 1 MiB, 0x33,
//!   block fill), channel 0 at 0x80. 64-bit registers also read and write
//!   as two 32-bit halves; with [`ModelConfig::split_chain_writes`] a
//!   64-bit write to CHAINADDR or CHANCMP is counted and ignored, as by a
//!   device that decodes only 32-bit accesses there. Writes to read-only
//!   registers are ignored.
//! - PCI configuration space ([`ModelPci`], the driver's [`PciConfig`]):
//!   vendor 0x8086 and [`ModelConfig::device_id`], the command register
//!   (bus mastering on at power-on: the backend enables it), a capability
//!   list holding the PCI Express capability at 0x40 whose Device Control
//!   has relaxed ordering on at power-on, and CHANERR_INT at 0x180 (write 1
//!   to clear) on functions that have it (CBVER below 3.3, or SKX's device
//!   id: [`spec::has_chanerr_int`]), where every error CHANERR gets is
//!   latched too. Other offsets read 0 and ignore writes. With
//!   [`ModelConfig::sticky_relaxed_ordering`] the relaxed-ordering bit
//!   stays set whatever is written; with
//!   [`ModelConfig::sticky_chanerr_int`] CHANERR_INT ignores writes.
//! - Bus mastering off: no descriptor is fetched or executed, and the
//!   command write returns only once none is in progress (the device
//!   thread holds a lock across each command and descriptor). A
//!   function-level reset (unless [`ModelConfig::function_reset`] is off)
//!   does the same wait, turns bus mastering off and
//!   puts the channel's registers, CHANERR_INT and Device Control back to
//!   their reset values.
//! - Power-on ([`ModelConfig::power_on`]): IDLE as after a reset, HALTED
//!   with chosen CHANERR bits (latched in CHANERR_INT where the function
//!   has it), or ARMED; HALTED and ARMED channels run nothing until a
//!   reset.
//! - DMACOUNT is the doorbell: the device executes descriptors while its
//!   own running count differs from DMACOUNT (16-bit, wrapping). The first
//!   descriptor after a reset is read at CHAINADDR, each next one at the
//!   `next` field of the one before.
//! - Prefetch: before each descriptor the device reads ahead every
//!   descriptor handed over (up to DMACOUNT) that it has not read yet, and
//!   executes what it read then; a slot whose memory differs when its turn
//!   comes was written by the driver after the doorbell gave it away, and
//!   is counted ([`ModelCounters::prefetch_mismatches`], 0 for a correct
//!   driver). A reset or an abort forgets what was read ahead.
//! - Copy (op 0) and block fill (op 1, the 64-bit pattern repeated) and the
//!   null bit (no transfer; a size of 0 is still a length error). After
//!   each descriptor with "completion update" the completion word at
//!   CHANCMP gets its address and the state (ACTIVE, or IDLE once the
//!   count reaches DMACOUNT); then CHANSTS shows the same, so CHANSTS
//!   never shows a descriptor done before its completion write. CHANSTS
//!   shows every descriptor done as it finishes, or, with
//!   [`ModelConfig::quiet_status`], only those with "completion update".
//! - The device holds its IOVA map (an [`IovaGuard`]) from a descriptor's
//!   fetch to its completion write: an unmap waits for the descriptor in
//!   progress, as the `DmaMapper` contract ("the device must no longer use
//!   it") requires of a device.
//! - Errors set CHANERR: an unaligned or unmapped chain address
//!   (CHAIN_ADDR_VALUE) or next pointer (NEXT_DESC_ALIGN, NEXT_DESC_ADDR); a
//!   source or destination not wholly inside one mapped window (SRC_ADDR,
//!   DEST_ADDR); a size of 0 or above XFERCAP (LENGTH); an unknown opcode
//!   (CONTROL); an unusable CHANCMP (COMPLETION_ADDR); an unknown CHANCMD
//!   value (CHANCMD). With ANY_ERR_ABORT_EN in CHANCTRL they halt the
//!   channel: the completion word, when CHANCTRL has ERR_COMPLETION_EN,
//!   then CHANSTS read HALTED with the address of the last completed
//!   descriptor ([`ModelConfig::silent_halt`] loses that completion
//!   write: only CHANSTS shows the halt). Without ANY_ERR_ABORT_EN (the model's reading of the bit's
//!   name and of Linux's `registers.h`, which sets it in
//!   `IOAT_CHANCTRL_RUN`; no specification text was at hand) an error in a
//!   descriptor's transfer or completion write is latched in CHANERR and
//!   the descriptor counts as done without its transfer, and the channel
//!   goes on; a chain it cannot fetch halts it either way.
//! - Faults ([`Faults`]), all off by default (what hardware does): failing
//!   descriptors, a stall, corrupt completion writes; held completion
//!   writes (each held for N descriptors or until CHANSTS is read after
//!   it, the data of the descriptors it covers visible only then, CHANSTS
//!   naming each descriptor as it starts: a device whose posted writes land
//!   late); a slow but alive device (each data descriptor takes a set
//!   time, or moves its bytes at a set rate); manual stepping ([`ModelHandle::step`]), for tests that must
//!   see the same interleaving every run.
//! - With [`ModelConfig::hide_null_address`] a null descriptor leaves
//!   CHANSTS's and the completion word's address at the descriptor before
//!   (0 after a reset): a driver must not require the null descriptor's
//!   address at bring-up.
//! - CHANCMD: RESET (self-clearing) clears CHANERR, CHANCTRL, CHAINADDR,
//!   CHANCMP, DMACOUNT and the running count and leaves the channel IDLE
//!   with no completed descriptor (the model's choice: the driver does not
//!   rely on the state after reset), or HALTED while CHANERR_INT holds an
//!   error (SPDK and Linux clear it before the reset); SUSPEND stops after
//!   the current descriptor (SUSPENDED; ignored with
//!   [`ModelConfig::ignore_suspend`]) and RESUME continues; ABORT halts the
//!   channel without an error bit. [`Faults::never_reset`] leaves a RESET
//!   pending for ever; [`Faults::config_stuck`] makes configuration writes
//!   and the function-level reset fail.
//! - What the model does not do: interrupts, DCA, XOR/PQ/CRC, page-break
//!   and snoop bits (ignored), CHANERRMASK (stored, not applied), timing.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use super::identity_mapper::IdentityMapper;
use super::spec::{self, chan, chancmd, chanctrl, chanerr, chansts, control, desc, op};
use crate::env::dma::{DmaMapper, IovaGuard, IovaMap, MappedMemory};
use crate::env::vfio::{
    PCI_CAPABILITY_LIST, PCI_COMMAND, PCI_COMMAND_BUS_MASTER, PCI_DEVICE_ID, PCI_STATUS,
    PCI_STATUS_CAP_LIST, PciConfig, Registers,
};

/// What a model device reports in its registers, and how its thread waits.
/// The defaults are what hardware does; the other settings are hardware
/// behaviours a driver must tolerate.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// CBVER (major 7:4, minor 3:0).
    pub cbver: u8,
    /// XFERCAP: log2 of the largest transfer (0: 4 GiB).
    pub xfercap: u8,
    /// DMACAPABILITY.
    pub dmacap: u32,
    /// CHANCNT.
    pub chancnt: u8,
    /// The PCI device id in configuration space (with CBVER, it decides
    /// whether the function has CHANERR_INT: [`spec::has_chanerr_int`]).
    pub device_id: u16,
    /// The channel's state at power-on.
    pub power_on: PowerOn,
    /// SUSPEND is ignored (the channel stays ACTIVE or IDLE).
    pub ignore_suspend: bool,
    /// A null descriptor does not report its address: CHANSTS and the
    /// completion word keep the address of the descriptor before (0 after
    /// a reset).
    pub hide_null_address: bool,
    /// 64-bit writes to CHAINADDR and CHANCMP are ignored (and counted), as
    /// by a device that decodes only 32-bit accesses there.
    pub split_chain_writes: bool,
    /// The function has a function-level reset (else only bus mastering
    /// off stops its DMA).
    pub function_reset: bool,
    /// Device Control's relaxed-ordering bit ignores writes: it stays set
    /// (a function or platform that forces it on).
    pub sticky_relaxed_ordering: bool,
    /// CHANERR_INT ignores writes: an error latched there stays (on a
    /// function that has it).
    pub sticky_chanerr_int: bool,
    /// A halt does not write the completion word, even with
    /// ERR_COMPLETION_EN (a device whose halt write is lost, or that does
    /// not make one): only CHANSTS shows HALTED.
    pub silent_halt: bool,
    /// CHANSTS's address and state move only with completion writes (and
    /// halts, commands), not after every descriptor: a long batch shows no
    /// sign of life until its completion write.
    pub quiet_status: bool,
    /// How long the device thread spins idle before it parks.
    pub spin: Duration,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            cbver: 0x33,
            xfercap: 20,
            dmacap: spec::dmacap::BFILL | spec::dmacap::PB,
            chancnt: 1,
            device_id: DEFAULT_DEVICE_ID,
            power_on: PowerOn::Idle,
            ignore_suspend: false,
            hide_null_address: false,
            split_chain_writes: false,
            function_reset: true,
            sticky_relaxed_ordering: false,
            sticky_chanerr_int: false,
            silent_halt: false,
            quiet_status: false,
            spin: Duration::from_micros(50),
        }
    }
}

/// The model's default device id: Ice Lake-SP's, a function without
/// CHANERR_INT at the default CBVER.
pub const DEFAULT_DEVICE_ID: u16 = 0x0b00;

/// A channel's state at power-on (or after a previous user left it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PowerOn {
    /// IDLE, as after a reset.
    #[default]
    Idle,
    /// HALTED with these CHANERR bits (latched in CHANERR_INT too where the
    /// function has it).
    Halted(u32),
    /// ARMED (an interrupt pending).
    Armed,
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
    /// 64-bit CHAINADDR/CHANCMP writes ignored
    /// ([`ModelConfig::split_chain_writes`]).
    pub rejected_writes: u64,
    /// Function-level resets done.
    pub function_resets: u64,
    /// Descriptors started (fetched for execution, errors included).
    pub started: u64,
    /// Descriptors whose memory, when executed, differed from what the
    /// device had prefetched (the driver wrote a slot it had handed over):
    /// 0 for a correct driver.
    pub prefetch_mismatches: u64,
}

/// One register access, as recorded for the bring-up test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// In PCI configuration space (else BAR0).
    pub config: bool,
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
    /// RESET never completes (CHANCMD keeps its bit).
    reset_stuck: AtomicBool,
    /// Configuration space ignores writes and the function-level reset
    /// fails.
    config_stuck: AtomicBool,
    /// Hold each completion write (and the data of the descriptors it
    /// covers) back until this many more descriptors have run, or until
    /// CHANSTS has been read since (0: write at once).
    hold: AtomicU64,
    /// CHANSTS reads so far (counted by the register file).
    status_reads: AtomicU64,
    /// Nanoseconds each data descriptor takes (0: no delay).
    slow_ns: AtomicU64,
    /// Bytes per second data descriptors move at (0: no limit).
    rate: AtomicU64,
    /// The device runs descriptors only when [`ModelHandle::step`] asks.
    manual: AtomicBool,
    step_req: AtomicU64,
    step_ack: AtomicU64,
    step_did: AtomicBool,
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

    /// Stops injecting failures (held completions are written, slow
    /// descriptors run at full speed again; manual stepping stays).
    pub fn clear(&self) {
        self.fail_at.store(0, Ordering::Release);
        self.corrupt_at.store(0, Ordering::Release);
        self.stall.store(false, Ordering::Release);
        self.reset_stuck.store(false, Ordering::Release);
        self.config_stuck.store(false, Ordering::Release);
        self.hold.store(0, Ordering::Release);
        self.slow_ns.store(0, Ordering::Release);
        self.rate.store(0, Ordering::Release);
    }

    /// From now on a channel RESET never completes: CHANCMD keeps the
    /// reset bit and nothing is reset (a function-level reset still works).
    pub fn never_reset(&self) {
        self.reset_stuck.store(true, Ordering::Release);
    }

    /// From now on configuration space ignores writes (bus mastering stays
    /// on) and a function-level reset fails: the function's DMA cannot be
    /// stopped.
    pub fn config_stuck(&self) {
        self.config_stuck.store(true, Ordering::Release);
    }

    /// Each completion write is held back until `n` more descriptors have
    /// run or CHANSTS has been read after it, whichever comes first; the
    /// data of the descriptors it covers becomes visible only then, while
    /// CHANSTS names each descriptor as soon as it starts. (A device may
    /// post its writes late; only the completion write orders them.) 0
    /// writes at once again.
    pub fn hold_completions(&self, n: u64) {
        self.hold.store(n, Ordering::Release);
    }

    /// Slow but alive: every data descriptor takes `per_descriptor` (the
    /// device holds its IOVA map meanwhile, as a long transfer would).
    pub fn slow(&self, per_descriptor: Duration) {
        self.slow_ns
            .store(per_descriptor.as_nanos() as u64, Ordering::Release);
    }

    /// A device that moves `bytes_per_sec`: each data descriptor of `size`
    /// bytes takes `size / bytes_per_sec` (as `slow`, the IOVA map held
    /// meanwhile). 0 lifts the limit.
    pub fn rate(&self, bytes_per_sec: u64) {
        self.rate.store(bytes_per_sec, Ordering::Release);
    }

    /// Manual stepping: the device runs nothing (commands excepted) until
    /// [`ModelHandle::step`] asks for one step.
    pub fn manual(&self, on: bool) {
        self.manual.store(on, Ordering::Release);
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
    /// CHANERR_INT (config space 0x180), where the function has it.
    chanerr_int: AtomicU32,
    /// The PCI command register.
    command: AtomicU16,
    /// The PCI Express Device Control register.
    devctl: AtomicU16,
    /// Held by the device thread while it executes a command or a
    /// descriptor, and by configuration writes that stop DMA, so that once
    /// those return no descriptor is in progress.
    exec: Mutex<()>,
    /// A function-level reset the device thread has yet to apply to its own
    /// state.
    flr: AtomicBool,
    rejected_writes: AtomicU64,
    function_resets: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
    doorbells: AtomicU64,
    descriptors: AtomicU64,
    nulls: AtomicU64,
    completions: AtomicU64,
    resets: AtomicU64,
    halts: AtomicU64,
    started: AtomicU64,
    mismatches: AtomicU64,
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
        self.log_access(false, write, width, off, value);
    }

    fn log_access(&self, config: bool, write: bool, width: u8, off: usize, value: u64) {
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
                    config,
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
            (8, spec::CHANCNT) => self.cfg.chancnt as u64,
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
            o if o == C + chan::CHANSTS => {
                self.faults.status_reads.fetch_add(1, Ordering::AcqRel);
                Some(self.chansts.load(Ordering::Acquire))
            }
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
            (64, o)
                if self.cfg.split_chain_writes
                    && (o == C + chan::CHAINADDR || o == C + chan::CHANCMP) =>
            {
                self.rejected_writes.fetch_add(1, Ordering::Relaxed);
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

/// Power-on values of the model's configuration space.
const POWER_ON_COMMAND: u16 = 0x0002 | PCI_COMMAND_BUS_MASTER;
/// Relaxed ordering, no snoop, 512-byte read requests.
const POWER_ON_DEVCTL: u16 = spec::PCI_EXP_DEVCTL_RELAX_EN | 0x0800 | 0x2000;
/// Where the model's PCI Express capability sits (the only one).
const PCIE_CAP: u64 = 0x40;

impl Shared {
    /// Whether the function has CHANERR_INT.
    fn has_chanerr_int(&self) -> bool {
        spec::has_chanerr_int(self.cfg.cbver, self.cfg.device_id)
    }

    /// Sets CHANERR bits, latched in CHANERR_INT where the function has it.
    fn raise(&self, bits: u32) {
        self.chanerr.fetch_or(bits, Ordering::AcqRel);
        if self.has_chanerr_int() {
            self.chanerr_int.fetch_or(bits, Ordering::AcqRel);
        }
    }

    /// Whether the device may reach memory (bus master enable).
    fn bus_master(&self) -> bool {
        self.command.load(Ordering::Acquire) & PCI_COMMAND_BUS_MASTER != 0
    }

    fn config16(&self, off: u64) -> u16 {
        match off {
            0x00 => spec::VENDOR_INTEL,
            PCI_DEVICE_ID => self.cfg.device_id,
            PCI_COMMAND => self.command.load(Ordering::Acquire),
            PCI_STATUS => PCI_STATUS_CAP_LIST,
            PCI_CAPABILITY_LIST => PCIE_CAP as u16,
            // The PCI Express capability, last in the list; version 2, a
            // root-complex integrated endpoint.
            PCIE_CAP => spec::PCI_CAP_ID_EXP as u16,
            o if o == PCIE_CAP + 2 => 0x0092,
            o if o == PCIE_CAP + spec::PCI_EXP_DEVCTL => self.devctl.load(Ordering::Acquire),
            o if o == spec::CHANERR_INT && self.has_chanerr_int() => {
                self.chanerr_int.load(Ordering::Acquire) as u16
            }
            o if o == spec::CHANERR_INT + 2 && self.has_chanerr_int() => {
                (self.chanerr_int.load(Ordering::Acquire) >> 16) as u16
            }
            _ => 0,
        }
    }

    fn config_read(&self, width: u8, off: u64) -> u64 {
        let v = if width == 16 {
            self.config16(off) as u64
        } else {
            self.config16(off) as u64 | (self.config16(off + 2) as u64) << 16
        };
        self.log_access(true, false, width, off as usize, v);
        v
    }

    fn config_write(&self, width: u8, off: u64, v: u64) {
        self.log_access(true, true, width, off as usize, v);
        if self.faults.config_stuck.load(Ordering::Acquire) {
            return;
        }
        match off {
            PCI_COMMAND => {
                // Once this returns, no descriptor is in progress; with bus
                // mastering off none starts.
                let _exec = self.exec.lock().unwrap_or_else(PoisonError::into_inner);
                self.command.store(v as u16, Ordering::Release);
            }
            o if o == PCIE_CAP + spec::PCI_EXP_DEVCTL => {
                let sticky = if self.cfg.sticky_relaxed_ordering {
                    spec::PCI_EXP_DEVCTL_RELAX_EN
                } else {
                    0
                };
                self.devctl.store(v as u16 | sticky, Ordering::Release)
            }
            o if o == spec::CHANERR_INT
                && width == 32
                && self.has_chanerr_int()
                && !self.cfg.sticky_chanerr_int =>
            {
                self.chanerr_int.fetch_and(!(v as u32), Ordering::AcqRel);
            }
            _ => {}
        }
    }

    /// A function-level reset: waits for the descriptor in progress, then
    /// puts configuration space (bus mastering off) and the channel's
    /// registers back to their reset values; the device thread resets its
    /// own state next.
    fn function_reset(&self) -> bool {
        if !self.cfg.function_reset || self.faults.config_stuck.load(Ordering::Acquire) {
            return false;
        }
        let _exec = self.exec.lock().unwrap_or_else(PoisonError::into_inner);
        self.command.store(0, Ordering::Release);
        self.devctl.store(POWER_ON_DEVCTL, Ordering::Release);
        self.chanerr_int.store(0, Ordering::Release);
        self.chanerr.store(0, Ordering::Release);
        self.chanctrl.store(0, Ordering::Release);
        self.chainaddr.store(0, Ordering::Release);
        self.chancmp.store(0, Ordering::Release);
        self.dmacount.store(0, Ordering::Release);
        self.chancmd.store(0, Ordering::Release);
        self.chansts.store(chansts::IDLE, Ordering::Release);
        self.flr.store(true, Ordering::Release);
        self.function_resets.fetch_add(1, Ordering::Relaxed);
        drop(_exec);
        self.wake();
        true
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
        let (state, err) = match cfg.power_on {
            PowerOn::Idle => (chansts::IDLE, 0),
            PowerOn::Halted(bits) => (chansts::HALTED, bits),
            PowerOn::Armed => (chansts::ARMED, 0),
        };
        let latched = if spec::has_chanerr_int(cfg.cbver, cfg.device_id) {
            err
        } else {
            0
        };
        let shared = Arc::new(Shared {
            id,
            cfg,
            map,
            genctrl: AtomicU8::new(0),
            intrctrl: AtomicU8::new(0),
            chanctrl: AtomicU16::new(0),
            chancmd: AtomicU8::new(0),
            dmacount: AtomicU16::new(0),
            chansts: AtomicU64::new(state),
            chainaddr: AtomicU64::new(0),
            chancmp: AtomicU64::new(0),
            chanerr: AtomicU32::new(err),
            chanerrmask: AtomicU32::new(0),
            chanerr_int: AtomicU32::new(latched),
            command: AtomicU16::new(POWER_ON_COMMAND),
            devctl: AtomicU16::new(POWER_ON_DEVCTL),
            exec: Mutex::new(()),
            flr: AtomicBool::new(false),
            rejected_writes: AtomicU64::new(0),
            function_resets: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            doorbells: AtomicU64::new(0),
            descriptors: AtomicU64::new(0),
            nulls: AtomicU64::new(0),
            completions: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            halts: AtomicU64::new(0),
            started: AtomicU64::new(0),
            mismatches: AtomicU64::new(0),
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
                Device::new(s.clone(), state).run();
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

    /// The configuration space seam of this device.
    pub fn pci_config(&self) -> ModelPci {
        ModelPci {
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

    /// Whether bus mastering is on: the device may reach memory.
    pub fn bus_master(&self) -> bool {
        self.shared.bus_master()
    }

    /// CHANERR_INT as the device holds it (0 on a function without it).
    pub fn chanerr_int(&self) -> u32 {
        self.shared.chanerr_int.load(Ordering::Acquire)
    }

    /// Fault injection.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// With [`Faults::manual`] on: has the device take one step (a held
    /// completion written, else one descriptor run) and waits until it has.
    /// Returns whether there was a step to take. The device thread takes
    /// it; the caller's view of memory and registers afterwards is the
    /// device's.
    pub fn step(&self) -> bool {
        let f = &self.shared.faults;
        let n = f.step_req.fetch_add(1, Ordering::AcqRel) + 1;
        self.shared.wake();
        while f.step_ack.load(Ordering::Acquire) != n {
            if !self.thread_running() {
                return false;
            }
            std::thread::yield_now();
        }
        f.step_did.load(Ordering::Acquire)
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
            rejected_writes: l(&s.rejected_writes),
            function_resets: l(&s.function_resets),
            started: l(&s.started),
            prefetch_mismatches: l(&s.mismatches),
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

/// The configuration space seam of a model device.
pub struct ModelPci {
    shared: Arc<Shared>,
}

impl PciConfig for ModelPci {
    fn read16(&self, off: u64) -> u16 {
        self.shared.config_read(16, off) as u16
    }
    fn read32(&self, off: u64) -> u32 {
        self.shared.config_read(32, off) as u32
    }
    fn write16(&self, off: u64, v: u16) {
        self.shared.config_write(16, off, v as u64)
    }
    fn write32(&self, off: u64, v: u32) {
        self.shared.config_write(32, off, v as u64)
    }
    fn function_reset(&self) -> bool {
        self.shared.function_reset()
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
    /// Descriptors handed over (up to DMACOUNT) and read ahead, in chain
    /// order, with their 64 bytes as read then.
    prefetched: VecDeque<(u64, [u8; spec::DESC_SIZE])>,
    /// Writes done but not visible yet (held completions), in order.
    pending: VecDeque<Pending>,
    /// Descriptors run since the device started.
    executed: u64,
}

/// A write the device has made but not yet made visible
/// ([`Faults::hold_completions`]).
enum Pending {
    /// A copy's bytes, read from the source when the descriptor ran.
    Copy { dst: u64, data: Vec<u8> },
    /// A fill.
    Fill { dst: u64, len: usize, pattern: u64 },
    /// A completion write, held since `at` descriptors had run and CHANSTS
    /// had been read `reads` times.
    Word { value: u64, at: u64, reads: u64 },
}

/// Why a descriptor could not be executed: CHANERR bits.
type Fault = u32;

/// Writes `len` bytes of the 64-bit `pattern` at `to`.
///
/// # Safety
///
/// `to..to + len` is writable memory inside a window of the device's
/// address space, held (an [`IovaGuard`]) while this runs.
unsafe fn fill(to: *mut u8, len: usize, pattern: u64) {
    let pattern = pattern.to_le_bytes();
    if pattern.iter().all(|&b| b == pattern[0]) {
        // SAFETY: `len` bytes inside the mapped destination (the caller's
        // contract).
        unsafe { std::ptr::write_bytes(to, pattern[0], len) };
    } else {
        for i in 0..len {
            // SAFETY: i < len, inside the mapped destination.
            unsafe { to.add(i).write(pattern[i % 8]) };
        }
    }
}

/// The 64 bytes of the descriptor at `p`.
///
/// # Safety
///
/// `p` is 64 readable, 8-aligned bytes inside a window held by the caller.
unsafe fn read_descriptor(p: *const u8) -> [u8; spec::DESC_SIZE] {
    let mut d = [0u8; spec::DESC_SIZE];
    for (k, chunk) in d.chunks_exact_mut(8).enumerate() {
        // SAFETY: k < 8, inside the 64 bytes (the caller's contract);
        // volatile: the driver writes descriptors with volatile stores.
        let v = unsafe { p.add(8 * k).cast::<u64>().read_volatile() };
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    d
}

fn field32(d: &[u8; spec::DESC_SIZE], off: usize) -> u32 {
    u32::from_le_bytes(d[off..off + 4].try_into().expect("4 bytes"))
}

fn field64(d: &[u8; spec::DESC_SIZE], off: usize) -> u64 {
    u64::from_le_bytes(d[off..off + 8].try_into().expect("8 bytes"))
}

impl Device {
    fn new(s: Arc<Shared>, state: u64) -> Device {
        Device {
            s,
            count: 0,
            next: None,
            state,
            last: 0,
            last_written: 0,
            prefetched: VecDeque::new(),
            pending: VecDeque::new(),
            executed: 0,
        }
    }

    /// The channel's state after a reset: nothing fetched, IDLE, no
    /// completed descriptor (`state` HALTED when CHANERR_INT holds it).
    fn reset_state(&mut self, state: u64) {
        self.count = 0;
        self.next = None;
        self.last = 0;
        self.last_written = 0;
        self.state = state;
        self.prefetched.clear();
        self.publish();
    }

    /// Whether the device thread leaves `cmd` pending: a RESET that never
    /// completes ([`Faults::never_reset`]).
    fn ignores(&self, cmd: u8) -> bool {
        cmd == chancmd::RESET && self.s.faults.reset_stuck.load(Ordering::Acquire)
    }

    fn publish(&self) {
        self.s
            .chansts
            .store(self.last | self.state, Ordering::Release);
    }

    fn run(mut self) {
        // One reference for the thread's life, lent to every step (no
        // reference-count traffic per descriptor).
        let shared = Arc::clone(&self.s);
        let s = &*shared;
        let mut idle_since = Instant::now();
        loop {
            if self.s.stop.load(Ordering::Acquire) {
                return;
            }
            if self.s.flr.swap(false, Ordering::AcqRel) {
                // What the device still held is lost with the reset:
                // nothing lands after it.
                self.pending.clear();
                self.reset_state(chansts::IDLE);
            }
            let cmd = self.s.chancmd.load(Ordering::Acquire);
            if cmd != 0 && !self.ignores(cmd) {
                let _exec = s.exec.lock().unwrap_or_else(PoisonError::into_inner);
                // A function-level reset may have cleared it meanwhile.
                if self.s.chancmd.load(Ordering::Acquire) == cmd {
                    // Writes already made land before a command takes
                    // effect.
                    self.settle();
                    self.command(cmd);
                    if cmd == chancmd::ABORT {
                        self.prefetched.clear();
                    }
                }
                idle_since = Instant::now();
                continue;
            }
            let f = &s.faults;
            if f.manual.load(Ordering::Acquire) {
                let req = f.step_req.load(Ordering::Acquire);
                if req != f.step_ack.load(Ordering::Acquire) {
                    let did = self.act(s, true);
                    f.step_did.store(did, Ordering::Release);
                    f.step_ack.store(req, Ordering::Release);
                    idle_since = Instant::now();
                    continue;
                }
            } else if self.act(s, false) {
                idle_since = Instant::now();
                continue;
            } else if !self.pending.is_empty() {
                // A held completion waits for a CHANSTS read: keep looking.
                std::thread::yield_now();
                continue;
            }
            if idle_since.elapsed() < self.s.cfg.spin {
                std::hint::spin_loop();
                continue;
            }
            self.s.sleeping.store(true, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            let cmd = self.s.chancmd.load(Ordering::Acquire);
            let f = &self.s.faults;
            let asked = f.manual.load(Ordering::Acquire)
                && f.step_req.load(Ordering::Acquire) != f.step_ack.load(Ordering::Acquire);
            if !self.s.stop.load(Ordering::Acquire)
                && (cmd == 0 || self.ignores(cmd))
                && !self.s.flr.load(Ordering::Acquire)
                && !asked
                && !self.runnable()
            {
                std::thread::park_timeout(Duration::from_millis(200));
            }
            self.s.sleeping.store(false, Ordering::Relaxed);
        }
    }

    /// One step: a held completion that is due, else one descriptor;
    /// none when manual stepping is on and this is not a `stepping` call.
    /// Returns whether there was one.
    fn act(&mut self, s: &Shared, stepping: bool) -> bool {
        let _exec = s.exec.lock().unwrap_or_else(PoisonError::into_inner);
        // Bus mastering may have gone off meanwhile: a function that may
        // not reach memory neither writes nor fetches.
        if !s.bus_master() {
            return false;
        }
        let due = self.release_due();
        let run = !due && self.runnable();
        // Read after DMACOUNT (in `runnable`): a test that turns manual
        // stepping on before its doorbell gets every descriptor as a step.
        if !stepping && s.faults.manual.load(Ordering::Acquire) {
            return false;
        }
        if due {
            self.release(s, false);
        } else if run {
            self.step(s);
        }
        due || run
    }

    fn runnable(&self) -> bool {
        matches!(self.state, chansts::ACTIVE | chansts::IDLE)
            && self.s.bus_master()
            && !self.s.faults.stall.load(Ordering::Acquire)
            && self.count != self.s.dmacount.load(Ordering::Acquire)
    }

    fn command(&mut self, cmd: u8) {
        match cmd {
            chancmd::RESET => {
                let s = self.s.clone();
                s.chanerr.store(0, Ordering::Release);
                s.chanctrl.store(0, Ordering::Release);
                s.chainaddr.store(0, Ordering::Release);
                s.chancmp.store(0, Ordering::Release);
                s.dmacount.store(0, Ordering::Release);
                s.faults.stall.store(false, Ordering::Release);
                // An error latched in CHANERR_INT keeps the channel halted
                // until it is cleared (SPDK and Linux clear it first).
                let latched = s.chanerr_int.load(Ordering::Acquire) != 0;
                self.reset_state(if latched {
                    chansts::HALTED
                } else {
                    chansts::IDLE
                });
                s.resets.fetch_add(1, Ordering::Relaxed);
            }
            chancmd::SUSPEND if self.s.cfg.ignore_suspend => {}
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
        // Self-clearing once done (RESET is what the driver waits on); a
        // command written meanwhile is kept for the next turn, not lost.
        let _ = self
            .s
            .chancmd
            .compare_exchange(cmd, 0, Ordering::AcqRel, Ordering::Acquire);
    }

    fn halt(&mut self, bits: u32) {
        let s = self.s.clone();
        s.raise(bits);
        self.state = chansts::HALTED;
        self.prefetched.clear();
        let map = s.map.clone();
        let g = map.read();
        // Writes made before the error land first.
        self.release_in(&g, true);
        // With ERR_COMPLETION_EN the completion word says HALTED and names
        // the last completed descriptor (Linux's `ioat_eh` reads it), unless
        // the model is told to lose that write.
        if s.chanctrl.load(Ordering::Acquire) & chanctrl::ERR_COMPLETION_EN != 0
            && !s.cfg.silent_halt
        {
            let _ = self.write_completion(&g, self.last | chansts::HALTED);
        }
        self.publish();
        // Counted last: whoever waits for the count sees the registers.
        s.halts.fetch_add(1, Ordering::Release);
    }

    /// Whether the oldest held completion is due: its hold is over, or
    /// CHANSTS was read after it.
    fn release_due(&self) -> bool {
        let f = &self.s.faults;
        let hold = f.hold.load(Ordering::Acquire);
        self.pending.iter().any(|p| match p {
            Pending::Word { at, reads, .. } => {
                hold == 0
                    || self.executed - at >= hold
                    || f.status_reads.load(Ordering::Acquire) > *reads
            }
            _ => false,
        })
    }

    /// Makes held writes visible: through the oldest held completion, or
    /// (`all`) every one.
    fn release(&mut self, s: &Shared, all: bool) {
        let g = s.map.read();
        self.release_in(&g, all);
    }

    fn release_in(&mut self, g: &IovaGuard, all: bool) {
        while let Some(p) = self.pending.pop_front() {
            let ok = match p {
                Pending::Copy { dst, data } => match g.resolve(dst, data.len() as u64) {
                    Some(to) => {
                        // SAFETY: `data.len()` bytes inside a window held
                        // by `g`; `data` is the device's own buffer.
                        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), to, data.len()) };
                        true
                    }
                    None => false,
                },
                Pending::Fill { dst, len, pattern } => match g.resolve(dst, len as u64) {
                    Some(to) => {
                        // SAFETY: `len` bytes inside a window held by `g`.
                        unsafe { fill(to, len, pattern) };
                        true
                    }
                    None => false,
                },
                Pending::Word { value, .. } => {
                    let ok = self.write_completion(g, value).is_ok();
                    if !all {
                        if !ok {
                            self.s
                                .chanerr
                                .fetch_or(chanerr::COMPLETION_ADDR, Ordering::AcqRel);
                        }
                        return;
                    }
                    ok
                }
            };
            if !ok {
                // Unmapped since the descriptor ran: the write is lost.
                self.s
                    .chanerr
                    .fetch_or(chanerr::WRITE_DATA, Ordering::AcqRel);
            }
        }
    }

    /// Makes every held write visible (before a command, a halt).
    fn settle(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        if self.s.bus_master() {
            let s = Arc::clone(&self.s);
            self.release(&s, true);
        } else {
            // A function that may not reach memory writes nothing: what it
            // held is lost.
            self.pending.clear();
        }
    }

    fn write_completion(&mut self, g: &IovaGuard, v: u64) -> Result<(), Fault> {
        let cmp = self.s.chancmp.load(Ordering::Acquire);
        if !cmp.is_multiple_of(spec::CHANCMP_ALIGN as u64) {
            return Err(chanerr::COMPLETION_ADDR);
        }
        let p = g.resolve(cmp, 8).ok_or(chanerr::COMPLETION_ADDR)?;
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
        // space held by `g`, 8-aligned (windows start on page boundaries
        // and CHANCMP is 8-aligned); the driver reads it only atomically.
        unsafe { AtomicU64::from_ptr(p.cast::<u64>()) }.store(value, Ordering::Release);
        self.last_written = v;
        self.s.completions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Fetches and executes one descriptor, holding the IOVA map
    /// throughout (an unmap waits for it); halts on an error.
    fn step(&mut self, s: &Shared) {
        let result = {
            let g = s.map.read();
            self.step_in(s, &g)
        };
        if let Err(bits) = result {
            self.halt(bits);
        }
    }

    /// Reads ahead every descriptor handed over (up to DMACOUNT) from
    /// `addr` on that is not read yet, as a device prefetches; stops at an
    /// address it cannot read (the error comes when the chain gets there).
    fn prefetch(&mut self, g: &IovaGuard, addr: u64) {
        if self.prefetched.front().is_some_and(|(a, _)| *a != addr) {
            self.prefetched.clear();
        }
        let handed = self
            .s
            .dmacount
            .load(Ordering::Acquire)
            .wrapping_sub(self.count) as usize;
        while self.prefetched.len() < handed {
            let at = match self.prefetched.back() {
                Some((_, d)) => field64(d, desc::NEXT),
                None => addr,
            };
            if !at.is_multiple_of(spec::DESC_SIZE as u64) {
                break;
            }
            let Some(p) = g.resolve(at, spec::DESC_SIZE as u64) else {
                break;
            };
            // SAFETY: 64 bytes inside a window `g` holds, 64-aligned.
            let d = unsafe { read_descriptor(p) };
            self.prefetched.push_back((at, d));
        }
    }

    fn step_in(&mut self, s: &Shared, g: &IovaGuard) -> Result<(), Fault> {
        let (addr, first) = match self.next {
            Some(a) => (a, false),
            None => (self.s.chainaddr.load(Ordering::Acquire), true),
        };
        if !addr.is_multiple_of(spec::DESC_SIZE as u64) {
            return Err(if first {
                chanerr::CHAIN_ADDR_VALUE
            } else {
                chanerr::NEXT_DESC_ALIGN
            });
        }
        let Some(p) = g.resolve(addr, spec::DESC_SIZE as u64) else {
            return Err(if first {
                chanerr::CHAIN_ADDR_VALUE
            } else {
                chanerr::NEXT_DESC_ADDR
            });
        };
        self.prefetch(g, addr);
        // SAFETY: 64 bytes inside a window `g` holds, 64-aligned; the
        // driver finished writing them before the DMACOUNT store this
        // thread acquired.
        let now = unsafe { read_descriptor(p) };
        // The device runs what it read ahead; a slot rewritten since was
        // written while the device could have had it.
        let d = match self.prefetched.pop_front() {
            Some((a, d)) if a == addr => {
                if d != now {
                    self.s.mismatches.fetch_add(1, Ordering::Relaxed);
                }
                d
            }
            _ => now,
        };
        let (size, ctl) = (field32(&d, desc::SIZE), field32(&d, desc::CONTROL));
        let (src, dst, next) = (
            field64(&d, desc::SRC),
            field64(&d, desc::DST),
            field64(&d, desc::NEXT),
        );
        let f = &s.faults;
        let held = f.hold.load(Ordering::Acquire) > 0;
        self.count = self.count.wrapping_add(1);
        self.state = chansts::ACTIVE;
        self.s.started.fetch_add(1, Ordering::Relaxed);
        if held {
            // CHANSTS names the descriptor as soon as it starts.
            self.s.chansts.store(addr | self.state, Ordering::Release);
        }
        let abort = self.s.chanctrl.load(Ordering::Acquire) & chanctrl::ANY_ERR_ABORT_EN != 0;
        if let Err(bits) = self.execute(g, size, ctl, src, dst, held) {
            if abort {
                return Err(bits);
            }
            // Without ANY_ERR_ABORT_EN the error is latched in CHANERR and
            // the descriptor counts as done, without its transfer.
            self.s.raise(bits);
        }
        self.next = Some(next);
        if ctl & control::NULL == 0 || !self.s.cfg.hide_null_address {
            self.last = addr;
        }
        self.executed += 1;
        if self.count == self.s.dmacount.load(Ordering::Acquire) {
            self.state = chansts::IDLE;
        }
        if ctl & control::COMPLETION_UPDATE != 0 {
            let value = self.last | self.state;
            if held {
                self.pending.push_back(Pending::Word {
                    value,
                    at: self.executed,
                    reads: f.status_reads.load(Ordering::Acquire),
                });
            } else if let Err(bits) = self.write_completion(g, value) {
                if abort {
                    return Err(bits);
                }
                self.s.raise(bits);
            }
        }
        // The completion word first, then CHANSTS: a CHANSTS that shows a
        // descriptor done never precedes its completion write (unless held).
        if !self.s.cfg.quiet_status || ctl & control::COMPLETION_UPDATE != 0 {
            self.publish();
        }
        self.s.descriptors.fetch_add(1, Ordering::Release);
        Ok(())
    }

    fn execute(
        &mut self,
        g: &IovaGuard,
        size: u32,
        ctl: u32,
        src: u64,
        dst: u64,
        defer: bool,
    ) -> Result<(), Fault> {
        // A null descriptor of size 0 is a length error too.
        if size == 0 {
            return Err(chanerr::LENGTH);
        }
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
        if size as u64 > max {
            return Err(chanerr::LENGTH);
        }
        let slow = f.slow_ns.load(Ordering::Acquire);
        if slow > 0 {
            // A long transfer: the IOVA map stays held meanwhile.
            std::thread::sleep(Duration::from_nanos(slow));
        }
        let rate = f.rate.load(Ordering::Acquire);
        if rate > 0 {
            let ns = size as u128 * 1_000_000_000 / rate as u128;
            std::thread::sleep(Duration::from_nanos(ns as u64));
        }
        let len = size as usize;
        let to = g.resolve(dst, size as u64).ok_or(chanerr::DEST_ADDR)?;
        match control::op(ctl) {
            op::COPY => {
                let from = g.resolve(src, size as u64).ok_or(chanerr::SRC_ADDR)?;
                if defer {
                    let mut data = vec![0u8; len];
                    // SAFETY: `len` bytes inside a window `g` holds; the
                    // submitter keeps the source valid while the task is
                    // in flight (the accel contract).
                    unsafe { std::ptr::copy(from, data.as_mut_ptr(), len) };
                    self.pending.push_back(Pending::Copy { dst, data });
                } else {
                    // SAFETY: both ranges lie inside windows `g` holds
                    // (no unmap can remove them before this returns); the
                    // submitter keeps them valid and untouched while the
                    // task is in flight (the accel contract). `copy`
                    // tolerates overlap, which a device would not promise
                    // either.
                    unsafe { std::ptr::copy(from, to, len) };
                }
            }
            op::FILL => {
                if defer {
                    self.pending.push_back(Pending::Fill {
                        dst,
                        len,
                        pattern: src,
                    });
                } else {
                    // SAFETY: `len` bytes inside the mapped destination,
                    // held by `g`.
                    unsafe { fill(to, len, src) };
                }
            }
            _ => return Err(chanerr::CONTROL),
        }
        Ok(())
    }
}
