//! One accel-perf worker: the buffers, submission and checking of one core.
//!
//! Thread: made and run on its reactor (a `!Send` future). Each round it
//! reaps its accel queue, checks every finished task and gives the next
//! slot a task at once (alone, or into the batch being built), there.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use io_engine::accel::software::kernels::crc32c_update;
use io_engine::accel::{Accel, AccelError, Batch, Completion, IoVec, Opcode, Queue, Status};
use io_engine::env::dma::DmaRegion;
use io_engine::env::xorshift::XorShift;
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
    /// The first source (kept here, not only in `srcs`, so that a task
    /// does not chase a pointer to a separate allocation for it).
    src: *const u8,
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
    slots: Vec<Slot>,
    free: VecDeque<u32>,
    /// Tasks submitted and not yet reaped.
    in_flight: usize,
    /// Tasks in the batch being built, not yet submitted.
    held: usize,
    stopping: bool,
    completed: u64,
    failed: u64,
    miscompares: u64,
    expected: u64,
    _mem: DmaRegion,
}

/// Runs one worker on the calling reactor until `stop`, then drains it.
///
/// Each round reaps the worker's queue and, for every finished task,
/// checks it and gives the next slot a task at once: alone (`-b 0`), or
/// into the batch being built, which is submitted as soon as it holds
/// `-b` tasks (batches are always whole).
pub async fn run(accel: Arc<Accel>, cfg: Config, stop: Arc<AtomicBool>) -> Result<Outcome, String> {
    let mut w = Worker::new(cfg)?;
    let q = accel.channel().queue();
    let mut open = q.batch();
    let mut reaped = Vec::with_capacity(w.cfg.queue_depth);
    let start = Instant::now();
    for _ in 0..w.cfg.queue_depth {
        let Some(i) = w.free.pop_front() else { break };
        if !w.start(&q, &mut open, i) {
            break;
        }
    }
    let mut seconds = 0.0;
    loop {
        q.reap(&mut reaped);
        for &(tag, c) in &reaped {
            w.finish(tag, c);
            if w.stopping {
                w.free.push_back(tag as u32);
                continue;
            }
            // The oldest free slot goes next (this one, when -a is -q).
            let next = match w.free.pop_front() {
                None => tag as u32,
                Some(i) => {
                    w.free.push_back(tag as u32);
                    i
                }
            };
            w.start(&q, &mut open, next);
        }
        reaped.clear();
        if !w.stopping && stop.load(Ordering::Acquire) {
            w.stopping = true;
            seconds = start.elapsed().as_secs_f64();
            // The batch being built is dropped unrun.
            open = q.batch();
            w.held = 0;
        }
        if w.stopping && w.in_flight == 0 {
            break;
        }
        yield_now().await;
    }
    drop(open);
    let ceiling_ops_per_s = w.cfg.ceiling.then(|| w.ceiling());
    Ok(Outcome {
        ceiling_ops_per_s,
        completed: w.completed,
        failed: w.failed,
        miscompares: w.miscompares,
        expected_miscompares: w.expected,
        seconds,
    })
}

fn scribble(p: *mut u8, len: usize, seed: u64) {
    // SAFETY: callers pass a buffer of the worker's region of `len` bytes
    // that no task uses yet.
    let buf = unsafe { std::slice::from_raw_parts_mut(p, len) };
    XorShift::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)).fill(buf);
}

fn bytes<'a>(p: *const u8, len: usize) -> &'a [u8] {
    // SAFETY: callers pass a slot buffer of `len` bytes whose task has
    // completed (or not started), inside the worker's live region.
    unsafe { std::slice::from_raw_parts(p, len) }
}

impl Worker {
    fn new(cfg: Config) -> Result<Worker, String> {
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
                src: srcs.first().map_or(std::ptr::null(), |v| v.base),
                srcs,
                dst,
                dst2,
                differs,
                crc,
            });
        }
        let free = (0..cfg.alloc_depth as u32).collect();
        Ok(Worker {
            cfg,
            slots,
            free,
            in_flight: 0,
            held: 0,
            stopping: false,
            completed: 0,
            failed: 0,
            miscompares: 0,
            expected: 0,
            _mem: mem,
        })
    }

    /// Gives slot `i` a task: submits it alone (`-b 0`), or adds it to
    /// `open` and submits that when it holds a whole batch. False when the
    /// channel refused it (the slot goes back to the free list).
    fn start<'q>(&mut self, q: &'q Queue, open: &mut Batch<'q>, i: u32) -> bool {
        if self.cfg.batch == 0 {
            return self.submit_one(q, i);
        }
        let s = &self.slots[i as usize];
        clear(&self.cfg, s);
        if let Err(e) = add(&self.cfg, open, s, i) {
            self.free.push_front(i);
            if !matches!(e, AccelError::NoTask { .. } | AccelError::BatchFull { .. }) {
                self.refused(e);
            }
            return false;
        }
        self.held += 1;
        if self.held == self.cfg.batch.min(self.cfg.queue_depth) {
            std::mem::replace(open, q.batch()).submit();
            self.in_flight += self.held;
            self.held = 0;
        }
        true
    }

    fn refused(&mut self, e: AccelError) {
        tracing::error!("accel-perf: submission refused: {e}");
        self.failed += 1;
        self.stopping = true;
    }

    /// Submits slot `i` alone; false when the channel refused it.
    fn submit_one(&mut self, q: &Queue, i: u32) -> bool {
        let s = &self.slots[i as usize];
        clear(&self.cfg, s);
        let (len, tag, cfg) = (self.cfg.size, i as u64, &self.cfg);
        // SAFETY: for every submission, the slot's buffers are inside the
        // worker's region, which outlives every task (the worker drains
        // before it returns), and the slot is not reused until its task
        // is reaped (it is off the free list).
        let r = unsafe {
            match cfg.workload {
                Workload::Copy => q.copy(s.dst, s.src, len, tag),
                Workload::Fill => q.fill(s.dst, cfg.fill, len, tag),
                Workload::Compare => q.compare(s.src, s.dst, len, tag),
                Workload::Dualcast => q.dualcast(s.dst, s.dst2, s.src, len, tag),
                Workload::Crc32c => q.crc32c(&s.srcs, cfg.seed, tag),
                Workload::CopyCrc32c => q.copy_crc32c(s.dst, &s.srcs, cfg.seed, tag),
            }
        };
        match r {
            Ok(()) => {
                self.in_flight += 1;
                true
            }
            Err(e) => {
                self.free.push_front(i);
                if !matches!(e, AccelError::NoTask { .. }) {
                    self.refused(e);
                }
                false
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
}

impl Worker {
    /// Counts and checks a reaped task.
    #[inline]
    fn finish(&mut self, tag: u64, c: Completion) {
        self.in_flight -= 1;
        let s = &self.slots[tag as usize];
        self.completed += 1;
        if c.status == Status::Miscompare {
            self.miscompares += 1;
        }
        if s.differs {
            self.expected += 1;
        }
        // A miscompare where none was asked for (or none where one was)
        // fails the run through miscompares != expected; anything else
        // wrong is a failure.
        if c.status != Status::Miscompare && !check(&self.cfg, s, c) {
            self.failed += 1;
        }
    }
}

/// Prepares a slot's destination so that verification proves the task
/// wrote it.
fn clear(cfg: &Config, s: &Slot) {
    if !cfg.verify {
        return;
    }
    let byte = match cfg.workload {
        Workload::Fill => !cfg.fill,
        _ => 0,
    };
    for d in [s.dst, s.dst2] {
        if !d.is_null() && cfg.workload != Workload::Compare {
            // SAFETY: a slot buffer of dst_len bytes, not in flight.
            unsafe { std::ptr::write_bytes(d, byte, cfg.dst_len()) };
        }
    }
}

/// Whether a finished task did what it should.
fn check(cfg: &Config, s: &Slot, c: Completion) -> bool {
    let len = cfg.size;
    match cfg.workload {
        Workload::Compare => {
            let want = if s.differs {
                Status::Miscompare
            } else {
                Status::Success
            };
            c.status == want
        }
        _ if c.status != Status::Success => false,
        _ if !cfg.verify => true,
        Workload::Copy => bytes(s.dst, len) == bytes(s.src, len),
        Workload::Fill => bytes(s.dst, len).iter().all(|&b| b == cfg.fill),
        Workload::Dualcast => {
            bytes(s.dst, len) == bytes(s.src, len) && bytes(s.dst2, len) == bytes(s.src, len)
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

/// Adds slot `s` (number `i`) to `b`.
fn add(cfg: &Config, b: &mut Batch<'_>, s: &Slot, i: u32) -> Result<(), AccelError> {
    let (len, tag) = (cfg.size, i as u64);
    // SAFETY: as in `Worker::submit_one`.
    unsafe {
        match cfg.workload {
            Workload::Copy => b.copy(s.dst, s.src, len, tag),
            Workload::Fill => b.fill(s.dst, cfg.fill, len, tag),
            Workload::Compare => b.compare(s.src, s.dst, len, tag),
            Workload::Dualcast => b.dualcast(s.dst, s.dst2, s.src, len, tag),
            Workload::Crc32c => b.crc32c(&s.srcs, cfg.seed, tag),
            Workload::CopyCrc32c => b.copy_crc32c(s.dst, &s.srcs, cfg.seed, tag),
        }
    }
}
