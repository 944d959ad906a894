//! How long NBD clients wait for their replies, per export and command:
//! from the request read to its reply written to the socket, kept per core
//! in the device statistics' latency buckets and summed on read.
//!
//! Thread: each core slot's entry is written only by the reactor holding
//! that slot (the connections of the export it runs), with plain load +
//! store on atomics: no locked instruction and no line shared between cores
//! on the data path. Connections only run on reactors, which all hold a
//! slot. The metrics exporter reads and sums every entry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_utils::CachePadded;

use super::transmission::COMMANDS;
use crate::bdev::{LATENCY_BUCKETS, OpStats, latency_bucket_bounds_ns};
use crate::env::core_slot::MAX_SLOTS;
use crate::env::tsc;

/// One command's durations on one core.
#[derive(Default)]
struct CommandDurations {
    /// Sum of the durations, in TSC ticks.
    total_ticks: AtomicU64,
    /// Replies per latency bucket (not cumulative), `+Inf` last.
    buckets: [AtomicU64; LATENCY_BUCKETS + 1],
}

/// One core's request durations for one export.
pub struct CoreDurations {
    /// `tsc::ticks_to_ns_fast`'s factor, kept here so the data path reads
    /// no global.
    ns_per_tick: u64,
    commands: [CommandDurations; COMMANDS.len()],
}

impl CoreDurations {
    fn new() -> Self {
        CoreDurations {
            ns_per_tick: tsc::ns_per_tick_fixed(),
            commands: Default::default(),
        }
    }

    /// A reply to a request of command `index` (a [`COMMANDS`] index)
    /// reached the socket `ticks` after the request was read.
    #[inline]
    pub(super) fn record(&self, index: usize, ticks: u64) {
        let Some(c) = self.commands.get(index) else {
            return;
        };
        // The single writer: a plain read-modify-write is exact.
        let add = |counter: &AtomicU64, n: u64| {
            counter.store(
                counter.load(Ordering::Relaxed).wrapping_add(n),
                Ordering::Relaxed,
            )
        };
        add(&c.total_ticks, ticks);
        let ns = ((ticks as u128 * self.ns_per_tick as u128) >> 32) as u64;
        // At most the bounds' count: the last bucket, `+Inf`.
        let bucket = latency_bucket_bounds_ns().partition_point(|&b| b < ns);
        if let Some(b) = c.buckets.get(bucket) {
            add(b, 1);
        }
    }
}

/// An export's request durations: one entry per core slot whose reactor
/// ran one of its connections.
pub struct RequestDurations {
    cores: Box<[OnceLock<Arc<CachePadded<CoreDurations>>>]>,
}

impl Default for RequestDurations {
    fn default() -> Self {
        RequestDurations {
            cores: (0..MAX_SLOTS).map(|_| OnceLock::new()).collect(),
        }
    }
}

impl RequestDurations {
    /// The entry of core slot `slot`, for the thread holding it; `None`
    /// for a slot out of range.
    pub fn core(&self, slot: u32) -> Option<Arc<CachePadded<CoreDurations>>> {
        let entry = self.cores.get(slot as usize)?;
        Some(
            entry
                .get_or_init(|| Arc::new(CachePadded::new(CoreDurations::new())))
                .clone(),
        )
    }

    /// Per [`COMMANDS`] entry, summed over cores: `ops` is the replies
    /// counted, `latency_total_ns` and `latency_buckets` their durations
    /// (the other fields stay 0).
    pub fn snapshot(&self) -> Vec<OpStats> {
        let mut out = vec![OpStats::default(); COMMANDS.len()];
        for core in self.cores.iter().filter_map(|c| c.get()) {
            for (t, c) in out.iter_mut().zip(&core.commands) {
                t.latency_total_ns += tsc::ticks_to_ns(c.total_ticks.load(Ordering::Relaxed));
                for (b, h) in t.latency_buckets.iter_mut().zip(&c.buckets) {
                    let n = h.load(Ordering::Relaxed);
                    *b += n;
                    t.ops += n;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_bucketed_per_command_and_summed_over_cores() {
        let d = RequestDurations::default();
        let a = d.core(0).unwrap();
        let b = d.core(5).unwrap();
        assert!(d.core(MAX_SLOTS as u32).is_none());
        let us = |n: u64| tsc::ns_to_ticks(n * 1000);
        a.record(0, us(3)); // read
        a.record(0, us(40));
        b.record(0, us(40));
        b.record(1, us(5000)); // write
        let s = d.snapshot();
        assert_eq!(s[0].ops, 3);
        assert_eq!(s[1].ops, 1);
        assert!(s[2..].iter().all(|o| o.ops == 0));
        let bounds = latency_bucket_bounds_ns();
        let at = |ns: u64| bounds.partition_point(|&b| b < ns);
        // Within the TSC conversion's rounding of the bound: a bucket or the next.
        let near = |s: &OpStats, ns: u64| {
            s.latency_buckets[at(ns - ns / 100)..=at(ns + ns / 100)]
                .iter()
                .sum::<u64>()
        };
        assert_eq!(near(&s[0], 3_000), 1);
        assert_eq!(near(&s[0], 40_000), 2);
        assert_eq!(near(&s[1], 5_000_000), 1);
        let total = s[0].latency_total_ns;
        assert!((82_000..=84_000).contains(&total), "{total} ns");
        // Out of range: ignored, not a panic.
        a.record(COMMANDS.len(), 1);
    }
}
