//! bdev-perf: drive block devices from pinned reactors and report IOPS,
//! bandwidth and latency, as SPDK's bdevperf and Mayastor's casperf do.
//!
//! Thread: `main` parses arguments, creates the devices, starts one job per
//! (core, device) on the reactors (`io_engine::perf`), prints progress once
//! a second and the final report. The jobs run on their reactors.

mod report;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use io_engine::accel::Accel;
use io_engine::accel::dsa::DsaArgs;
use io_engine::accel::ioat::IoatArgs;
use io_engine::bdev::{BdevRegistry, IoPoolConfig};
use io_engine::env::cores::CoreSet;
use io_engine::env::dma::register_mapper;
use io_engine::perf::{self, PerfSpec, Workload, args};
use io_engine::pool::DEFAULT_CACHE_SIZE;
use io_engine::reactor::{PollMode, Reactors};

/// Drive block devices at a fixed queue depth from every selected core.
///
/// Each core runs one job per device: QUEUE_DEPTH IOs of IO_SIZE bytes kept
/// in flight for the given time. Exit status: 0 on success, 1 if any IO
/// failed or miscompared, 2 on a usage or setup error.
#[derive(Parser, Debug)]
#[command(name = "bdev-perf", version)]
struct Args {
    /// Cores as a hex mask (SPDK's -m), e.g. 0x3.
    #[arg(short = 'm', long = "reactor-mask", conflicts_with = "core_list")]
    reactor_mask: Option<String>,

    /// Cores as a list, e.g. 0,2-3.
    #[arg(short = 'l', long = "core-list")]
    core_list: Option<String>,

    /// IOs in flight per core and device.
    #[arg(short = 'q', long = "queue-depth", default_value_t = PerfSpec::DEFAULT_QUEUE_DEPTH,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    queue_depth: u32,

    /// IO size in bytes (suffixes k, m accepted: 4k), a multiple of the
    /// devices' block size.
    #[arg(short = 'o', long = "io-size", default_value_t = PerfSpec::DEFAULT_IO_SIZE, value_parser = parse_size)]
    io_size: u64,

    /// IO pattern.
    #[arg(short = 'w', long = "workload", value_enum)]
    workload: Workload,

    /// Percentage of reads for randrw.
    #[arg(short = 'M', long = "rw-mix-read", default_value_t = PerfSpec::DEFAULT_READ_PERCENT,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    read_percent: u32,

    /// Run time in seconds.
    #[arg(short = 't', long = "time", default_value_t = 5.0, value_parser = args::parse_seconds)]
    seconds: f64,

    /// Verify: each queue slot writes a pattern to random blocks of its
    /// own, reads them back and compares, counting miscompares. The
    /// workload's read/write mix does not apply. Needs devices that store
    /// data, such as malloc.
    #[arg(short = 'y', long = "verify")]
    verify: bool,

    /// IO objects in the shared pool (Mayastor: 65535).
    #[arg(long = "io-pool-size", default_value_t = 65535)]
    io_pool_size: usize,

    /// IO objects cached per core; 0 disables the cache.
    #[arg(long = "io-pool-cache", default_value_t = DEFAULT_CACHE_SIZE)]
    io_pool_cache: usize,

    /// Print the results as one JSON object on stdout (progress goes to stderr).
    #[arg(long = "json")]
    json: bool,

    #[command(flatten)]
    ioat: IoatArgs,

    #[command(flatten)]
    dsa: DsaArgs,

    /// Device to create and drive, e.g. 'null:///n0?size_mb=1024&blk_size=4096'.
    #[arg(long = "bdev", required = true, value_name = "URI")]
    bdevs: Vec<String>,
}

/// `-o`: 1 byte and up, with a k/m suffix.
fn parse_size(s: &str) -> Result<u64, String> {
    args::parse_size(s, "IO size", u64::MAX)
}

/// A setup error: printed as one line, exit status 2.
struct Fatal(String);

impl<E: std::fmt::Display> From<E> for Fatal {
    fn from(e: E) -> Self {
        Fatal(e.to_string())
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    io_engine::env::logging::init("warn", false);
    match run(args) {
        Ok(report) => {
            if report.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(Fatal(msg)) => {
            eprintln!("bdev-perf: error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<report::Report, Fatal> {
    let cores = CoreSet::from_args(args.reactor_mask.as_deref(), args.core_list.as_deref())?;
    cores.check_available()?;
    // The I/OAT devices and the DSA model see DMA memory through a mapper
    // registered here: env tells it of every DMA region, made before or
    // after. DSA first: it runs every opcode.
    let mut offload = args.dsa.modules(register_mapper);
    offload.extend(args.ioat.modules(register_mapper));
    let accel = Accel::new(offload, &[])?;
    let registry = BdevRegistry::with_accel(
        IoPoolConfig {
            size: args.io_pool_size,
            cache: args.io_pool_cache,
            cores: cores.len(),
        },
        accel.clone(),
    )?;
    let mut names = Vec::new();
    for uri in &args.bdevs {
        names.push(registry.create(uri)?.name);
    }
    let reactors = Reactors::start(&cores, PollMode::Busy)?;
    let spec = PerfSpec {
        bdevs: names,
        cores: Vec::new(),
        workload: args.workload,
        io_size: args.io_size,
        queue_depth: args.queue_depth,
        read_percent: args.read_percent,
        verify: args.verify,
        seconds: args.seconds,
    };
    let running = perf::start(&reactors, &registry, &spec)?;
    let config = report::Config {
        cores: cores.to_string(),
        workload: args.workload,
        io_size: args.io_size,
        queue_depth: args.queue_depth,
        read_percent: (args.workload == Workload::Randrw).then_some(args.read_percent),
        seconds: args.seconds,
        verify: args.verify,
        io_pool_size: args.io_pool_size,
        io_pool_cache: args.io_pool_cache,
        bdevs: args.bdevs.clone(),
    };
    if !args.json {
        report::print_config(&config);
    }

    let started = Instant::now();
    let mut last = (0u64, 0u64);
    let mut tick = 1;
    while started.elapsed().as_secs_f64() < args.seconds {
        let next = Duration::from_secs(tick).min(Duration::from_secs_f64(args.seconds));
        std::thread::sleep(next.saturating_sub(started.elapsed()));
        if next.as_secs_f64() >= args.seconds {
            break;
        }
        let (ios, bytes) = running.progress();
        report::print_progress(args.json, tick, ios - last.0, bytes - last.1);
        last = (ios, bytes);
        tick += 1;
    }

    let rows = running.wait()?;
    reactors.stop();
    let report = report::Report::new(config, rows);
    if args.json {
        let mut v = report.to_json();
        v["accel"] = accel_summary(&accel);
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        report.print_table();
        print_accel(&accel);
    }
    Ok(report)
}

/// What the accel framework did for the run (malloc devices move their
/// data through it): tasks per (opcode, module), the modules' own counters
/// (I/OAT: descriptors, doorbell writes) and fallback notes.
fn accel_summary(accel: &Accel) -> serde_json::Value {
    let (ops, _) = accel.stats();
    let ops: Vec<_> = ops
        .into_iter()
        .filter(|s| s.executed + s.failed > 0)
        .collect();
    let mut modules = serde_json::Map::new();
    for (m, c) in accel.engine_counters() {
        let counters: serde_json::Map<String, serde_json::Value> = c
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        modules.insert(m.to_string(), counters.into());
    }
    serde_json::json!({ "ops": ops, "modules": modules, "notes": accel.notes() })
}

fn print_accel(accel: &Accel) {
    let (ops, _) = accel.stats();
    for s in ops.iter().filter(|s| s.executed + s.failed > 0) {
        println!(
            "accel {} on {}: {} executed, {} failed, {} bytes",
            s.opcode, s.module, s.executed, s.failed, s.bytes
        );
    }
    for (m, c) in accel.engine_counters() {
        let parts: Vec<String> = c.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("accel module {m}: {}", parts.join(", "));
    }
    for n in accel.notes() {
        println!("accel note: {n}");
    }
}
