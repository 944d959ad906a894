//! bdev-perf output: configuration block, progress lines, the result table
//! and its JSON form.
//!
//! Thread: `main`.

use serde::Serialize;
use serde_json::{Value, json};

use io_engine::perf::{JobRow, Workload};

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
