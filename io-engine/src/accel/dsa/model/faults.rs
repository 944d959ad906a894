//! [`Faults`]: what a test makes the model DSA device do that a kind
//! device would not: page faults after a given number of bytes, shared-WQ
//! refusals, slow completion records, slow descriptors, manual stepping.
//!
//! Thread: armed by tests from any thread; read by the device thread (or
//! the stepping test thread) and the submitting threads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Faults to inject, all off by default (what hardware does when the
/// memory is present and the WQ has room).
#[derive(Debug, Default)]
pub struct Faults {
    /// Data descriptors started so far.
    started: AtomicU64,
    /// Fault the data descriptor with this start number (0: none).
    fault_at: AtomicU64,
    /// ... after this many bytes ...
    fault_after: AtomicU64,
    /// ... on its write side (else its read side).
    fault_write: AtomicBool,
    /// ENQCMDs still to refuse.
    refuse: AtomicU64,
    /// Completion record phases' delay in nanoseconds (0: none).
    slow_completion_ns: AtomicU64,
    /// Per-descriptor delay in nanoseconds (0: none).
    slow_ns: AtomicU64,
    /// Manual stepping.
    manual: AtomicBool,
}

impl Faults {
    /// The `n`-th data descriptor from now (1: the next; descriptors of
    /// batches count) faults after `after` bytes, on its destination
    /// (`write`) or its source (a fill has only a destination, a compare or
    /// CRC only sources). A descriptor shorter than that does not fault.
    pub fn page_fault(&self, n: u64, after: u32, write: bool) {
        self.fault_after.store(after as u64, Ordering::Relaxed);
        self.fault_write.store(write, Ordering::Relaxed);
        self.fault_at.store(
            self.started.load(Ordering::Acquire) + n.max(1),
            Ordering::Release,
        );
    }

    /// The next `n` ENQCMDs are refused (Retry) whatever the WQ's
    /// occupancy, as a device busy elsewhere may.
    pub fn refuse(&self, n: u64) {
        self.refuse.store(n, Ordering::Release);
    }

    /// Each completion record is first overwritten with garbage (its status
    /// left 0), then after `d` written with its real fields, then after `d`
    /// again given its status: a driver that reads a field before it sees
    /// the status reads garbage. `Duration::ZERO` turns it off.
    pub fn slow_completion(&self, d: Duration) {
        self.slow_completion_ns
            .store(d.as_nanos() as u64, Ordering::Release);
    }

    /// Every descriptor takes `d` (the device holds its address space
    /// meanwhile, as a long transfer would). `Duration::ZERO` turns it off.
    pub fn slow(&self, d: Duration) {
        self.slow_ns.store(d.as_nanos() as u64, Ordering::Release);
    }

    /// Manual stepping: the device thread executes nothing; a test calls
    /// [`ModelHandle::step`](super::ModelHandle::step) for each descriptor.
    pub fn manual(&self, on: bool) {
        self.manual.store(on, Ordering::Release);
    }

    /// Stops every injection (manual stepping stays as it is).
    pub fn clear(&self) {
        self.fault_at.store(0, Ordering::Release);
        self.refuse.store(0, Ordering::Release);
        self.slow_completion_ns.store(0, Ordering::Release);
        self.slow_ns.store(0, Ordering::Release);
    }

    /// A data descriptor starts: the injected fault it must take, as
    /// (bytes after which, on the write side).
    pub(super) fn start_data(&self) -> Option<(u64, bool)> {
        let n = self.started.fetch_add(1, Ordering::AcqRel) + 1;
        if self.fault_at.load(Ordering::Acquire) != n {
            return None;
        }
        self.fault_at.store(0, Ordering::Release);
        Some((
            self.fault_after.load(Ordering::Relaxed),
            self.fault_write.load(Ordering::Relaxed),
        ))
    }

    /// Whether this ENQCMD is to be refused.
    pub(super) fn take_refusal(&self) -> bool {
        self.refuse
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    pub(super) fn slow_completion_delay(&self) -> Option<Duration> {
        let ns = self.slow_completion_ns.load(Ordering::Acquire);
        (ns > 0).then(|| Duration::from_nanos(ns))
    }

    pub(super) fn slow_delay(&self) -> Option<Duration> {
        let ns = self.slow_ns.load(Ordering::Acquire);
        (ns > 0).then(|| Duration::from_nanos(ns))
    }

    pub(super) fn is_manual(&self) -> bool {
        self.manual.load(Ordering::Acquire)
    }
}
