//! Per-interval IO rates from two consecutive `GetIoStats` readings, for
//! `stats io --watch`. The interval is the difference of the readings'
//! engine uptimes, never the client's clock.
//!
//! Thread: the CLI's main thread (pure functions).

use io_engine_api::v1::{BdevIoStats, GetIoStatsResponse, OpStats};
use serde::Serialize;

/// The rates of every device over one interval; also the JSON line printed
/// per interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct IntervalRates {
    /// Engine uptime at the end of the interval, nanoseconds.
    pub(crate) uptime_ns: u64,
    /// Length of the interval by the engine's clock, nanoseconds.
    pub(crate) interval_ns: u64,
    /// One entry per device of the later reading, in its order.
    pub(crate) stats: Vec<DeviceRates>,
}

/// One device's rates over an interval; total = read + write.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct DeviceRates {
    /// Device name.
    pub(crate) name: String,
    /// Reads per second.
    pub(crate) read_iops: f64,
    /// Writes per second.
    pub(crate) write_iops: f64,
    /// Reads and writes per second.
    pub(crate) total_iops: f64,
    /// Bytes read per second.
    pub(crate) read_bytes_per_sec: f64,
    /// Bytes written per second.
    pub(crate) write_bytes_per_sec: f64,
    /// Bytes read and written per second.
    pub(crate) total_bytes_per_sec: f64,
}

/// The rates between the readings `before` and `after`.
///
/// A device counts from zero over the interval when it is absent from
/// `before` (created meanwhile), when one of its counters decreased (reset
/// or re-created), or when the engine's uptime decreased (restarted: the
/// interval is then the uptime of `after`). A zero interval gives zero rates.
pub(crate) fn interval_rates(
    before: &GetIoStatsResponse,
    after: &GetIoStatsResponse,
) -> IntervalRates {
    let restarted = after.uptime_ns < before.uptime_ns;
    let interval_ns = if restarted {
        after.uptime_ns
    } else {
        after.uptime_ns - before.uptime_ns
    };
    let zero = Counters::default();
    let stats = after
        .stats
        .iter()
        .map(|dev| {
            let now = Counters::of(dev);
            let then = before
                .stats
                .iter()
                .find(|b| b.name == dev.name)
                .filter(|_| !restarted)
                .map(Counters::of)
                .filter(|then| then.all_le(&now))
                .unwrap_or(zero);
            let rate = |later: u64, earlier: u64| per_sec(later - earlier, interval_ns);
            let read_iops = rate(now.read_ops, then.read_ops);
            let write_iops = rate(now.write_ops, then.write_ops);
            let read_bytes_per_sec = rate(now.read_bytes, then.read_bytes);
            let write_bytes_per_sec = rate(now.write_bytes, then.write_bytes);
            DeviceRates {
                name: dev.name.clone(),
                read_iops,
                write_iops,
                total_iops: read_iops + write_iops,
                read_bytes_per_sec,
                write_bytes_per_sec,
                total_bytes_per_sec: read_bytes_per_sec + write_bytes_per_sec,
            }
        })
        .collect();
    IntervalRates {
        uptime_ns: after.uptime_ns,
        interval_ns,
        stats,
    }
}

/// The counters the rates are computed from.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    read_ops: u64,
    read_bytes: u64,
    write_ops: u64,
    write_bytes: u64,
}

impl Counters {
    fn of(s: &BdevIoStats) -> Self {
        let op = |o: Option<&OpStats>| o.map_or((0, 0), |o| (o.ops, o.bytes));
        let (read_ops, read_bytes) = op(s.read.as_ref());
        let (write_ops, write_bytes) = op(s.write.as_ref());
        Self {
            read_ops,
            read_bytes,
            write_ops,
            write_bytes,
        }
    }

    /// True when no counter of `self` is above the one of `later`.
    fn all_le(&self, later: &Self) -> bool {
        self.read_ops <= later.read_ops
            && self.read_bytes <= later.read_bytes
            && self.write_ops <= later.write_ops
            && self.write_bytes <= later.write_bytes
    }
}

/// `count` per second over `interval_ns`; 0 for a zero interval.
fn per_sec(count: u64, interval_ns: u64) -> f64 {
    if interval_ns == 0 {
        0.0
    } else {
        count as f64 * 1e9 / interval_ns as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn dev(name: &str, reads: u64, writes: u64) -> BdevIoStats {
        let op = |ops: u64| {
            Some(OpStats {
                ops,
                bytes: ops * 4096,
                ..Default::default()
            })
        };
        BdevIoStats {
            name: name.into(),
            read: op(reads),
            write: op(writes),
            ..Default::default()
        }
    }

    fn reading(uptime_ns: u64, stats: Vec<BdevIoStats>) -> GetIoStatsResponse {
        GetIoStatsResponse { stats, uptime_ns }
    }

    fn rates(name: &str, read_iops: f64, write_iops: f64) -> DeviceRates {
        DeviceRates {
            name: name.into(),
            read_iops,
            write_iops,
            total_iops: read_iops + write_iops,
            read_bytes_per_sec: read_iops * 4096.0,
            write_bytes_per_sec: write_iops * 4096.0,
            total_bytes_per_sec: (read_iops + write_iops) * 4096.0,
        }
    }

    #[test]
    fn rates_over_the_engine_interval() {
        let before = reading(10 * SECOND, vec![dev("a", 100, 50), dev("b", 0, 0)]);
        let after = reading(
            10 * SECOND + SECOND / 2,
            vec![dev("a", 600, 50), dev("b", 10, 20)],
        );
        let r = interval_rates(&before, &after);
        assert_eq!(r.uptime_ns, 10 * SECOND + SECOND / 2);
        assert_eq!(r.interval_ns, SECOND / 2);
        assert_eq!(r.stats, [rates("a", 1000.0, 0.0), rates("b", 20.0, 40.0)]);
    }

    #[test]
    fn zero_interval_gives_zero_rates() {
        let before = reading(SECOND, vec![dev("a", 1, 1)]);
        let after = reading(SECOND, vec![dev("a", 5, 5)]);
        let r = interval_rates(&before, &after);
        assert_eq!(r.interval_ns, 0);
        assert_eq!(r.stats, [rates("a", 0.0, 0.0)]);
    }

    #[test]
    fn a_decreased_counter_counts_from_zero() {
        // Reset between the readings: 1000 reads before, 30 reads and 10
        // writes after; the writes did not decrease but the device restarts
        // from zero as a whole.
        let before = reading(SECOND, vec![dev("a", 1000, 5), dev("b", 10, 0)]);
        let after = reading(2 * SECOND, vec![dev("a", 30, 10), dev("b", 20, 0)]);
        let r = interval_rates(&before, &after);
        assert_eq!(r.stats, [rates("a", 30.0, 10.0), rates("b", 10.0, 0.0)]);
        assert!(
            r.stats
                .iter()
                .all(|d| d.read_iops >= 0.0 && d.write_iops >= 0.0)
        );
    }

    #[test]
    fn a_new_device_counts_from_zero_and_a_gone_one_is_dropped() {
        let before = reading(SECOND, vec![dev("gone", 5, 5)]);
        let after = reading(3 * SECOND, vec![dev("new", 4, 2)]);
        let r = interval_rates(&before, &after);
        assert_eq!(r.stats, [rates("new", 2.0, 1.0)]);
    }

    #[test]
    fn an_engine_restart_counts_from_its_start() {
        let before = reading(100 * SECOND, vec![dev("a", 1000, 1000)]);
        let after = reading(2 * SECOND, vec![dev("a", 1000, 0)]);
        let r = interval_rates(&before, &after);
        assert_eq!(r.interval_ns, 2 * SECOND);
        assert_eq!(r.stats, [rates("a", 500.0, 0.0)]);
    }

    #[test]
    fn absent_counter_messages_count_as_zero() {
        let before = reading(
            0,
            vec![BdevIoStats {
                name: "a".into(),
                ..Default::default()
            }],
        );
        let after = reading(SECOND, vec![dev("a", 7, 0)]);
        assert_eq!(
            interval_rates(&before, &after).stats,
            [rates("a", 7.0, 0.0)]
        );
    }

    #[test]
    fn json_line_shape() {
        let r = interval_rates(&reading(0, vec![]), &reading(SECOND, vec![dev("a", 1, 0)]));
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(
            line,
            r#"{"uptime_ns":1000000000,"interval_ns":1000000000,"stats":[{"name":"a","read_iops":1.0,"write_iops":0.0,"total_iops":1.0,"read_bytes_per_sec":4096.0,"write_bytes_per_sec":0.0,"total_bytes_per_sec":4096.0}]}"#
        );
    }
}
