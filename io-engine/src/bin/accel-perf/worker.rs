//! One accel-perf worker: the buffers, submission and checking of one core.
//!
//! Thread: made and run on its reactor (a `!Send` future); the completion
//! callback runs there too, from the accel channel's poll, and resubmits at
//! once (or, with batching, frees the slot for the next batch).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use io_engine::accel::software::kernels::crc32c_update;
use io_engine::accel::{Accel, AccelChannel, AccelError, Completion, Done, IoVec, Opcode, Status};
use io_engine::env::dma::DmaRegion;
use io_engine::reactor::yield_now;

/// The workloads, as `-w` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Copy the source to the destination.
    Copy,
    /// Fill the destination with the fill byte.
    Fill,
    /// CRC-32C of the source vectors.
    Crc32c,
    /// Copy the source vectors and compute their CRC-32C.
    #[value(name = "copy_crc32c")]
    CopyCrc32c,
    /// Compare source and destination.
    Compare,
    /// Copy the source to two destinations.
    Dualcast,
}

impl Workload {
    pub fn opcode(self) -> Opcode {
        match self {
            Workload::Copy => Opcode::Copy,
            Workload::Fill => Opcode::Fill,
            Workload::Crc32c => Opcode::Crc32c,
            Workload::CopyCrc32c => Opcode::CopyCrc32c,
            Workload::Compare => Opcode::Compare,
            Workload::Dualcast => Opcode::Dualcast,
        }
    }
}

/// What every worker runs.
#[derive(Debug, Clone)]
pub struct Config {
    pub workload: Workload,
    pub size: usize,
    pub queue_depth: usize,
    pub alloc_depth: usize,
    pub verify: bool,
    pub fill: u8,
    pub seed: u32,
    pub iovcnt: usize,
    pub fail_percent: u32,
    pub batch: usize,
    /// After the run, time the plain loop over the same buffers.
    pub ceiling: bool,
    pub seconds: f64,
}

impl Config {
    fn srcs(&self) -> usize {
        match self.workload {
            Workload::Fill => 0,
            Workload::Crc32c | Workload::CopyCrc32c => self.iovcnt,
            _ => 1,
        }
    }
    fn dst_len(&self) -> usize {
        match self.workload {
            Workload::CopyCrc32c => self.size * self.iovcnt,
            Workload::Crc32c => 0,
            _ => self.size,
        }
    }
    fn dsts(&self) -> usize {
        match self.workload {
            Workload::Dualcast => 2,
            Workload::Crc32c => 0,
            _ => 1,
        }
    }
    /// Alignment of every buffer: a cache line, or 4 KiB for dualcast
    /// (its destinations must be). Buffers are packed at this alignment:
    /// page-aligning small buffers would put them all in the same cache
    /// sets.
    fn align(&self) -> usize {
        if self.workload == Workload::Dualcast {
            4096
        } else {
            64
        }
    }
    /// Buffer bytes of one slot.
    fn slot_bytes(&self) -> usize {
        let round = |n: usize| n.next_multiple_of(self.align());
        self.srcs() * round(self.size) + self.dsts() * round(self.dst_len())
    }
    /// Buffer bytes of one core.
    pub fn bytes_per_core(&self) -> usize {
        self.slot_bytes().saturating_mul(self.alloc_depth)
    }
}

/// What one worker measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub completed: u64,
    pub failed: u64,
    pub miscompares: u64,
    pub expected_miscompares: u64,
    pub seconds: f64,
    /// Operations per second of the plain loop (`--ceiling`).
    pub ceiling_ops_per_s: Option<f64>,
}

impl Outcome {
    pub fn ops_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.completed as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// One buffer set.
struct Slot {
    srcs: Vec<IoVec>,
    dst: *mut u8,
    dst2: *mut u8,
    /// Compare: this slot's buffers differ on purpose (`-P`).
    differs: bool,
    /// crc32c, copy_crc32c: the CRC the sources must give.
    crc: u32,
}

struct Worker {
    cfg: Config,
    ch: Rc<AccelChannel>,
    slots: Vec<Slot>,
    free: RefCell<VecDeque<u32>>,
    stop: Arc<AtomicBool>,
    stopping: Cell<bool>,
    done: RefCell<Option<Rc<dyn Done>>>,
    completed: Cell<u64>,
    failed: Cell<u64>,
    miscompares: Cell<u64>,
    expected: Cell<u64>,
    _mem: DmaRegion,
}

/// Runs one worker on the calling reactor until `stop`, then drains it.
pub async fn run(accel: Arc<Accel>, cfg: Config, stop: Arc<AtomicBool>) -> Result<Outcome, String> {
    let w = Rc::new(Worker::new(accel, cfg, stop)?);
    let d: Rc<dyn Done> = w.clone();
    *w.done.borrow_mut() = Some(d);
    let start = Instant::now();
    // Fill the queue: one batch per `-b` tasks, or each task alone.
    w.refill();
    let mut seconds = 0.0;
    loop {
        w.ch.poll();
        if w.cfg.batch > 0 && !w.stopping.get() {
            w.refill();
        }
        if !w.stopping.get() && w.stop.load(Ordering::Acquire) {
            w.stopping.set(true);
            seconds = start.elapsed().as_secs_f64();
        }
        if w.stopping.get() && w.ch.in_flight() == 0 {
            break;
        }
        yield_now().await;
    }
    // Break the callback's cycle back to the worker.
    w.done.borrow_mut().take();
    let ceiling_ops_per_s = w.cfg.ceiling.then(|| w.ceiling());
    Ok(Outcome {
        ceiling_ops_per_s,
        completed: w.completed.get(),
        failed: w.failed.get(),
        miscompares: w.miscompares.get(),
        expected_miscompares: w.expected.get(),
        seconds,
    })
}

fn scribble(p: *mut u8, len: usize, seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in 0..len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // SAFETY: callers pass a buffer of the worker's region of `len`
        // bytes that no task uses yet.
        unsafe { p.add(i).write(x as u8) };
    }
}

fn bytes<'a>(p: *const u8, len: usize) -> &'a [u8] {
    // SAFETY: callers pass a slot buffer of `len` bytes whose task has
    // completed (or not started), inside the worker's live region.
    unsafe { std::slice::from_raw_parts(p, len) }
}

impl Worker {
    fn new(accel: Arc<Accel>, cfg: Config, stop: Arc<AtomicBool>) -> Result<Worker, String> {
        let mem = DmaRegion::alloc(cfg.bytes_per_core().max(4096))
            .map_err(|e| format!("worker buffers: {e}"))?;
        let align = cfg.align();
        let mut next = mem.as_ptr();
        let mut take = |len: usize| {
            let p = next;
            // SAFETY: the region (page aligned) holds slot_bytes() per
            // slot, which is the sum of these rounded pieces.
            next = unsafe { next.add(len.next_multiple_of(align)) };
            p
        };
        let mut slots = Vec::with_capacity(cfg.alloc_depth);
        for i in 0..cfg.alloc_depth {
            let srcs: Vec<IoVec> = (0..cfg.srcs())
                .map(|k| {
                    let p = take(cfg.size);
                    scribble(p, cfg.size, (i * 131 + k) as u64);
                    IoVec::new(p, cfg.size)
                })
                .collect();
            let dst = if cfg.dsts() > 0 {
                take(cfg.dst_len())
            } else {
                std::ptr::null_mut()
            };
            let dst2 = if cfg.dsts() > 1 {
                take(cfg.dst_len())
            } else {
                std::ptr::null_mut()
            };
            let differs =
                cfg.workload == Workload::Compare && (i % 100) < cfg.fail_percent as usize;
            if cfg.workload == Workload::Compare {
                // SAFETY: distinct pieces of size bytes.
                unsafe { std::ptr::copy_nonoverlapping(srcs[0].base, dst, cfg.size) };
                if differs {
                    // SAFETY: inside dst.
                    unsafe { *dst.add(cfg.size / 2) ^= 0x5a };
                }
            }
            let crc = srcs
                .iter()
                .fold(cfg.seed, |c, v| crc32c_update(c, bytes(v.base, v.len)));
            slots.push(Slot {
                srcs,
                dst,
                dst2,
                differs,
                crc,
            });
        }
        let free = (0..cfg.alloc_depth as u32).collect();
        Ok(Worker {
            ch: accel.channel(),
            cfg,
            slots,
            free: RefCell::new(free),
            stop,
            stopping: Cell::new(false),
            done: RefCell::new(None),
            completed: Cell::new(0),
            failed: Cell::new(0),
            miscompares: Cell::new(0),
            expected: Cell::new(0),
            _mem: mem,
        })
    }

    /// Prepares a slot's destination so that verification proves the task
    /// wrote it.
    fn clear(&self, s: &Slot) {
        if !self.cfg.verify {
            return;
        }
        let byte = match self.cfg.workload {
            Workload::Fill => !self.cfg.fill,
            _ => 0,
        };
        for d in [s.dst, s.dst2] {
            if !d.is_null() && self.cfg.workload != Workload::Compare {
                // SAFETY: a slot buffer of dst_len bytes, not in flight.
                unsafe { std::ptr::write_bytes(d, byte, self.cfg.dst_len()) };
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.cfg.alloc_depth - self.free.borrow().len()
    }

    /// Submits tasks until `-q` are in flight: in batches of `-b` (and only
    /// whole batches), or one by one.
    fn refill(&self) {
        let q = self.cfg.queue_depth;
        if self.cfg.batch == 0 {
            while self.in_flight() < q {
                let Some(i) = self.free.borrow_mut().pop_front() else {
                    break;
                };
                if !self.submit_one(i) {
                    break;
                }
            }
            return;
        }
        while q - self.in_flight() >= self.cfg.batch.min(q) {
            let n = self.cfg.batch.min(q - self.in_flight());
            let mut b = self.ch.batch();
            for _ in 0..n {
                let Some(i) = self.free.borrow_mut().pop_front() else {
                    break;
                };
                if let Err(e) = self.add(&mut b, i) {
                    self.free.borrow_mut().push_front(i);
                    if !matches!(e, AccelError::NoTask { .. } | AccelError::BatchFull { .. }) {
                        self.refused(e);
                    }
                    break;
                }
            }
            if b.is_empty() {
                break;
            }
            b.submit();
        }
    }

    fn refused(&self, e: AccelError) {
        tracing::error!("accel-perf: submission refused: {e}");
        self.failed.set(self.failed.get() + 1);
        self.stopping.set(true);
    }

    /// Submits slot `i` alone; false when the channel refused it.
    fn submit_one(&self, i: u32) -> bool {
        let s = &self.slots[i as usize];
        self.clear(s);
        let done = self.done.borrow();
        let Some(d) = done.as_ref() else { return false };
        let (len, tag) = (self.cfg.size, i as u64);
        // SAFETY: for every submission, the slot's buffers are inside the
        // worker's region, which outlives every task (the worker drains
        // before it returns), and the slot is not reused until its task
        // completes (it is off the free list).
        let r = unsafe {
            match self.cfg.workload {
                Workload::Copy => self.ch.copy(s.dst, s.srcs[0].base, len, tag, d),
                Workload::Fill => self.ch.fill(s.dst, self.cfg.fill, len, tag, d),
                Workload::Compare => self.ch.compare(s.srcs[0].base, s.dst, len, tag, d),
                Workload::Dualcast => self.ch.dualcast(s.dst, s.dst2, s.srcs[0].base, len, tag, d),
                Workload::Crc32c => self.ch.crc32c(&s.srcs, self.cfg.seed, tag, d),
                Workload::CopyCrc32c => self.ch.copy_crc32c(s.dst, &s.srcs, self.cfg.seed, tag, d),
            }
        };
        match r {
            Ok(()) => true,
            Err(e) => {
                self.free.borrow_mut().push_front(i);
                if !matches!(e, AccelError::NoTask { .. }) {
                    drop(done);
                    self.refused(e);
                }
                false
            }
        }
    }

    fn add(&self, b: &mut io_engine::accel::Batch<'_>, i: u32) -> Result<(), AccelError> {
        let s = &self.slots[i as usize];
        self.clear(s);
        let done = self.done.borrow();
        let d = done.as_ref().expect("set while running");
        let (len, tag) = (self.cfg.size, i as u64);
        // SAFETY: as in submit_one.
        unsafe {
            match self.cfg.workload {
                Workload::Copy => b.copy(s.dst, s.srcs[0].base, len, tag, d),
                Workload::Fill => b.fill(s.dst, self.cfg.fill, len, tag, d),
                Workload::Compare => b.compare(s.srcs[0].base, s.dst, len, tag, d),
                Workload::Dualcast => b.dualcast(s.dst, s.dst2, s.srcs[0].base, len, tag, d),
                Workload::Crc32c => b.crc32c(&s.srcs, self.cfg.seed, tag, d),
                Workload::CopyCrc32c => b.copy_crc32c(s.dst, &s.srcs, self.cfg.seed, tag, d),
            }
        }
    }

    /// The plain loop: each slot's operation done with `std::ptr` copies
    /// and fills, a slice compare and the crc32c crate, over the slots in
    /// the framework's order, for the run's time. Returns operations per
    /// second: the ceiling the framework is measured against.
    fn ceiling(&self) -> f64 {
        let len = self.cfg.size;
        let start = Instant::now();
        let mut ops = 0u64;
        let mut sink = 0u32;
        let n = self.slots.len();
        let mut i = 0;
        'run: loop {
            for _ in 0..256 {
                let s = &self.slots[i];
                i += 1;
                if i == n {
                    i = 0;
                }
                let src = s.srcs.first().map_or(std::ptr::null(), |v| v.base);
                // SAFETY: slot buffers of the sizes the worker allocated,
                // no task in flight (the run has drained).
                unsafe {
                    match self.cfg.workload {
                        Workload::Copy => std::ptr::copy_nonoverlapping(src, s.dst, len),
                        Workload::Fill => std::ptr::write_bytes(s.dst, self.cfg.fill, len),
                        Workload::Compare => sink ^= (bytes(src, len) == bytes(s.dst, len)) as u32,
                        Workload::Dualcast => {
                            std::ptr::copy_nonoverlapping(src, s.dst, len);
                            std::ptr::copy_nonoverlapping(src, s.dst2, len);
                        }
                        Workload::Crc32c => {
                            sink ^= s
                                .srcs
                                .iter()
                                .fold(self.cfg.seed, |c, v| crc32c_update(c, bytes(v.base, v.len)))
                        }
                        Workload::CopyCrc32c => {
                            let mut c = self.cfg.seed;
                            for (k, v) in s.srcs.iter().enumerate() {
                                std::ptr::copy_nonoverlapping(v.base, s.dst.add(k * len), len);
                                c = crc32c_update(c, bytes(v.base, v.len));
                            }
                            sink ^= c;
                        }
                    }
                }
                ops += 1;
            }
            if start.elapsed().as_secs_f64() >= self.cfg.seconds {
                break 'run;
            }
        }
        std::hint::black_box(sink);
        ops as f64 / start.elapsed().as_secs_f64()
    }

    /// Whether a finished task did what it should.
    fn check(&self, s: &Slot, c: Completion) -> bool {
        let len = self.cfg.size;
        match self.cfg.workload {
            Workload::Compare => {
                let want = if s.differs {
                    Status::Miscompare
                } else {
                    Status::Success
                };
                c.status == want
            }
            _ if c.status != Status::Success => false,
            _ if !self.cfg.verify => true,
            Workload::Copy => bytes(s.dst, len) == bytes(s.srcs[0].base, len),
            Workload::Fill => bytes(s.dst, len).iter().all(|&b| b == self.cfg.fill),
            Workload::Dualcast => {
                bytes(s.dst, len) == bytes(s.srcs[0].base, len)
                    && bytes(s.dst2, len) == bytes(s.srcs[0].base, len)
            }
            Workload::Crc32c => c.crc == s.crc,
            Workload::CopyCrc32c => {
                c.crc == s.crc
                    && s.srcs
                        .iter()
                        .enumerate()
                        .all(|(k, v)| bytes(s.dst.wrapping_add(k * len), len) == bytes(v.base, len))
            }
        }
    }
}

impl Done for Worker {
    fn done(&self, tag: u64, c: Completion) {
        let s = &self.slots[tag as usize];
        self.completed.set(self.completed.get() + 1);
        if c.status == Status::Miscompare {
            self.miscompares.set(self.miscompares.get() + 1);
        }
        if s.differs {
            self.expected.set(self.expected.get() + 1);
        }
        // A miscompare where none was asked for (or none where one was)
        // fails the run through miscompares != expected; anything else
        // wrong is a failure.
        if c.status != Status::Miscompare && !self.check(s, c) {
            self.failed.set(self.failed.get() + 1);
        }
        if self.cfg.batch == 0 && !self.stopping.get() {
            // The oldest free slot goes next (this one, when -a is -q).
            let next = {
                let mut free = self.free.borrow_mut();
                match free.pop_front() {
                    None => tag as u32,
                    Some(i) => {
                        free.push_back(tag as u32);
                        i
                    }
                }
            };
            self.submit_one(next);
        } else {
            self.free.borrow_mut().push_back(tag as u32);
            // A whole batch's worth of room: submit it now, as the
            // unbatched path resubmits each task at once.
            if self.cfg.batch > 0
                && !self.stopping.get()
                && self.cfg.queue_depth - self.in_flight()
                    >= self.cfg.batch.min(self.cfg.queue_depth)
            {
                self.refill();
            }
        }
    }
}
