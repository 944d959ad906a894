//! Per-device IO statistics, kept per core and summed on read: counts,
//! bytes, latency totals, min/max and a latency histogram per operation.
//!
//! Thread: each core's entry is written only by that core's reactor (plain
//! load + store on atomics: no locked instruction per IO); the control plane
//! and the metrics exporter read and sum them. Threads without a core slot
//! share one entry and use `fetch_add`. A channel holds its core's entry, so
//! the data path never looks it up.
//!
//! Latencies are kept in cycle-clock ticks; the histogram buckets them by
//! nanoseconds in powers of two (`le` = 256 ns, 512 ns, ... 8.6 s, +Inf),
//! one `lzcnt` per IO.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_utils::CachePadded;

use super::io::IoType;
use crate::env::core_slot::MAX_SLOTS;
use crate::env::tsc;

/// Smallest histogram bound: 2^8 ns.
const FIRST_BUCKET_LOG2: u32 = 8;
/// Finite histogram buckets: `le` = 2^8 .. 2^33 ns.
pub const LATENCY_BUCKETS: usize = 26;

/// Upper bounds of the finite histogram buckets, in nanoseconds.
pub fn latency_bucket_bounds_ns() -> [u64; LATENCY_BUCKETS] {
    std::array::from_fn(|i| 1u64 << (FIRST_BUCKET_LOG2 + i as u32))
}

/// The bucket of a latency of `ns`: the first `i` with `ns <= bound[i]`, or
/// `LATENCY_BUCKETS` (+Inf).
#[inline(always)]
fn bucket(ns: u64) -> usize {
    let log2_ceil = 64 - ns.saturating_sub(1).leading_zeros();
    (log2_ceil.saturating_sub(FIRST_BUCKET_LOG2) as usize).min(LATENCY_BUCKETS)
}

#[derive(Default)]
struct OpCounters {
    ops: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    lat_total: AtomicU64,
    /// Stored as `!min` so that the zero default means "none yet".
    lat_min: AtomicU64,
    lat_max: AtomicU64,
    hist: [AtomicU64; LATENCY_BUCKETS + 1],
}

/// One core's counters for one device.
pub(super) struct CoreCounters {
    /// Several threads write this entry (threads without a slot).
    shared: bool,
    /// `tsc::ticks_to_ns_fast`'s factor, kept here so the data path reads
    /// no global.
    ns_per_tick: u64,
    ops: [OpCounters; IoType::COUNT],
    submitted: AtomicU64,
    completed: AtomicU64,
}

impl CoreCounters {
    fn new(shared: bool) -> Self {
        CoreCounters {
            shared,
            ns_per_tick: tsc::ns_per_tick_fixed(),
            ops: Default::default(),
            submitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
        }
    }

    #[inline(always)]
    fn add(&self, c: &AtomicU64, n: u64) {
        if self.shared {
            c.fetch_add(n, Ordering::Relaxed);
        } else {
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
    }

    /// An IO was handed to the device.
    #[inline(always)]
    pub(super) fn submitted(&self) {
        self.add(&self.submitted, 1);
    }

    /// An IO finished after `ticks`.
    #[inline(always)]
    pub(super) fn completed(&self, op: IoType, bytes: u64, ok: bool, ticks: u64) {
        self.add(&self.completed, 1);
        let o = &self.ops[op.index()];
        if !ok {
            self.add(&o.errors, 1);
            return;
        }
        self.add(&o.ops, 1);
        self.add(&o.bytes, bytes);
        self.add(&o.lat_total, ticks);
        let ns = ((ticks as u128 * self.ns_per_tick as u128) >> 32) as u64;
        self.add(&o.hist[bucket(ns)], 1);
        if self.shared {
            o.lat_min.fetch_max(!ticks, Ordering::Relaxed);
            o.lat_max.fetch_max(ticks, Ordering::Relaxed);
        } else {
            if !ticks > o.lat_min.load(Ordering::Relaxed) {
                o.lat_min.store(!ticks, Ordering::Relaxed);
            }
            if ticks > o.lat_max.load(Ordering::Relaxed) {
                o.lat_max.store(ticks, Ordering::Relaxed);
            }
        }
    }

    /// Zeroes every counter. On a core's own entry, call it on that core
    /// (the single-writer rule); it is exact there.
    fn reset(&self) {
        for o in &self.ops {
            for c in [
                &o.ops,
                &o.bytes,
                &o.errors,
                &o.lat_total,
                &o.lat_min,
                &o.lat_max,
            ] {
                c.store(0, Ordering::Relaxed);
            }
            for h in &o.hist {
                h.store(0, Ordering::Relaxed);
            }
        }
        // In flight is submitted - completed: keep it, drop the history.
        let in_flight = self
            .submitted
            .load(Ordering::Relaxed)
            .wrapping_sub(self.completed.load(Ordering::Relaxed));
        self.submitted.store(in_flight, Ordering::Relaxed);
        self.completed.store(0, Ordering::Relaxed);
    }
}

/// A device's counters: one entry per core slot that used the device, plus
/// one for threads without a slot. Entries are allocated when a core first
/// opens a channel.
pub(super) struct DeviceStats {
    cores: Box<[OnceLock<Arc<CachePadded<CoreCounters>>>]>,
}

impl DeviceStats {
    pub(super) fn new() -> Self {
        DeviceStats {
            cores: (0..=MAX_SLOTS).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The entry of `slot` (or of the threads without one).
    pub(super) fn core(&self, slot: Option<u32>) -> Arc<CachePadded<CoreCounters>> {
        let i = slot.map_or(MAX_SLOTS, |s| s as usize);
        self.cores[i]
            .get_or_init(|| Arc::new(CachePadded::new(CoreCounters::new(slot.is_none()))))
            .clone()
    }

    /// Zeroes the entry of `slot`; called on the thread holding that slot.
    pub(super) fn reset(&self, slot: Option<u32>) {
        let i = slot.map_or(MAX_SLOTS, |s| s as usize);
        if let Some(c) = self.cores[i].get() {
            c.reset();
        }
    }

    /// Sums every core's counters.
    pub(super) fn snapshot(&self) -> IoStats {
        let mut s = IoStats::default();
        let mut submitted = 0u64;
        let mut completed = 0u64;
        for c in self.cores.iter().filter_map(|c| c.get()) {
            submitted = submitted.wrapping_add(c.submitted.load(Ordering::Relaxed));
            completed = completed.wrapping_add(c.completed.load(Ordering::Relaxed));
            for op in IoType::ALL {
                let o = &c.ops[op.index()];
                let t = &mut s.ops[op.index()];
                t.ops += o.ops.load(Ordering::Relaxed);
                t.bytes += o.bytes.load(Ordering::Relaxed);
                t.errors += o.errors.load(Ordering::Relaxed);
                t.latency_total_ns += tsc::ticks_to_ns(o.lat_total.load(Ordering::Relaxed));
                let min = !o.lat_min.load(Ordering::Relaxed);
                if min != u64::MAX {
                    let min = tsc::ticks_to_ns(min);
                    t.latency_min_ns = Some(t.latency_min_ns.map_or(min, |m| m.min(min)));
                }
                t.latency_max_ns = t
                    .latency_max_ns
                    .max(tsc::ticks_to_ns(o.lat_max.load(Ordering::Relaxed)));
                for (b, h) in t.latency_buckets.iter_mut().zip(&o.hist) {
                    *b += h.load(Ordering::Relaxed);
                }
            }
        }
        s.in_flight = submitted.wrapping_sub(completed);
        s
    }
}

/// Counters of one operation type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OpStats {
    /// Completed successfully.
    pub ops: u64,
    /// Bytes moved by those.
    pub bytes: u64,
    /// Completed with an error.
    pub errors: u64,
    /// Sum of latencies.
    pub latency_total_ns: u64,
    /// Smallest latency, if any IO completed.
    pub latency_min_ns: Option<u64>,
    /// Largest latency.
    pub latency_max_ns: u64,
    /// Successful IOs per latency bucket (not cumulative): bucket `i` holds
    /// those above bound `i - 1` and at most bound `i` of
    /// [`latency_bucket_bounds_ns`]; the last holds those above every bound.
    pub latency_buckets: [u64; LATENCY_BUCKETS + 1],
}

/// A device's IO counters, summed over cores.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoStats {
    /// Per operation, indexed by [`IoType::index`].
    pub ops: [OpStats; IoType::COUNT],
    /// IOs handed to the device and not yet completed.
    pub in_flight: u64,
}

impl IoStats {
    /// Counters of one operation.
    pub fn op(&self, op: IoType) -> &OpStats {
        &self.ops[op.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_their_bounds() {
        let bounds = latency_bucket_bounds_ns();
        assert_eq!(bounds[0], 256);
        assert_eq!(bounds[LATENCY_BUCKETS - 1], 1 << 33);
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(256), 0);
        assert_eq!(bucket(257), 1);
        assert_eq!(bucket(512), 1);
        for (i, &b) in bounds.iter().enumerate() {
            assert_eq!(bucket(b), i, "bound {b}");
            assert_eq!(bucket(b + 1), i + 1, "just above {b}");
        }
        assert_eq!(bucket(u64::MAX), LATENCY_BUCKETS);
    }

    #[test]
    fn counts_sum_over_cores_and_reset_keeps_in_flight() {
        let s = DeviceStats::new();
        let a = s.core(Some(3));
        let b = s.core(None);
        for _ in 0..3 {
            a.submitted();
        }
        a.completed(IoType::Read, 4096, true, tsc::ns_to_ticks(1000));
        a.completed(IoType::Read, 4096, false, 0);
        b.submitted();
        b.completed(IoType::Write, 512, true, tsc::ns_to_ticks(100));
        let t = s.snapshot();
        assert_eq!(t.op(IoType::Read).ops, 1);
        assert_eq!(t.op(IoType::Read).errors, 1);
        assert_eq!(t.op(IoType::Read).bytes, 4096);
        assert_eq!(t.op(IoType::Write).bytes, 512);
        assert_eq!(t.in_flight, 1);
        let buckets = t.op(IoType::Read).latency_buckets;
        assert_eq!(buckets.iter().sum::<u64>(), 1);
        // ~1000 ns lands in (512, 1024] or next to it, after tick rounding.
        assert!(buckets[1] + buckets[2] + buckets[3] == 1, "{buckets:?}");
        s.reset(Some(3));
        s.reset(None);
        let t = s.snapshot();
        assert_eq!(t.op(IoType::Read), &OpStats::default());
        assert_eq!(t.op(IoType::Write).ops, 0);
        assert_eq!(t.in_flight, 1, "in-flight IOs survive a reset");
    }
}
