//! [`ModelCounters`] (the model DSA device's tell-tales) and
//! [`Violation`] (what a driver did that hardware would punish, silently
//! or not).
//!
//! Thread: counted by the submitting threads and the device thread, read
//! by tests and accel-perf from any thread.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of a model device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelCounters {
    /// Portal writes: every submission attempt (accepted, refused,
    /// dropped or torn). What a doorbell costs on hardware.
    pub portal_writes: u64,
    /// Submissions the device took.
    pub accepted: u64,
    /// ENQCMDs a shared WQ refused (the submitter retries).
    pub retries: u64,
    /// Writes dropped: to a full dedicated WQ, torn, or plain writes to a
    /// shared WQ.
    pub dropped: u64,
    /// Descriptors executed (submitted ones and those of batches).
    pub descriptors: u64,
    /// Batch descriptors executed.
    pub batches: u64,
    /// Completion records written.
    pub completions: u64,
    /// Partial completions reported (page faults).
    pub page_faults: u64,
    /// Injected faults resolved under Block on Fault.
    pub faults_resolved: u64,
    /// Software errors (SWERR) recorded.
    pub software_errors: u64,
    /// Violations recorded.
    pub violations: u64,
}

/// The live counters.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub portal_writes: AtomicU64,
    pub accepted: AtomicU64,
    pub retries: AtomicU64,
    pub dropped: AtomicU64,
    pub descriptors: AtomicU64,
    pub batches: AtomicU64,
    pub completions: AtomicU64,
    pub page_faults: AtomicU64,
    pub faults_resolved: AtomicU64,
    pub software_errors: AtomicU64,
    pub violations: AtomicU64,
}

impl Counters {
    pub(super) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> ModelCounters {
        let l = |a: &AtomicU64| a.load(Ordering::Acquire);
        ModelCounters {
            portal_writes: l(&self.portal_writes),
            accepted: l(&self.accepted),
            retries: l(&self.retries),
            dropped: l(&self.dropped),
            descriptors: l(&self.descriptors),
            batches: l(&self.batches),
            completions: l(&self.completions),
            page_faults: l(&self.page_faults),
            faults_resolved: l(&self.faults_resolved),
            software_errors: l(&self.software_errors),
            violations: l(&self.violations),
        }
    }
}

/// Something a driver did that the DSA specification forbids or that
/// would go wrong on hardware; the model records it (and drops the write
/// where hardware would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// A portal write that was not one 64-byte, 64-byte aligned store
    /// inside the portal page: dropped.
    TornWrite {
        /// The WQ.
        wq: usize,
        /// Offset in the portal page.
        offset: usize,
        /// Bytes written.
        len: usize,
    },
    /// A plain (non-ENQCMD) write to a shared WQ's portal: dropped.
    PlainWriteToShared {
        /// The WQ.
        wq: usize,
    },
    /// A descriptor written to a full dedicated WQ: dropped.
    DedicatedOverflow {
        /// The WQ.
        wq: usize,
    },
    /// A completion record whose status was not 0 when its descriptor was
    /// submitted or started: the driver did not clear it, and would take
    /// the old status for the new one's.
    StaleRecord {
        /// The WQ.
        wq: usize,
        /// The record's address.
        addr: u64,
        /// The status found.
        status: u8,
    },
    /// A descriptor submitted with a completion record that a descriptor
    /// still in flight owns (its own, or one a batch's descriptor requests):
    /// the device would write one over the other.
    RecordInUse {
        /// The WQ.
        wq: usize,
        /// The record's address.
        addr: u64,
    },
    /// A batch descriptor that changed between the batch's submission and
    /// its execution: the driver wrote a list the device owned.
    BatchListRewritten {
        /// The WQ.
        wq: usize,
        /// The changed descriptor's address.
        addr: u64,
    },
}
