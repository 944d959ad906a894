//! [`Totals`]: the sums of the driver counters of every channel of an I/OAT
//! module.
//!
//! Thread: any (a plain value, read from the channels' atomic counters).

/// Totals of the driver counters of every channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Descriptors written (null descriptors included).
    pub descriptors: u64,
    /// DMACOUNT writes.
    pub doorbells: u64,
    /// Requests that succeeded.
    pub completed: u64,
    /// Requests failed with an engine error.
    pub failed: u64,
    /// Requests refused by the driver.
    pub invalid: u64,
    /// Requests built again after a halt.
    pub resubmitted: u64,
    /// Halts.
    pub halts: u64,
    /// Timeouts.
    pub timeouts: u64,
    /// Unusable completion words.
    pub bad_completions: u64,
    /// Channel starts.
    pub starts: u64,
    /// Requests that waited for ring space.
    pub ring_full: u64,
}
