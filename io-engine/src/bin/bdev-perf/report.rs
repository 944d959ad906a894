//! bdev-perf output: configuration block, progress lines, the result table
//! and its JSON form.
//!
//! Thread: `main`.

use serde::Serialize;
use serde_json::{Value, json};

use super::job::{JobResult, Workload};
use io_engine::env::tsc;

/// The run's settings, echoed in the output.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub cores: String,
    pub workload: Workload,
    pub io_size: u64,
    pub queue_depth: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_percent: Option<u32>,
    pub seconds: f64,
    pub verify: bool,
    pub io_pool_size: usize,
    pub io_pool_cache: usize,
    pub bdevs: Vec<String>,
}

/// Figures of one job (one core driving one device), or of the total.
#[derive(Debug, Clone, Serialize)]
pub struct JobRow {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bdev: Option<String>,
    pub ios: u64,
    pub seconds: f64,
    pub iops: f64,
    pub mib_s: f64,
    pub avg_lat_us: f64,
    pub min_lat_us: f64,
    pub max_lat_us: f64,
    pub failed: u64,
    pub miscompares: u64,
}

fn us(ticks: u64) -> f64 {
    tsc::ticks_to_ns(ticks) as f64 / 1000.0
}

impl JobRow {
    pub fn new(core: usize, cpu: u32, bdev: String, r: &JobResult) -> JobRow {
        let seconds = (tsc::ticks_to_ns(r.elapsed_ticks) as f64 / 1e9).max(1e-9);
        JobRow {
            core: Some(core),
            cpu: Some(cpu),
            bdev: Some(bdev),
            ios: r.ios,
            seconds,
            iops: r.ios as f64 / seconds,
            mib_s: r.bytes as f64 / seconds / (1024.0 * 1024.0),
            avg_lat_us: if r.ios == 0 {
                0.0
            } else {
                us(r.lat_total_ticks) / r.ios as f64
            },
            min_lat_us: us(r.lat_min_ticks),
            max_lat_us: us(r.lat_max_ticks),
            failed: r.failed,
            miscompares: r.miscompares,
        }
    }

    fn total(rows: &[JobRow]) -> JobRow {
        let ios: u64 = rows.iter().map(|r| r.ios).sum();
        let with_io = || rows.iter().filter(|r| r.ios > 0);
        JobRow {
            core: None,
            cpu: None,
            bdev: None,
            ios,
            seconds: rows.iter().map(|r| r.seconds).fold(0.0, f64::max),
            iops: rows.iter().map(|r| r.iops).sum(),
            mib_s: rows.iter().map(|r| r.mib_s).sum(),
            avg_lat_us: if ios == 0 {
                0.0
            } else {
                rows.iter()
                    .map(|r| r.avg_lat_us * r.ios as f64)
                    .sum::<f64>()
                    / ios as f64
            },
            min_lat_us: with_io()
                .map(|r| r.min_lat_us)
                .reduce(f64::min)
                .unwrap_or(0.0),
            max_lat_us: rows.iter().map(|r| r.max_lat_us).fold(0.0, f64::max),
            failed: rows.iter().map(|r| r.failed).sum(),
            miscompares: rows.iter().map(|r| r.miscompares).sum(),
        }
    }
}

/// The whole run.
pub struct Report {
    config: Config,
    jobs: Vec<JobRow>,
    total: JobRow,
}

impl Report {
    pub fn new(config: Config, jobs: Vec<JobRow>) -> Report {
        let total = JobRow::total(&jobs);
        Report {
            config,
            jobs,
            total,
        }
    }

    /// No IO failed or miscompared.
    pub fn ok(&self) -> bool {
        self.total.failed == 0 && self.total.miscompares == 0
    }

    pub fn to_json(&self) -> Value {
        json!({
            "config": self.config,
            "jobs": self.jobs,
            "total": self.total,
        })
    }

    pub fn print_table(&self) {
        println!();
        println!(
            "{:>5} {:>4}  {:<12} {:>14} {:>11} {:>9} {:>9} {:>10} {:>7} {:>8}",
            "Core",
            "CPU",
            "Device",
            "IOPS",
            "MiB/s",
            "Avg(us)",
            "Min(us)",
            "Max(us)",
            "Failed",
            "Miscomp"
        );
        let row = |core: String, cpu: String, dev: &str, r: &JobRow| {
            println!(
                "{core:>5} {cpu:>4}  {dev:<12} {:>14.1} {:>11.2} {:>9.2} {:>9.2} {:>10.2} {:>7} {:>8}",
                r.iops, r.mib_s, r.avg_lat_us, r.min_lat_us, r.max_lat_us, r.failed, r.miscompares
            )
        };
        for j in &self.jobs {
            row(
                j.core.map(|c| c.to_string()).unwrap_or_default(),
                j.cpu.map(|c| c.to_string()).unwrap_or_default(),
                j.bdev.as_deref().unwrap_or(""),
                j,
            );
        }
        println!("{}", "-".repeat(100));
        row("Total".into(), String::new(), "", &self.total);
    }
}

pub fn print_config(c: &Config) {
    println!("bdev-perf configuration:");
    println!("  cores:        {}", c.cores);
    println!("  workload:     {:?}", c.workload);
    if let Some(p) = c.read_percent {
        println!("  read percent: {p}");
    }
    println!("  io size:      {} bytes", c.io_size);
    println!("  queue depth:  {} per core and device", c.queue_depth);
    println!("  run time:     {} s", c.seconds);
    println!(
        "  verify:       {}",
        if c.verify {
            "yes (write, read back, compare; the workload's mix does not apply)"
        } else {
            "no"
        }
    );
    println!(
        "  io pool:      {} objects, {} cached per core",
        c.io_pool_size, c.io_pool_cache
    );
    for b in &c.bdevs {
        println!("  device:       {b}");
    }
}

/// One line per second: the IOPS and bandwidth of the second just ended.
pub fn print_progress(to_stderr: bool, second: u64, ios: u64, bytes: u64) {
    let line = format!(
        "{second:>4} s: {:>12.0} IOPS {:>11.2} MiB/s",
        ios as f64,
        bytes as f64 / (1024.0 * 1024.0)
    );
    if to_stderr {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}
