//! [`Totals`]: the sums of the driver counters of every channel (work
//! queue) of a DSA module.
//!
//! Thread: any (a plain value, read from the channels' atomic counters).

/// Sums of the driver counters of every channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Work descriptors written.
    pub descriptors: u64,
    /// Portal writes accepted (one per submission: a batch or a lone
    /// descriptor).
    pub portal_writes: u64,
    /// Batch descriptors among them.
    pub batches: u64,
    /// ENQCMD "retry" answers.
    pub retries: u64,
    /// Requests that succeeded.
    pub completed: u64,
    /// Requests failed with an engine error.
    pub failed: u64,
    /// Requests refused.
    pub invalid: u64,
    /// Partial completions (page faults).
    pub page_faults: u64,
    /// Pieces resumed after one.
    pub resumed: u64,
    /// Descriptors of a completed batch that never ran.
    pub not_run: u64,
    /// Faulting pages touched before a resumption.
    pub touched: u64,
    /// Timeouts.
    pub timeouts: u64,
}
