//! The DSA work-queue driver: accel tasks turned into DSA descriptors,
//! submitted through a work queue's portal, and completed from their
//! completion records. It sees the device only through the
//! [`WorkQueue`] seam (one 64-byte descriptor per portal write) and
//! [`DmaMemory`](crate::env::dma::DmaMemory) (memory the device reaches,
//! and the address it knows a buffer by), so it runs unchanged on the
//! kernel's idxd driver, on VFIO and on the device model.
//!
//! Thread: a [`Channel`] is made on whichever thread opens the work queue
//! and from then on used by one thread at a time: the reactor whose accel
//! channel holds it. It never blocks: it polls completion records.
//!
//! Layout (DSA specification 1.0+, section 8.1 descriptors, 8.2
//! completion records; see `spec.rs`): the channel owns `units` submission
//! slots in one DMA buffer. Each slot holds the completion record of a
//! batch descriptor, an array of up to `max_batch` work descriptors
//! (64-byte aligned, the batch's descriptor list) and a completion record
//! (32 bytes, 32-byte aligned) for each. A submission gathers up to
//! `max_batch` descriptors into one slot: one descriptor goes to the portal
//! as it is (the specification forbids a batch of one, "descriptor count
//! out of range"), two or more are written to the slot's list and one
//! batch descriptor naming the list goes to the portal. So a framework
//! batch costs one portal write.
//!
//! Each request (one accel task) has at most one descriptor in flight:
//! a task longer than the work queue's transfer limit, one whose buffers
//! are not contiguous in the device's address space, or a crc32c over
//! several vectors runs as a sequence of descriptors, each sent once the
//! previous one completed (the CRC of one is the seed of the next). A
//! piece that completes partially (a page fault without block-on-fault:
//! status 0x03, "bytes completed" and the CRC so far in the record) is
//! resumed from where it stopped, or failed when resumption is off or the
//! request made no progress in [`DriverConfig::max_stalls`] attempts; it is
//! never reported done.
//!
//! Completion: every descriptor asks for a completion record (flags
//! "completion record address valid" and "request completion record").
//! The poll reads the status byte of each slot in flight (a batch's own
//! record, written after every descriptor of the batch completed), and
//! only once it is non-zero, after an acquire fence, the record's other
//! fields and the records of the batch's descriptors (status byte first,
//! each). A descriptor whose record is still zero when its batch
//! completed never ran (a batch whose list could not be read, status
//! 0x06): it is sent again, counted as a stall.
//!
//! Work queues: a dedicated WQ takes MOVDIR64B, which cannot tell the
//! submitter that the queue is full (the descriptor is dropped), so the
//! channel never has more slots in flight than the WQ has entries. A
//! shared WQ takes ENQCMD, which answers "retry" when the queue is full:
//! the slot stays built and is offered again at the next poll, with a
//! back-off that doubles (up to 64 polls) while the device keeps
//! refusing, and its requests fail with [`Status::EngineError`] when it
//! was refused for [`DriverConfig::retry_timeout`] (the device never saw
//! them). Nothing spins on the portal.
//!
//! A slot in flight with no completion for [`DriverConfig::timeout`]
//! breaks the channel: its requests stay held, never reported (the device
//! may still write their buffers), and later requests fail. Userspace
//! cannot reset a kernel-owned work queue; see docs/dsa.md.

use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::Duration;

use super::portal::{WorkQueue, WqMode};
use super::spec::{self, COMPLETION_SIZE, DESC_SIZE, Descriptor, comp, flags, opcode, status};
use crate::accel::{Completion, IoVec, Opcode, Placement, Sources, Status, Task, TaskId, bump};
use crate::env::dma::{DmaBuffer, MapperRegistration, WindowCache};
use crate::env::tsc;

/// Whether a failed status means the descriptor itself was malformed
/// (unsupported opcode to misaligned address, less the completion-record
/// translation failure, which is the device's).
fn is_invalid(code: u8) -> bool {
    matches!(code, status::BAD_OPCODE..=status::INT_HANDLE_INVAL)
        || matches!(code, status::CRA_ALIGN | status::ADDR_ALIGN)
}

/// How a channel is run.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// Most descriptors per batch (also capped by the WQ's limit).
    pub max_batch: u32,
    /// Most submission slots (also capped by a dedicated WQ's size).
    pub units: u32,
    /// How long a slot may be in flight before the channel gives up on
    /// the device.
    pub timeout: Duration,
    /// How long a shared WQ may keep answering "retry" to one slot before
    /// its requests fail.
    pub retry_timeout: Duration,
    /// Resume a piece that completed partially (a page fault) from the
    /// bytes completed; off: fail it.
    pub resume_faults: bool,
    /// Attempts a request may make without progress (faults at its first
    /// byte, descriptors that never ran) before it fails.
    pub max_stalls: u32,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            max_batch: 256,
            units: 64,
            timeout: Duration::from_secs(5),
            retry_timeout: Duration::from_secs(1),
            resume_faults: true,
            max_stalls: 8,
        }
    }
}

/// The longest task the module takes (it splits at the WQ's limit).
pub const MAX_REQUEST: usize = 1 << 30;

/// A work queue as a backend opened it.
pub struct Hardware {
    /// The work queue: its portal, what it is, how it reaches memory.
    pub wq: Arc<dyn WorkQueue>,
    /// Whatever must live as long as the channel (a mapped portal, a
    /// model, the registration of its mapper).
    pub keep: Option<Box<dyn std::any::Any + Send>>,
}

impl Hardware {
    /// Keeps `later` alive with the work queue too, dropped after what it
    /// already keeps (the device first, then, say, the registration of the
    /// mapper that keeps its memory mapped).
    pub fn keep_also(&mut self, later: impl std::any::Any + Send) {
        self.keep = Some(Box::new((self.keep.take(), later)));
    }

    /// Each of `hardware`, keeping `mapping` (the registration of the
    /// mapper that makes DMA memory visible to it) after what it already
    /// keeps: the memory stays mapped while any of them is in use.
    pub fn all_keeping(
        hardware: impl IntoIterator<Item = Hardware>,
        mapping: MapperRegistration,
    ) -> Vec<Hardware> {
        let mapping = Arc::new(mapping);
        hardware
            .into_iter()
            .map(|mut h| {
                h.keep_also(mapping.clone());
                h
            })
            .collect()
    }
}

/// The DSA opcode an accel opcode runs as.
pub fn dsa_opcode(op: Opcode) -> u8 {
    match op {
        Opcode::Copy => opcode::MEMMOVE,
        Opcode::Fill => opcode::MEMFILL,
        Opcode::Compare => opcode::COMPARE,
        Opcode::Dualcast => opcode::DUALCAST,
        Opcode::Crc32c => opcode::CRCGEN,
        Opcode::CopyCrc32c => opcode::COPY_CRC,
    }
}

/// Why a channel could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// A WQ of no entries or no transfer size.
    #[error("the work queue has {0}: it cannot take descriptors")]
    Unusable(&'static str),
    /// The slots could not be allocated.
    #[error("cannot allocate the descriptor slots: {0}")]
    Memory(String),
}

/// What one channel has done, written by its thread and read by any.
#[derive(Debug, Default)]
pub struct DriverCounters {
    /// Work descriptors written (batch descriptors not included).
    pub descriptors: AtomicU64,
    /// Portal writes accepted (MOVDIR64B, or ENQCMD that did not answer
    /// retry): one per slot.
    pub portal_writes: AtomicU64,
    /// Batch descriptors among them.
    pub batches: AtomicU64,
    /// ENQCMD answers of "retry".
    pub retries: AtomicU64,
    /// Requests completed with success (a miscompare included).
    pub completed: AtomicU64,
    /// Requests failed with an engine error.
    pub failed: AtomicU64,
    /// Requests refused (no device address, a descriptor error).
    pub invalid: AtomicU64,
    /// Partial completions (page faults) seen.
    pub page_faults: AtomicU64,
    /// Pieces sent again from where a partial completion stopped.
    pub resumed: AtomicU64,
    /// Descriptors of a completed batch that never ran.
    pub not_run: AtomicU64,
    /// Faulting pages touched before a resumption (shared virtual
    /// addressing).
    pub touched: AtomicU64,
    /// Slots that timed out.
    pub timeouts: AtomicU64,
}

/// One accel task as the driver keeps it until it completes: a cursor
/// over its bytes.
#[derive(Debug, Clone, Copy)]
struct Request {
    id: TaskId,
    op: Opcode,
    fill: u8,
    cache: bool,
    dst: usize,
    dst2: usize,
    src: usize,
    src2: usize,
    len: usize,
    /// Sources of crc32c / copy_crc32c: several (`iovs`, `iovcnt`) or the
    /// one segment `src`/`len`.
    iovs: *const IoVec,
    iovcnt: usize,
    /// Bytes done.
    done: usize,
    /// Source segment and offset in it (crc32c, copy_crc32c).
    seg: usize,
    seg_off: usize,
    /// The CRC so far.
    crc: u32,
    /// Attempts without progress.
    stalls: u32,
}

// SAFETY: a Request holds raw pointers into memory its submitter promised
// stays valid until the task completes (the framework's `Task` contract);
// the channel that holds it is used by one thread at a time.
unsafe impl Send for Request {}

/// One descriptor of a slot: the request it serves and the piece's length.
#[derive(Debug, Clone, Copy)]
struct Piece {
    req: u32,
    len: usize,
}

/// A submission slot's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Free,
    /// Built, refused by the shared WQ ("retry"): offered again.
    Refused,
    InFlight,
}

struct Slot {
    state: SlotState,
    pieces: Vec<Piece>,
    /// The descriptor for the portal (a batch descriptor, or the only
    /// work descriptor).
    desc: Descriptor,
    /// tsc when sent (or first refused).
    since: u64,
    /// Polls to skip before offering a refused slot again.
    skip: u32,
    backoff: u32,
}

/// A channel on one work queue.
pub struct Channel {
    hw: Hardware,
    name: String,
    dedicated: bool,
    max_transfer: u64,
    opcap: [u64; 4],
    cfg: DriverConfig,
    buf: ManuallyDrop<DmaBuffer>,
    slot_bytes: usize,
    batch_max: usize,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Slots sent or refused, oldest first.
    busy: VecDeque<u32>,
    /// Slots among them a shared WQ refused.
    refused: usize,
    reqs: Vec<Option<Request>>,
    free_reqs: Vec<u32>,
    /// Requests whose next piece waits for a slot, in order.
    ready: VecDeque<u32>,
    held: usize,
    windows: WindowCache,
    timeout_ticks: u64,
    retry_ticks: u64,
    broken: Option<String>,
    counters: Arc<DriverCounters>,
}

/// Offsets in a slot: the batch's completion record first (64 bytes
/// reserved), then the descriptor list, then the descriptors' records.
fn list_off(slot_bytes: usize, s: u32) -> usize {
    s as usize * slot_bytes + DESC_SIZE
}

impl Channel {
    /// A channel on `hw`: allocates its slots in memory the device reaches.
    pub fn start(hw: Hardware, cfg: DriverConfig) -> Result<Channel, StartError> {
        let info = hw.wq.info().clone();
        if info.size == 0 {
            return Err(StartError::Unusable("no entries"));
        }
        if info.max_transfer == 0 {
            return Err(StartError::Unusable("a transfer size limit of 0"));
        }
        let batch_max = if info.batches() {
            info.max_batch.min(cfg.max_batch.max(1)).max(1) as usize
        } else {
            1
        };
        let dedicated = info.mode == WqMode::Dedicated;
        let mut units = cfg.units.max(1);
        if dedicated {
            // MOVDIR64B cannot be refused: a descriptor beyond the WQ's
            // entries would be dropped.
            units = units.min(info.size);
        }
        let slot_bytes = DESC_SIZE + batch_max * (DESC_SIZE + COMPLETION_SIZE);
        let slot_bytes = slot_bytes.next_multiple_of(DESC_SIZE);
        let buf = hw
            .wq
            .memory()
            .alloc(slot_bytes * units as usize)
            .map_err(StartError::Memory)?;
        let slots = (0..units)
            .map(|_| Slot {
                state: SlotState::Free,
                pieces: Vec::with_capacity(batch_max),
                desc: Descriptor::noop(),
                since: 0,
                skip: 0,
                backoff: 0,
            })
            .collect();
        Ok(Channel {
            name: info.name.clone(),
            dedicated,
            // A descriptor's transfer size is 32 bits.
            max_transfer: info.max_transfer.min(1 << 31),
            opcap: info.opcap,
            timeout_ticks: tsc::ns_to_ticks(cfg.timeout.as_nanos() as u64),
            retry_ticks: tsc::ns_to_ticks(cfg.retry_timeout.as_nanos() as u64),
            hw,
            cfg,
            buf: ManuallyDrop::new(buf),
            slot_bytes,
            batch_max,
            slots,
            free: (0..units).rev().collect(),
            busy: VecDeque::with_capacity(units as usize),
            refused: 0,
            reqs: Vec::new(),
            free_reqs: Vec::new(),
            ready: VecDeque::new(),
            held: 0,
            windows: WindowCache::default(),
            broken: None,
            counters: Arc::new(DriverCounters::default()),
        })
    }

    /// The work queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the work queue's device runs `op`.
    pub fn supports(&self, op: Opcode) -> bool {
        spec::opcap_has(&self.opcap, dsa_opcode(op))
    }

    /// Descriptors per batch this channel sends (1: no batches).
    pub fn batch_max(&self) -> usize {
        self.batch_max
    }

    /// Submission slots.
    pub fn units(&self) -> usize {
        self.slots.len()
    }

    /// The WQ's transfer limit.
    pub fn max_transfer(&self) -> u64 {
        self.max_transfer
    }

    /// Whether the WQ is dedicated.
    pub fn dedicated(&self) -> bool {
        self.dedicated
    }

    /// Its counters.
    pub fn counters(&self) -> &Arc<DriverCounters> {
        &self.counters
    }

    /// Why the channel stopped working, if it did.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Requests the channel holds.
    pub fn in_flight(&self) -> usize {
        self.held
    }

    #[inline]
    fn cr_off(&self, s: u32, k: usize) -> usize {
        list_off(self.slot_bytes, s) + self.batch_max * DESC_SIZE + k * COMPLETION_SIZE
    }

    #[inline]
    fn batch_cr_off(&self, s: u32) -> usize {
        s as usize * self.slot_bytes
    }

    /// The device address of `addr` and how many of the next `len` bytes
    /// are contiguous there.
    #[inline]
    fn translate(&mut self, addr: usize, len: usize) -> Option<(u64, usize)> {
        self.windows.translate(self.hw.wq.memory(), addr, len)
    }

    /// Takes `tasks`, task `k` named `first + k`, and sends their first
    /// descriptors (one portal write per `max_batch` of them).
    pub fn submit(&mut self, tasks: &[Task], first: TaskId, done: &mut Vec<(TaskId, Completion)>) {
        for (k, t) in tasks.iter().enumerate() {
            let id = first + k as TaskId;
            if self.broken.is_some() {
                bump(&self.counters.failed, 1);
                done.push((id, Completion::with(Status::EngineError)));
                continue;
            }
            if !self.supports(t.op) {
                bump(&self.counters.invalid, 1);
                done.push((id, Completion::with(Status::InvalidArgument)));
                continue;
            }
            let (iovs, iovcnt) = match t.sources() {
                Sources::Many(m) if matches!(t.op, Opcode::Crc32c | Opcode::CopyCrc32c) => {
                    (m.as_ptr(), m.len())
                }
                _ => (std::ptr::null(), 0),
            };
            let r = Request {
                id,
                op: t.op,
                fill: t.fill,
                cache: t.placement == Placement::Cache,
                dst: t.dst as usize,
                dst2: t.dst2 as usize,
                src: t.src as usize,
                src2: t.src2 as usize,
                len: t.len,
                iovs,
                iovcnt,
                done: 0,
                seg: 0,
                seg_off: 0,
                crc: t.seed,
                stalls: 0,
            };
            let i = match self.free_reqs.pop() {
                Some(i) => {
                    self.reqs[i as usize] = Some(r);
                    i
                }
                None => {
                    self.reqs.push(Some(r));
                    (self.reqs.len() - 1) as u32
                }
            };
            self.held += 1;
            self.ready.push_back(i);
        }
        self.pump(done);
    }

    /// Reports finished requests; returns how many it added to `done`.
    pub fn poll(&mut self, done: &mut Vec<(TaskId, Completion)>) -> usize {
        let before = done.len();
        if self.broken.is_some() {
            return 0;
        }
        let now = tsc::now();
        let mut i = 0;
        while i < self.busy.len() {
            let s = self.busy[i];
            let slot = &self.slots[s as usize];
            if slot.state == SlotState::Refused {
                i += 1;
                continue;
            }
            if self.retire(s, done) {
                self.busy.remove(i);
                self.slots[s as usize].state = SlotState::Free;
                self.free.push(s);
            } else {
                if now.wrapping_sub(self.slots[s as usize].since) > self.timeout_ticks {
                    self.time_out(s);
                    return done.len() - before;
                }
                i += 1;
            }
        }
        self.pump(done);
        done.len() - before
    }

    /// The device stopped answering: the channel breaks, keeping what it
    /// holds (the device may still write those buffers).
    fn time_out(&mut self, s: u32) {
        bump(&self.counters.timeouts, 1);
        let device = self
            .hw
            .wq
            .device_error()
            .map(|e| format!(" (the device reports: {e})"))
            .unwrap_or_default();
        let why = format!(
            "dsa {}: a submission of {} descriptors had no completion record after {:?}{device}; \
             the channel's {} requests are held, never reported, and its later requests fail",
            self.name,
            self.slots[s as usize].pieces.len(),
            self.cfg.timeout,
            self.held
        );
        tracing::error!("{why}");
        self.broken = Some(why);
    }

    /// Offers refused slots again (after their back-off) and sends the
    /// ready requests' next pieces, as many slots as are free.
    fn pump(&mut self, done: &mut Vec<(TaskId, Completion)>) {
        // Refused slots first, in order: a shared WQ that refuses one
        // refuses the rest too.
        let mut i = 0;
        while self.refused > 0 && i < self.busy.len() {
            let s = self.busy[i];
            i += 1;
            if self.slots[s as usize].state != SlotState::Refused {
                continue;
            }
            let slot = &mut self.slots[s as usize];
            if slot.skip > 0 {
                slot.skip -= 1;
                return;
            }
            if !self.send(s) {
                let slot = &self.slots[s as usize];
                if tsc::now().wrapping_sub(slot.since) > self.retry_ticks {
                    self.fail_refused(s, done);
                    i -= 1;
                    continue;
                }
                return;
            }
        }
        while !self.ready.is_empty() {
            let Some(s) = self.free.pop() else { return };
            if !self.build(s, done) {
                self.free.push(s);
                continue;
            }
            self.busy.push_back(s);
            if !self.send(s) {
                return;
            }
        }
    }

    /// Fails the requests of a slot the shared WQ kept refusing (the
    /// device never saw it) and frees it.
    fn fail_refused(&mut self, s: u32, done: &mut Vec<(TaskId, Completion)>) {
        tracing::warn!(
            "dsa {}: the shared work queue answered retry for {:?}; failing the {} requests of \
             the submission",
            self.name,
            self.cfg.retry_timeout,
            self.slots[s as usize].pieces.len()
        );
        let pieces = std::mem::take(&mut self.slots[s as usize].pieces);
        for p in &pieces {
            self.finish(p.req, Completion::with(Status::EngineError), done);
        }
        self.slots[s as usize].pieces = pieces;
        self.slots[s as usize].pieces.clear();
        self.slots[s as usize].state = SlotState::Free;
        self.refused -= 1;
        if let Some(at) = self.busy.iter().position(|&b| b == s) {
            self.busy.remove(at);
        }
        self.free.push(s);
    }

    /// Builds slot `s` from the ready requests: each one's next piece,
    /// up to the batch limit. Requests that cannot be built complete as
    /// refused. False when nothing was built.
    fn build(&mut self, s: u32, done: &mut Vec<(TaskId, Completion)>) -> bool {
        let mut pieces = std::mem::take(&mut self.slots[s as usize].pieces);
        pieces.clear();
        let list = list_off(self.slot_bytes, s);
        let mut one = Descriptor::noop();
        while pieces.len() < self.batch_max {
            let Some(r) = self.ready.pop_front() else {
                break;
            };
            let k = pieces.len();
            let cr = self.buf.iova() + self.cr_off(s, k) as u64;
            match self.describe(r, cr) {
                Some((desc, len)) => {
                    // The record's status byte must read 0 until the
                    // device writes it.
                    self.buf.write_u64(self.cr_off(s, k), 0);
                    if k == 0 {
                        one = desc;
                    }
                    self.put(list + k * DESC_SIZE, &desc);
                    pieces.push(Piece { req: r, len });
                }
                None => {
                    bump(&self.counters.invalid, 1);
                    self.finish(r, Completion::with(Status::InvalidArgument), done);
                }
            }
        }
        let n = pieces.len();
        if n == 0 {
            self.slots[s as usize].pieces = pieces;
            return false;
        }
        bump(&self.counters.descriptors, n as u64);
        let desc = if n == 1 {
            one
        } else {
            bump(&self.counters.batches, 1);
            self.buf.write_u64(self.batch_cr_off(s), 0);
            Descriptor::batch(self.buf.iova() + list as u64, n as u32)
                .with_completion(self.buf.iova() + self.batch_cr_off(s) as u64)
        };
        let slot = &mut self.slots[s as usize];
        slot.pieces = pieces;
        slot.desc = desc;
        slot.since = tsc::now();
        slot.skip = 0;
        slot.backoff = 0;
        true
    }

    /// One portal write of slot `s`'s descriptor. False when a shared WQ
    /// answered retry: the slot stays built, offered again after a
    /// back-off.
    fn send(&mut self, s: u32) -> bool {
        // The descriptor list and the zeroed records must be visible
        // before the device reads the descriptor (SPDK and DPDK issue an
        // sfence before MOVDIR64B / ENQCMD; the seam's hardware
        // implementation does too).
        fence(Ordering::Release);
        let desc = self.slots[s as usize].desc;
        // SAFETY: the descriptor names this channel's slot memory (list,
        // records: `self.buf`, freed only once nothing is in flight) and
        // buffers of requests the channel holds, which their owners get
        // back only once the descriptor's record says it finished.
        let r = unsafe { self.hw.wq.submit(&desc) };
        let slot = &mut self.slots[s as usize];
        match r {
            Ok(()) => {
                bump(&self.counters.portal_writes, 1);
                if slot.state == SlotState::Refused {
                    self.refused -= 1;
                }
                slot.state = SlotState::InFlight;
                slot.since = tsc::now();
                true
            }
            Err(_retry) => {
                bump(&self.counters.retries, 1);
                if slot.state != SlotState::Refused {
                    slot.since = tsc::now();
                    self.refused += 1;
                }
                slot.state = SlotState::Refused;
                slot.backoff = (slot.backoff * 2).clamp(1, 64);
                slot.skip = slot.backoff;
                false
            }
        }
    }

    /// The next piece of request `r`: its descriptor (completion record
    /// at `cr`) and length, or `None` when a buffer has no device address.
    fn describe(&mut self, r: u32, cr: u64) -> Option<(Descriptor, usize)> {
        let q = self.reqs[r as usize]?;
        let left = q.len - q.done;
        let mut n = left.min(self.max_transfer as usize);
        let mut d = match q.op {
            Opcode::Copy | Opcode::Dualcast => {
                let (src, sl) = self.translate(q.src + q.done, n)?;
                let (dst, dl) = self.translate(q.dst + q.done, n)?;
                n = n.min(sl).min(dl);
                if q.op == Opcode::Dualcast {
                    let (dst2, l2) = self.translate(q.dst2 + q.done, n)?;
                    n = n.min(l2);
                    Descriptor::dualcast(src, dst, dst2, n as u32)
                } else {
                    Descriptor::memmove(src, dst, n as u32)
                }
            }
            Opcode::Fill => {
                let (dst, dl) = self.translate(q.dst + q.done, n)?;
                n = n.min(dl);
                Descriptor::fill(spec::fill_pattern(q.fill), dst, n as u32)
            }
            Opcode::Compare => {
                let (a, al) = self.translate(q.src + q.done, n)?;
                let (b, bl) = self.translate(q.src2 + q.done, n)?;
                n = n.min(al).min(bl);
                Descriptor::compare(a, b, n as u32)
            }
            Opcode::Crc32c | Opcode::CopyCrc32c => {
                let seg = if q.iovcnt == 0 {
                    IoVec::new(q.src as *const u8, q.len)
                } else {
                    // SAFETY: the submitter promised the vector stays valid
                    // until the task completes; seg < iovcnt while bytes
                    // are left.
                    unsafe { *q.iovs.add(q.seg) }
                };
                n = n.min(seg.len - q.seg_off);
                let (src, sl) = self.translate(seg.base as usize + q.seg_off, n)?;
                n = n.min(sl);
                if q.op == Opcode::CopyCrc32c {
                    let (dst, dl) = self.translate(q.dst + q.done, n)?;
                    n = n.min(dl);
                    Descriptor::copy_crc32c(src, dst, n as u32, q.crc)
                } else {
                    Descriptor::crc32c(src, n as u32, q.crc)
                }
            }
        };
        if q.cache
            && matches!(
                q.op,
                Opcode::Copy | Opcode::Fill | Opcode::Dualcast | Opcode::CopyCrc32c
            )
        {
            d.set_flags(d.flags() | flags::CACHE_CONTROL);
        }
        Some((d.with_completion(cr), n))
    }

    /// Writes descriptor `d` at `off` of the slot memory (a batch's list).
    fn put(&self, off: usize, d: &Descriptor) {
        let b = d.to_bytes();
        for (w, c) in b.chunks_exact(8).enumerate() {
            let mut v = [0u8; 8];
            v.copy_from_slice(c);
            self.buf.write_u64(off + 8 * w, u64::from_le_bytes(v));
        }
    }

    /// Reads the status byte of the record at `off` (and nothing else).
    #[inline]
    fn status_at(&self, off: usize) -> u8 {
        (self.buf.read_u32(off + comp::STATUS) & 0xff) as u8
    }

    /// Retires slot `s` if the device finished it: false while its
    /// record's status byte is 0.
    fn retire(&mut self, s: u32, done: &mut Vec<(TaskId, Completion)>) -> bool {
        let n = self.slots[s as usize].pieces.len();
        let top = if n == 1 {
            self.cr_off(s, 0)
        } else {
            self.batch_cr_off(s)
        };
        let st = self.status_at(top);
        if st == status::NONE {
            return false;
        }
        // The record's other fields, and the records of the batch's
        // descriptors, only after the status byte said it was written.
        fence(Ordering::Acquire);
        let batch_code = status::code(st);
        let pieces = std::mem::take(&mut self.slots[s as usize].pieces);
        for (k, p) in pieces.iter().enumerate() {
            let off = self.cr_off(s, k);
            let st = self.status_at(off);
            if st == status::NONE {
                // Never ran: the batch stopped before it (its list could
                // not be read, or the batch itself was refused).
                bump(&self.counters.not_run, 1);
                if n > 1
                    && batch_code != status::BATCH_PAGE_FAULT
                    && batch_code != status::BATCH_FAIL
                    && batch_code != status::SUCCESS
                {
                    tracing::warn!(
                        "dsa {}: batch descriptor failed with status {batch_code:#04x}",
                        self.name
                    );
                    self.finish(p.req, Completion::with(Status::EngineError), done);
                } else {
                    self.stall(p.req, done);
                }
                continue;
            }
            fence(Ordering::Acquire);
            self.piece_done(p, st, off, done);
        }
        self.slots[s as usize].pieces = pieces;
        self.slots[s as usize].pieces.clear();
        true
    }

    /// A request made no progress: sent again, or failed after
    /// `max_stalls`.
    fn stall(&mut self, r: u32, done: &mut Vec<(TaskId, Completion)>) {
        let Some(q) = self.reqs[r as usize].as_mut() else {
            return;
        };
        q.stalls += 1;
        if q.stalls > self.cfg.max_stalls {
            tracing::warn!(
                "dsa {}: a {} request made no progress in {} attempts; it fails",
                self.name,
                q.op,
                self.cfg.max_stalls
            );
            self.finish(r, Completion::with(Status::EngineError), done);
        } else {
            self.ready.push_back(r);
        }
    }

    /// One piece's record said `st`: advance, resume, finish or fail its
    /// request.
    fn piece_done(&mut self, p: &Piece, st: u8, off: usize, done: &mut Vec<(TaskId, Completion)>) {
        let code = status::code(st);
        let word = self.buf.read_u32(off + comp::STATUS);
        let result = ((word >> 8) & 0xff) as u8;
        let bytes = self.buf.read_u32(off + comp::BYTES_COMPLETED) as usize;
        let crc = self.buf.read_u32(off + comp::CRC_VALUE);
        let Some(q) = self.reqs[p.req as usize] else {
            return;
        };
        match code {
            status::SUCCESS | status::SUCCESS_PRED => {
                if q.op == Opcode::Compare && result != 0 {
                    self.finish(p.req, Completion::with(Status::Miscompare), done);
                    return;
                }
                self.advance(p.req, p.len, crc, done);
            }
            status::PAGE_FAULT_NOBOF | status::PAGE_FAULT_IR => {
                bump(&self.counters.page_faults, 1);
                let fault = self.buf.read_u64(off + comp::FAULT_ADDR);
                // A move done downwards (result bit 0) completed its tail
                // first: the cursor cannot resume it.
                let reversed = q.op == Opcode::Copy && result & 1 != 0;
                if !self.cfg.resume_faults || reversed || bytes > p.len {
                    tracing::warn!(
                        "dsa {}: a {} piece faulted at {fault:#x} after {bytes} of {} bytes; \
                         the request fails",
                        self.name,
                        q.op,
                        p.len
                    );
                    self.finish(p.req, Completion::with(Status::EngineError), done);
                    return;
                }
                if q.op == Opcode::Compare && result != 0 {
                    self.finish(p.req, Completion::with(Status::Miscompare), done);
                    return;
                }
                bump(&self.counters.resumed, 1);
                self.touch(&q, fault, st & status::WRITE != 0);
                if bytes == 0 {
                    self.stall(p.req, done);
                } else {
                    self.advance(p.req, bytes, crc, done);
                }
            }
            c if is_invalid(c) => {
                bump(&self.counters.invalid, 1);
                tracing::debug!("dsa {}: descriptor refused with status {c:#04x}", self.name);
                self.finish(p.req, Completion::with(Status::InvalidArgument), done);
            }
            c => {
                tracing::warn!(
                    "dsa {}: a {} descriptor failed with status {c:#04x}",
                    self.name,
                    q.op
                );
                self.finish(p.req, Completion::with(Status::EngineError), done);
            }
        }
    }

    /// With shared virtual addressing (the device's address of a buffer is
    /// its virtual address) a page fault means the page is not present
    /// for the device: touch it (a read, or an atomic add of 0 for a
    /// write fault, which makes the kernel allocate or unshare the page)
    /// so the resumed piece finds it. Only an address inside one of the
    /// request's own buffers is touched; under an IOMMU mapping (VFIO, the
    /// model) the address is an IOVA and nothing is touched.
    fn touch(&self, q: &Request, fault: u64, write: bool) {
        let addr = fault as usize;
        let Some(w) = self.hw.wq.memory().window(addr) else {
            return;
        };
        if w.iova.wrapping_add((addr - w.va) as u64) != fault {
            return;
        }
        let seg = (q.iovcnt > 0 && q.seg < q.iovcnt).then(|| {
            // SAFETY: as in `describe`: seg < iovcnt, the vector valid
            // until the task completes.
            unsafe { *q.iovs.add(q.seg) }
        });
        let inside = |base: usize, len: usize| base != 0 && addr >= base && addr - base < len;
        let mine = match q.op {
            Opcode::Copy | Opcode::CopyCrc32c if write => inside(q.dst, q.len),
            Opcode::Fill => inside(q.dst, q.len),
            Opcode::Dualcast if write => inside(q.dst, q.len) || inside(q.dst2, q.len),
            Opcode::Compare => inside(q.src, q.len) || inside(q.src2, q.len),
            Opcode::Crc32c | Opcode::CopyCrc32c => match seg {
                Some(v) => inside(v.base as usize, v.len),
                None => inside(q.src, q.len),
            },
            Opcode::Copy | Opcode::Dualcast => inside(q.src, q.len),
        };
        if !mine {
            return;
        }
        bump(&self.counters.touched, 1);
        let p = addr as *mut u8;
        if write {
            // SAFETY: `p` is inside a destination of this request, which
            // its submitter gave the channel until the task completes and
            // does not touch meanwhile; the device stopped at this address
            // (the piece completed partially), so nothing else accesses
            // the byte. Adding 0 atomically keeps its value.
            unsafe { std::sync::atomic::AtomicU8::from_ptr(p) }.fetch_add(0, Ordering::Relaxed);
        } else {
            // SAFETY: `p` is inside a source of this request, readable
            // until the task completes.
            unsafe { std::ptr::read_volatile(p) };
        }
    }

    /// `n` more bytes of request `r` are done (`crc`: the CRC so far, for
    /// CRC operations): finished, or its next piece queued.
    fn advance(&mut self, r: u32, n: usize, crc: u32, done: &mut Vec<(TaskId, Completion)>) {
        let Some(q) = self.reqs[r as usize].as_mut() else {
            return;
        };
        q.done += n;
        q.stalls = 0;
        if matches!(q.op, Opcode::Crc32c | Opcode::CopyCrc32c) {
            q.crc = crc;
            q.seg_off += n;
            if q.iovcnt > 0 {
                // SAFETY: as in `describe`: seg < iovcnt while bytes are left.
                while q.done < q.len && q.seg_off >= unsafe { (*q.iovs.add(q.seg)).len } {
                    q.seg += 1;
                    q.seg_off = 0;
                }
            }
        }
        if q.done >= q.len {
            let c = Completion {
                status: Status::Success,
                crc: if matches!(q.op, Opcode::Crc32c | Opcode::CopyCrc32c) {
                    q.crc
                } else {
                    0
                },
            };
            self.finish(r, c, done);
        } else {
            self.ready.push_back(r);
        }
    }

    /// Reports request `r` and frees its entry.
    fn finish(&mut self, r: u32, c: Completion, done: &mut Vec<(TaskId, Completion)>) {
        let Some(q) = self.reqs[r as usize].take() else {
            return;
        };
        match c.status {
            Status::Success | Status::Miscompare => bump(&self.counters.completed, 1),
            Status::EngineError => bump(&self.counters.failed, 1),
            Status::InvalidArgument => {}
        }
        self.free_reqs.push(r);
        self.held -= 1;
        done.push((q.id, c));
    }
}

impl Drop for Channel {
    /// Frees the slots only when nothing is in flight; otherwise the
    /// device may still write them, and they are leaked.
    fn drop(&mut self) {
        let in_flight = self
            .busy
            .iter()
            .any(|&s| self.slots[s as usize].state == SlotState::InFlight);
        if in_flight {
            tracing::error!(
                "dsa {}: released with submissions in flight; its descriptor memory ({} bytes) \
                 is leaked, not freed",
                self.name,
                self.buf.len()
            );
            return;
        }
        // SAFETY: dropped once, here; no submission is in flight, so the
        // device no longer reads or writes the slots.
        unsafe { ManuallyDrop::drop(&mut self.buf) };
    }
}
