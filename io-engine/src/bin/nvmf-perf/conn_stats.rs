//! What one connection did in the run: commands completed, bytes, latency
//! (sum, extremes, histogram), failures and verification counts. Also the
//! sum of several.
//!
//! Thread: the worker that owns the connection; merged on `main`.

use super::histogram::Histogram;

/// One connection's figures.
#[derive(Clone)]
pub struct ConnStats {
    /// Commands completed successfully.
    pub ios: u64,
    /// Bytes they moved (a Copy counts its length).
    pub bytes: u64,
    /// Sum of their latencies, in nanoseconds.
    pub lat_sum_ns: u64,
    /// Smallest latency, in nanoseconds (u64::MAX before the first).
    pub lat_min_ns: u64,
    /// Largest latency, in nanoseconds.
    pub lat_max_ns: u64,
    /// Latencies by bucket.
    pub hist: Histogram,
    /// Commands that completed with an error status, or never completed.
    pub failed: u64,
    /// Reads whose data was checked against what was written.
    pub verified: u64,
    /// Checked reads whose data did not match.
    pub miscompares: u64,
    /// The first failure, in words.
    pub first_error: Option<String>,
}

impl ConnStats {
    /// Nothing done yet.
    pub fn new() -> ConnStats {
        ConnStats {
            ios: 0,
            bytes: 0,
            lat_sum_ns: 0,
            lat_min_ns: u64::MAX,
            lat_max_ns: 0,
            hist: Histogram::new(),
            failed: 0,
            verified: 0,
            miscompares: 0,
            first_error: None,
        }
    }

    /// One command completed successfully after `ns` nanoseconds.
    #[inline]
    pub fn done(&mut self, bytes: u64, ns: u64) {
        self.ios += 1;
        self.bytes += bytes;
        self.lat_sum_ns += ns;
        self.lat_min_ns = self.lat_min_ns.min(ns);
        self.lat_max_ns = self.lat_max_ns.max(ns);
        self.hist.record(ns);
    }

    /// `n` commands failed; `why` is kept if it is the first failure.
    pub fn fail(&mut self, n: u64, why: impl FnOnce() -> String) {
        self.failed += n;
        if self.first_error.is_none() {
            self.first_error = Some(why());
        }
    }

    /// Adds `o`'s figures.
    pub fn merge(&mut self, o: &ConnStats) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.lat_sum_ns += o.lat_sum_ns;
        self.lat_min_ns = self.lat_min_ns.min(o.lat_min_ns);
        self.lat_max_ns = self.lat_max_ns.max(o.lat_max_ns);
        self.hist.merge(&o.hist);
        self.failed += o.failed;
        self.verified += o.verified;
        self.miscompares += o.miscompares;
        if self.first_error.is_none() {
            self.first_error.clone_from(&o.first_error);
        }
    }
}
