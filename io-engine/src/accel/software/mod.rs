//! The software module: every opcode, executed by the CPU with the best
//! SIMD kernels it has ([`kernels`]), at submission time.
//!
//! Thread: the submitting thread runs the kernels inside
//! `ModuleChannel::submit`; completions are reported at once, and their
//! submitters reap them from their queues later, on that same thread.

pub mod kernels;

use super::{Completion, Module, ModuleChannel, Opcode, Status, Task, TaskId};
use kernels::{Kernels, crc32c_update};

/// The software module.
pub struct Software {
    k: &'static Kernels,
}

/// Most tasks per submission: a bound for the batch API, not a cost.
pub const MAX_BATCH: usize = 4096;

impl Software {
    /// The module, with the kernels picked for this CPU.
    pub fn new() -> Software {
        Software { k: Kernels::get() }
    }

    /// The instruction set its kernels use (`avx512`, `avx2`, `scalar`).
    pub fn isa(&self) -> &'static str {
        self.k.name()
    }
}

impl Default for Software {
    fn default() -> Self {
        Software::new()
    }
}

impl Module for Software {
    fn name(&self) -> &'static str {
        "software"
    }
    fn supports(&self, _op: Opcode) -> bool {
        true
    }
    fn max_transfer(&self, _op: Opcode) -> usize {
        isize::MAX as usize
    }
    fn max_batch(&self) -> usize {
        MAX_BATCH
    }
    fn implementation(&self) -> String {
        format!("{} kernels", self.isa())
    }
    fn create_channel(&self) -> Option<Box<dyn ModuleChannel>> {
        Some(Box::new(SoftwareChannel { k: self.k }))
    }
}

struct SoftwareChannel {
    k: &'static Kernels,
}

impl SoftwareChannel {
    /// Runs one task.
    ///
    /// # Safety
    ///
    /// The task passed the framework's validation, and its submitter
    /// promised its buffers are valid and untouched while it is in flight
    /// (`Batch`'s contract).
    #[inline]
    unsafe fn execute(&self, t: &Task) -> Completion {
        let k = self.k;
        // SAFETY: for every kernel call below, the function's contract; the
        // framework checked lengths, null pointers, overlap and alignment.
        unsafe {
            match t.op {
                Opcode::Copy => k.copy(t.dst, t.src, t.len),
                Opcode::Fill => k.fill(t.dst, t.fill, t.len),
                Opcode::Compare => {
                    if !k.compare(t.src, t.src2, t.len) {
                        return Completion::with(Status::Miscompare);
                    }
                }
                Opcode::Dualcast => k.dualcast(t.dst, t.dst2, t.src, t.len),
                Opcode::Crc32c => {
                    let mut crc = t.seed;
                    for v in t.sources().iter() {
                        crc = crc32c_update(crc, std::slice::from_raw_parts(v.base, v.len));
                    }
                    return Completion {
                        status: Status::Success,
                        crc,
                    };
                }
                Opcode::CopyCrc32c => {
                    let mut crc = t.seed;
                    let mut off = 0;
                    for v in t.sources().iter() {
                        crc = k.copy_crc32c(t.dst.add(off), v.base, v.len, crc);
                        off += v.len;
                    }
                    return Completion {
                        status: Status::Success,
                        crc,
                    };
                }
            }
        }
        Completion::SUCCESS
    }
}

/// Starts pulling the first lines of a task's buffers into the cache while
/// the task before it runs, so its copy does not begin with a full memory
/// latency: the source and the start of the destination (only one of them
/// is usually cold: device memory, against a recently used IO buffer). The
/// hardware prefetcher takes over from there. Both are read prefetches
/// (T0): `_MM_HINT_ET0` is one too unless the crate is built with the
/// `prfchw` feature, and a real `prefetchw` on the destination measured no
/// different (bdev-perf malloc, reads and writes, 1 GiB and 64 MiB, three
/// interleaved rounds: within 1 %).
#[inline]
fn prefetch(t: &Task) {
    #[cfg(target_arch = "x86_64")]
    if t.len >= PREFETCH_MIN {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let (src, dst) = (t.src as *const i8, t.dst as *const i8);
        if !src.is_null() && t.op != Opcode::Fill {
            for l in (0..PREFETCH_SRC.min(t.len)).step_by(64) {
                // SAFETY: prefetch has no architectural effect and never
                // faults, whatever the address.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(src.wrapping_add(l)) }
            }
        }
        if !dst.is_null() && t.op != Opcode::Compare && t.op != Opcode::Crc32c {
            for l in (0..PREFETCH_DST.min(t.len)).step_by(64) {
                // SAFETY: as above.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(dst.wrapping_add(l)) }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = t;
}

/// Bytes of the next task's source and destination prefetched. Measured
/// with bdev-perf on malloc (4 KiB random IO over 1 GiB, one core,
/// docs/performance.md), when the device copied in its own poll: 1 KiB of
/// a read's source took reads from 3.4 M to 5.1 M IOPS (256 B and 4 KiB
/// did worse); 256 B of a write's destination did best for writes.
const PREFETCH_SRC: usize = 1024;
/// Tasks shorter than this are not prefetched: their buffers are usually
/// cached, and 512-byte copies ran 7 % slower in batches (accel-perf -b 256
/// against -b 0) with the prefetches.
const PREFETCH_MIN: usize = 2048;
const PREFETCH_DST: usize = 256;

impl ModuleChannel for SoftwareChannel {
    fn submit(&mut self, tasks: &[Task], ids: &[TaskId], done: &mut Vec<(TaskId, Completion)>) {
        if let [id] = ids {
            // SAFETY: as below.
            let c = unsafe { self.execute(&tasks[*id as usize]) };
            done.push((*id, c));
            return;
        }
        for (i, &id) in ids.iter().enumerate() {
            if let Some(&next) = ids.get(i + 1) {
                prefetch(&tasks[next as usize]);
            }
            // SAFETY: `ids` are tasks the framework validated and handed
            // over; their buffers are the submitter's promise.
            let c = unsafe { self.execute(&tasks[id as usize]) };
            done.push((id, c));
        }
    }

    fn completes_at_submit(&self) -> bool {
        true
    }

    fn poll(&mut self, _done: &mut Vec<(TaskId, Completion)>) -> usize {
        0
    }

    fn in_flight(&self) -> usize {
        0
    }
}
