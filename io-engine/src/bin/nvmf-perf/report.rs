//! nvmf-perf's output: the configuration block, spdk_nvme_perf's table
//! (per connection and total: IOPS, MiB/s, average, min and max latency),
//! the latency percentiles, failures and verification, and all of it as
//! one JSON object for `--json`.
//!
//! Thread: `main`.

use serde::Serialize;
use serde_json::{Value, json};

use super::conn_stats::ConnStats;
use super::workload::Workload;

/// The run's settings, echoed in the output.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub target: String,
    pub nsid: u32,
    pub cores: String,
    pub connections_per_core: u32,
    pub workload: Workload,
    pub io_size: u64,
    pub queue_depth: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_percent: Option<u32>,
    pub seconds: f64,
    pub header_digest: bool,
    pub data_digest: bool,
    pub verify: bool,
}

/// One connection's line.
pub struct Row {
    /// The CPU its worker ran on (None: the total).
    pub core: Option<u32>,
    /// Its queue ID (None: the total).
    pub qid: Option<u16>,
    /// Seconds it ran.
    pub seconds: f64,
    /// Its figures.
    pub stats: ConnStats,
}

impl Row {
    fn iops(&self) -> f64 {
        self.stats.ios as f64 / self.seconds.max(1e-9)
    }

    fn mib_s(&self) -> f64 {
        self.stats.bytes as f64 / (1024.0 * 1024.0) / self.seconds.max(1e-9)
    }

    fn avg_us(&self) -> f64 {
        self.stats.lat_sum_ns as f64 / 1000.0 / self.stats.ios.max(1) as f64
    }

    fn min_us(&self) -> f64 {
        if self.stats.ios == 0 {
            0.0
        } else {
            self.stats.lat_min_ns as f64 / 1000.0
        }
    }

    fn max_us(&self) -> f64 {
        self.stats.lat_max_ns as f64 / 1000.0
    }

    fn pct_us(&self, p: f64) -> f64 {
        self.stats.hist.percentile(p) as f64 / 1000.0
    }

    fn to_json(&self) -> Value {
        let s = &self.stats;
        json!({
            "core": self.core,
            "qid": self.qid,
            "seconds": self.seconds,
            "ios": s.ios,
            "bytes": s.bytes,
            "iops": self.iops(),
            "mib_s": self.mib_s(),
            "avg_lat_us": self.avg_us(),
            "min_lat_us": self.min_us(),
            "max_lat_us": self.max_us(),
            "p50_lat_us": self.pct_us(50.0),
            "p99_lat_us": self.pct_us(99.0),
            "p99_9_lat_us": self.pct_us(99.9),
            "failed": s.failed,
            "verified": s.verified,
            "miscompares": s.miscompares,
            "first_error": s.first_error,
        })
    }
}

/// The whole run.
pub struct Report {
    config: Config,
    rows: Vec<Row>,
    total: Row,
}

impl Report {
    /// The report of `rows` (the total's rate is the sum of the rows').
    pub fn new(config: Config, rows: Vec<Row>) -> Report {
        let mut stats = ConnStats::new();
        for r in &rows {
            stats.merge(&r.stats);
        }
        // The connections ran side by side: the total's time is their
        // longest, which makes its IOPS at most the sum of theirs.
        let seconds = rows.iter().map(|r| r.seconds).fold(0.0, f64::max);
        Report {
            config,
            rows,
            total: Row {
                core: None,
                qid: None,
                seconds,
                stats,
            },
        }
    }

    /// No command failed and nothing miscompared.
    pub fn ok(&self) -> bool {
        self.total.stats.failed == 0 && self.total.stats.miscompares == 0
    }

    /// The JSON form.
    pub fn to_json(&self) -> Value {
        json!({
            "config": self.config,
            "connections": self.rows.iter().map(Row::to_json).collect::<Vec<_>>(),
            "total": self.total.to_json(),
        })
    }

    /// The tables, as spdk_nvme_perf prints them, and the percentiles.
    pub fn print(&self) {
        let name = |r: &Row| match (r.core, r.qid) {
            (Some(c), Some(q)) => {
                let (t, ns) = (&self.config.target, self.config.nsid);
                format!("{t} NSID {ns} from core {c:>2} qid {q}")
            }
            _ => "Total".to_string(),
        };
        let w = self
            .rows
            .iter()
            .map(|r| name(r).len())
            .max()
            .unwrap_or(0)
            .max(24);
        let rule = "=".repeat(w + 56);
        println!("{rule}");
        println!("{:>w$}  {:>54}", "", "Latency(us)");
        println!(
            "{:<w$}: {:>10} {:>10} {:>10} {:>10} {:>10}",
            "Device Information", "IOPS", "MiB/s", "Average", "min", "max"
        );
        let line = |r: &Row| {
            println!(
                "{:<w$}: {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
                name(r),
                r.iops(),
                r.mib_s(),
                r.avg_us(),
                r.min_us(),
                r.max_us()
            )
        };
        self.rows.iter().for_each(line);
        println!("{rule}");
        line(&self.total);
        println!();
        println!(
            "{:<w$}: {:>10} {:>10} {:>10}",
            "Latency percentiles (us)", "p50", "p99", "p99.9"
        );
        let pct = |r: &Row| {
            println!(
                "{:<w$}: {:>10.2} {:>10.2} {:>10.2}",
                name(r),
                r.pct_us(50.0),
                r.pct_us(99.0),
                r.pct_us(99.9)
            )
        };
        self.rows.iter().for_each(pct);
        pct(&self.total);
        let s = &self.total.stats;
        println!();
        println!(
            "failed: {}, verified reads: {}, miscompares: {}",
            s.failed, s.verified, s.miscompares
        );
        if let Some(e) = &s.first_error {
            println!("first error: {e}");
        }
    }
}

/// The configuration block.
pub fn print_config(c: &Config) {
    println!("nvmf-perf configuration:");
    println!("  target:       {}", c.target);
    println!(
        "  cores:        {}, {} connection(s) each",
        c.cores, c.connections_per_core
    );
    println!(
        "  workload:     {}",
        format!("{:?}", c.workload).to_lowercase()
    );
    if let Some(p) = c.read_percent {
        println!("  read percent: {p}");
    }
    println!("  io size:      {} bytes", c.io_size);
    println!("  queue depth:  {} per connection", c.queue_depth);
    println!("  run time:     {} s", c.seconds);
    println!(
        "  digests:      header {}, data {}",
        if c.header_digest { "on" } else { "off" },
        if c.data_digest { "on" } else { "off" }
    );
    println!(
        "  verify:       {}",
        if c.verify {
            "yes (each connection checks its reads against its own writes)"
        } else {
            "no"
        }
    );
}
