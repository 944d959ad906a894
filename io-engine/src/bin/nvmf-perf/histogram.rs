//! A latency histogram with bounded relative error: 32 linear buckets per
//! power of two of nanoseconds (under 3.2 % apart), exact below 64 ns,
//! for the percentiles of the report. Recording is an index computation
//! and an increment; nothing is allocated after creation.
//!
//! Thread: the worker that owns the connection; merged on `main`.

/// Sub-buckets per power of two, as a shift.
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets: enough for any u64.
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// Counts of latencies by bucket.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    total: u64,
}

fn index(ns: u64) -> usize {
    if ns < 2 * SUB {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros();
    let shift = msb - SUB_BITS;
    (((shift + 1) as u64) << SUB_BITS) as usize + ((ns >> shift) & (SUB - 1)) as usize
}

/// The largest value of bucket `i`.
fn upper(i: usize) -> u64 {
    let i = i as u64;
    if i < 2 * SUB {
        return i;
    }
    let shift = (i >> SUB_BITS) - 1;
    let end = (((i & (SUB - 1)) + SUB + 1) as u128) << shift;
    (end - 1).min(u64::MAX as u128) as u64
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            total: 0,
        }
    }

    /// Counts one latency of `ns` nanoseconds.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[index(ns)] += 1;
        self.total += 1;
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
    }

    /// The latency at or below which `pct` percent of those recorded lie,
    /// in nanoseconds (the upper bound of its bucket; 0 when empty).
    pub fn percentile(&self, pct: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((pct / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return upper(i);
            }
        }
        upper(BUCKETS - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in (0..100_000u64).chain([1 << 40, u64::MAX]) {
            let i = index(v);
            assert!(i >= last, "{v}");
            assert!(upper(i) >= v, "{v} above its bucket's bound {}", upper(i));
            assert!(upper(i) - v <= v / 30 + 1, "{v}: bound {}", upper(i));
            last = i;
        }
        assert!(index(u64::MAX) < BUCKETS);
    }

    #[test]
    fn percentiles_come_from_the_counts() {
        let mut h = Histogram::new();
        assert_eq!(h.percentile(50.0), 0);
        for v in 1..=1000 {
            h.record(v * 1000);
        }
        let p50 = h.percentile(50.0);
        assert!((500_000..=516_000).contains(&p50), "{p50}");
        let p99 = h.percentile(99.0);
        assert!((990_000..=1_022_000).contains(&p99), "{p99}");
        let mut m = Histogram::new();
        m.merge(&h);
        assert_eq!(m.percentile(99.9), h.percentile(99.9));
    }
}
