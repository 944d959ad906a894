//! Per-device IO statistics, kept per core and summed on read.
//!
//! Thread: each core's entry is written only by that core's reactor (plain
//! load + store on atomics: no locked instruction per IO); the control plane
//! reads and sums them. Latencies are kept in cycle-clock ticks and reported
//! in nanoseconds.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use super::io::IoType;
use crate::env::core_slot::MAX_SLOTS;
use crate::env::tsc;

#[derive(Default)]
struct OpCounters {
    ops: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    lat_total: AtomicU64,
    lat_min: AtomicU64,
    lat_max: AtomicU64,
}

#[derive(Default)]
struct CoreCounters {
    ops: [OpCounters; 5],
    submitted: AtomicU64,
    completed: AtomicU64,
}

#[inline(always)]
fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// A device's counters: one entry per core slot, plus one for threads
/// without a slot (whose updates use `fetch_add`).
pub(super) struct DeviceStats {
    cores: Box<[CachePadded<CoreCounters>]>,
}

impl DeviceStats {
    pub(super) fn new() -> Self {
        DeviceStats {
            cores: (0..=MAX_SLOTS)
                .map(|_| CachePadded::new(CoreCounters::default()))
                .collect(),
        }
    }

    #[inline(always)]
    fn core(&self, slot: Option<u32>) -> &CoreCounters {
        &self.cores[slot.map_or(MAX_SLOTS, |s| s as usize)]
    }

    /// An IO was handed to the device.
    #[inline(always)]
    pub(super) fn submitted(&self, slot: Option<u32>) {
        let c = self.core(slot);
        if slot.is_some() {
            add(&c.submitted, 1);
        } else {
            c.submitted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An IO finished after `ticks`.
    #[inline(always)]
    pub(super) fn completed(
        &self,
        slot: Option<u32>,
        op: IoType,
        bytes: u64,
        ok: bool,
        ticks: u64,
    ) {
        let c = self.core(slot);
        let o = &c.ops[op.index()];
        if slot.is_some() {
            add(&c.completed, 1);
            if ok {
                add(&o.ops, 1);
                add(&o.bytes, bytes);
                add(&o.lat_total, ticks);
                // min is stored as `!min` so the zero default means "none yet".
                let min = !o.lat_min.load(Ordering::Relaxed);
                if ticks < min {
                    o.lat_min.store(!ticks, Ordering::Relaxed);
                }
                if ticks > o.lat_max.load(Ordering::Relaxed) {
                    o.lat_max.store(ticks, Ordering::Relaxed);
                }
            } else {
                add(&o.errors, 1);
            }
        } else {
            c.completed.fetch_add(1, Ordering::Relaxed);
            if ok {
                o.ops.fetch_add(1, Ordering::Relaxed);
                o.bytes.fetch_add(bytes, Ordering::Relaxed);
                o.lat_total.fetch_add(ticks, Ordering::Relaxed);
                o.lat_min.fetch_max(!ticks, Ordering::Relaxed);
                o.lat_max.fetch_max(ticks, Ordering::Relaxed);
            } else {
                o.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Sums every core's counters.
    pub(super) fn snapshot(&self) -> IoStats {
        let mut s = IoStats::default();
        let mut submitted = 0u64;
        let mut completed = 0u64;
        for c in self.cores.iter() {
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
}

/// A device's IO counters, summed over cores.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoStats {
    /// Per operation, indexed by [`IoType::index`].
    pub ops: [OpStats; 5],
    /// IOs handed to the device and not yet completed.
    pub in_flight: u64,
}

impl IoStats {
    /// Counters of one operation.
    pub fn op(&self, op: IoType) -> &OpStats {
        &self.ops[op.index()]
    }
}
