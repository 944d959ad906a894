//! Per-reactor counters: written by the reactor, read by anyone.
//!
//! Thread: written only by the owning reactor thread (plain load + store, no
//! locked instruction in the loop); read relaxed by the control plane.

use std::sync::atomic::{AtomicU64, Ordering};

use super::poll_mode::PollMode;
use crate::env::tsc;

/// A reactor's counters at one moment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReactorStats {
    /// Reactor index in the group.
    pub index: usize,
    /// OS CPU it is pinned to.
    pub cpu: u32,
    /// `busy` or `adaptive`.
    pub poll_mode: &'static str,
    /// Rounds of the poll loop.
    pub iterations: u64,
    /// Time in rounds that found work, in nanoseconds.
    pub busy_ns: u64,
    /// Time in rounds that found none, sleeps included, in nanoseconds.
    pub idle_ns: u64,
    /// Cross-core messages handled.
    pub messages: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    iterations: AtomicU64,
    busy_ticks: AtomicU64,
    idle_ticks: AtomicU64,
    messages: AtomicU64,
    sleeps: AtomicU64,
}

#[inline(always)]
fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl Counters {
    #[inline(always)]
    pub(super) fn round(&self, busy: bool, ticks: u64) {
        add(&self.iterations, 1);
        add(
            if busy {
                &self.busy_ticks
            } else {
                &self.idle_ticks
            },
            ticks,
        );
    }

    /// The reactor starts a sleep.
    pub(super) fn sleeping(&self) {
        add(&self.sleeps, 1);
    }

    /// Sleeps started so far.
    pub(super) fn sleeps(&self) -> u64 {
        self.sleeps.load(Ordering::Relaxed)
    }

    pub(super) fn slept(&self, ticks: u64) {
        add(&self.idle_ticks, ticks);
    }

    pub(super) fn add_messages(&self, n: u64) {
        add(&self.messages, n);
    }

    pub(super) fn snapshot(&self, index: usize, cpu: u32, mode: PollMode) -> ReactorStats {
        ReactorStats {
            index,
            cpu,
            poll_mode: mode.name(),
            iterations: self.iterations.load(Ordering::Relaxed),
            busy_ns: tsc::ticks_to_ns(self.busy_ticks.load(Ordering::Relaxed)),
            idle_ns: tsc::ticks_to_ns(self.idle_ticks.load(Ordering::Relaxed)),
            messages: self.messages.load(Ordering::Relaxed),
        }
    }
}
