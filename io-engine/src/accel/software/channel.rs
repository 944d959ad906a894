//! The software module's channel: runs each submission's tasks at once,
//! in one loop that prefetches the next task's buffers while one runs,
//! and fences once for the streamed stores of the whole submission.
//!
//! Thread: the submitting thread runs the kernels inside
//! `ModuleChannel::submit`; completions are reported at once, and their
//! submitters reap them from their queues later, on that same thread.

use super::kernels::{Kernels, NT_THRESHOLD, crc32c_update};
use crate::accel::{
    Completion, ModuleChannel, Opcode, Placement, Status, Submission, Task, TaskId,
};

/// One thread's channel to the software module: the kernels, run in the
/// submitting call.
pub(super) struct SoftwareChannel {
    k: &'static Kernels,
}

impl SoftwareChannel {
    pub(super) fn new(k: &'static Kernels) -> SoftwareChannel {
        SoftwareChannel { k }
    }

    /// Runs one task. A copy or fill placed in memory
    /// ([`Placement::Memory`]) streams its stores unfenced and sets
    /// `streamed`: the caller fences once for all of them before the
    /// completions are handed over.
    ///
    /// # Safety
    ///
    /// The task passed the framework's validation, and its submitter
    /// promised its buffers are valid and untouched while it is in flight
    /// (`Batch`'s contract).
    #[inline]
    unsafe fn execute(&self, t: &Task, streamed: &mut bool) -> Completion {
        let k = self.k;
        let memory = t.placement == Placement::Memory;
        // SAFETY: for every kernel call below, the function's contract; the
        // framework checked lengths, null pointers, overlap and alignment;
        // streamed stores are fenced by the caller (`submit`) before the
        // completions leave the module.
        unsafe {
            match t.op {
                Opcode::Copy if memory => {
                    k.copy_streaming(t.dst, t.src, t.len);
                    *streamed = true;
                }
                Opcode::Copy => k.copy(t.dst, t.src, t.len),
                Opcode::Fill if memory => {
                    k.fill_streaming(t.dst, t.fill, t.len);
                    *streamed = true;
                }
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
/// latency: the start of the source, and of the destination
/// ([`prefetch_dst`]); only one of them is usually cold: device memory,
/// against a recently used IO buffer. The hardware prefetcher takes over
/// from there. For the task after a copy, the copy itself pulls in the
/// source instead, whole and spread over its loop ([`source_ahead`]).
#[inline]
fn prefetch(t: &Task) {
    #[cfg(target_arch = "x86_64")]
    if t.len >= PREFETCH_MIN {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let (src, n) = source_ahead(t);
        for l in (0..PREFETCH_SRC.min(n)).step_by(64) {
            // SAFETY: prefetch has no architectural effect and never
            // faults, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(src.wrapping_add(l) as *const i8) }
        }
    }
    prefetch_dst(t);
}

/// The start of a task's destination, as [`prefetch`] does, unless it is
/// placed in memory (streamed stores need no line in the cache). A read
/// prefetch (T0): `_MM_HINT_ET0` is one too unless the crate is built
/// with the `prfchw` feature, and a real `prefetchw` measured no different
/// (bdev-perf malloc, reads and writes, 1 GiB and 64 MiB, three
/// interleaved rounds: within 1 %).
#[inline]
fn prefetch_dst(t: &Task) {
    #[cfg(target_arch = "x86_64")]
    if t.len >= PREFETCH_MIN
        && !t.dst.is_null()
        && t.op != Opcode::Compare
        && t.op != Opcode::Crc32c
        && t.placement == Placement::Cache
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let dst = t.dst as *const i8;
        for l in (0..PREFETCH_DST.min(t.len)).step_by(64) {
            // SAFETY: as in `prefetch`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(dst.wrapping_add(l)) }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = t;
}

/// The part of a task's source a copy before it pulls in
/// ([`Kernels::copy_ahead`]): its first [`AHEAD_SRC`] bytes, for a task
/// that reads a source and is not short; none otherwise.
#[inline]
fn source_ahead(t: &Task) -> (*const u8, usize) {
    if t.len >= PREFETCH_MIN && !t.src.is_null() && t.op != Opcode::Fill {
        (t.src, AHEAD_SRC.min(t.len))
    } else {
        (std::ptr::null(), 0)
    }
}

/// Bytes of the next task's source prefetched before a task that is not
/// a copy, and of its destination. Measured with bdev-perf on malloc (4
/// KiB random IO over 1 GiB, one core, docs/performance.md), when the
/// device copied in its own poll: 1 KiB of a read's source took reads from
/// 3.4 M to 5.1 M IOPS (256 B and 4 KiB did worse, issued at once); 256 B
/// of a write's destination did best for writes.
const PREFETCH_SRC: usize = 1024;
/// Tasks shorter than this are not prefetched: their buffers are usually
/// cached, and 512-byte copies ran 7 % slower in batches (accel-perf -b 256
/// against -b 0) with the prefetches.
const PREFETCH_MIN: usize = 2048;
const PREFETCH_DST: usize = 256;
/// Bytes of the next task's source a copy pulls in while it runs: all of
/// a 4 KiB IO's. Measured on Zen 5 (docs/performance.md, interleaved
/// rounds), against 1 KiB prefetched at once before the copy: bdev-perf
/// malloc random reads 4.4 to 5.2 M IOPS at 1 GiB and 5.0 to 6.1 M at 64
/// MiB (the build before accel did 5.2 and 6.1), random writes 4.5 to 4.7
/// M and 5.2 to 5.3 M; accel-perf 4 KiB batches +2 % (`-q 32`), +7 %
/// (`-q 256`), +13 % in DRAM. Pulling in the next destination the same way
/// as well helped writes (5.3 M and 6.0 M) but cost reads at 64 MiB (5.5
/// M) and every accel-perf case, so it is not done.
const AHEAD_SRC: usize = 4096;

impl ModuleChannel for SoftwareChannel {
    fn submit(
        &mut self,
        tasks: &[Task],
        first: TaskId,
        done: &mut Vec<(TaskId, Completion)>,
    ) -> Submission {
        let mut streamed = false;
        for (i, t) in tasks.iter().enumerate() {
            let id = first + i as TaskId;
            if let Some(next) = tasks.get(i + 1) {
                let (ahead, n) = source_ahead(next);
                if t.op == Opcode::Copy
                    && t.placement == Placement::Cache
                    && t.len < NT_THRESHOLD
                    && n > 0
                {
                    // The copy itself pulls in the next task's source.
                    prefetch_dst(next);
                    // SAFETY: as below; prefetch addresses need nothing.
                    unsafe { self.k.copy_ahead(t.dst, t.src, t.len, ahead, n) };
                    done.push((id, Completion::SUCCESS));
                    continue;
                }
                prefetch(next);
            }
            // SAFETY: `tasks` are tasks the framework validated and handed
            // over; their buffers are the submitter's promise.
            let c = unsafe { self.execute(t, &mut streamed) };
            done.push((id, c));
        }
        // One fence for the batch's streamed stores (`Kernels::fence`),
        // before its completions reach anyone.
        if streamed {
            self.k.fence();
        }
        Submission::Executed
    }

    fn poll(&mut self, _done: &mut Vec<(TaskId, Completion)>) -> usize {
        0
    }

    fn in_flight(&self) -> usize {
        0
    }
}
