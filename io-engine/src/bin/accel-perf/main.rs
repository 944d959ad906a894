//! accel-perf: drive the accel framework from pinned reactors and report
//! transfers per second, as SPDK's `examples/accel/perf` does, with its
//! flags and meanings.
//!
//! Thread: `main` parses flags, starts one reactor per core of the mask and
//! one worker per reactor (`worker.rs`), waits the run time, stops the
//! workers and prints the report. Each worker runs on its reactor: it keeps
//! `-q` tasks in flight on that core's accel channel, resubmitting from the
//! completion callback (or in batches of `-b`).

mod worker;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;
use io_engine::accel::dsa::DsaArgs;
use io_engine::accel::ioat::IoatArgs;
use io_engine::accel::{Accel, Assignment, Opcode};
use io_engine::env::cores::CoreSet;
use io_engine::env::dma::register_mapper;
use io_engine::perf::args;
use io_engine::reactor::{PollMode, Reactors};
use serde_json::json;
use worker::{Config, Outcome, Workload};

/// Measure accel operations: each core keeps QUEUE_DEPTH tasks in flight
/// for RUN_TIME seconds over ALLOC_DEPTH buffer sets.
///
/// Exit status: 0 on success, 1 if any task failed or a compare found a
/// difference that `-P` did not ask for, 2 on a usage or setup error.
#[derive(Parser, Debug)]
#[command(name = "accel-perf", version, about, long_about)]
struct Args {
    /// Workload: copy, fill, crc32c, copy_crc32c, compare or dualcast.
    #[arg(short = 'w', long = "workload", value_enum)]
    workload: Workload,

    /// Transfer size in bytes (k and m suffixes accepted).
    #[arg(short = 'o', long = "transfer-size", default_value = "4096", value_parser = parse_size)]
    size: usize,

    /// Tasks in flight per core.
    #[arg(short = 'q', long = "queue-depth", default_value_t = 32,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    queue_depth: u32,

    /// Tasks (buffer sets) allocated per core; at least the queue depth
    /// (default: the queue depth). Large values make the working set
    /// larger than the caches.
    #[arg(short = 'a', long = "alloc-depth",
          value_parser = clap::value_parser!(u32).range(1..=1 << 22))]
    alloc_depth: Option<u32>,

    /// Run time in seconds.
    #[arg(short = 't', long = "time", default_value_t = 5.0, value_parser = args::parse_seconds)]
    seconds: f64,

    /// Cores as a hex mask, e.g. 0x3 (default: the first CPU allowed).
    #[arg(short = 'm', long = "core-mask")]
    mask: Option<String>,

    /// Verify the result of every task.
    #[arg(short = 'y', long = "verify")]
    verify: bool,

    /// Fill byte for the fill workload.
    #[arg(short = 'f', long = "fill", default_value_t = 255)]
    fill: u8,

    /// CRC-32C seed (this project's convention: a CRC value to continue
    /// from, 0 to start; see docs/accel.md).
    #[arg(short = 'S', long = "seed", default_value_t = 0)]
    seed: u32,

    /// Source vectors per crc32c/copy_crc32c task, each of the transfer
    /// size.
    #[arg(short = 'C', long = "iovcnt", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=128))]
    iovcnt: u32,

    /// Percentage of compare tasks made to miscompare (their miscompares
    /// are expected, not failures).
    #[arg(short = 'P', long = "fail-percent", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    fail_percent: u32,

    /// Module to run the workload's opcode (default: the one assigned,
    /// the best registered).
    #[arg(short = 'M', long = "module")]
    module: Option<String>,

    /// Tasks per batch (0: no batching, each task submitted alone).
    #[arg(short = 'b', long = "batch", default_value_t = 0)]
    batch: u32,

    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    ioat: IoatArgs,

    #[command(flatten)]
    dsa: DsaArgs,

    /// After the run, time a plain loop (ptr copy/fill, slice compare, the
    /// crc32c crate) over the same buffers on each core for the same time,
    /// and report it beside the framework's figure.
    #[arg(long)]
    ceiling: bool,
}

/// `-o`: 1 byte to 1 GiB, with a k/m suffix.
fn parse_size(s: &str) -> Result<usize, String> {
    args::parse_size(s, "transfer size", 1 << 30).map(|v| v as usize)
}

fn main() -> ExitCode {
    let args = Args::parse();
    io_engine::env::logging::init("warn", false);
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("accel-perf: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<bool, String> {
    let cores = CoreSet::from_args(args.mask.as_deref(), None).map_err(|e| e.to_string())?;
    cores.check_available().map_err(|e| e.to_string())?;
    let alloc = args.alloc_depth.unwrap_or(args.queue_depth);
    if alloc < args.queue_depth {
        return Err(format!(
            "-a {alloc} is below the queue depth -q {}: every task in flight needs its own buffers",
            args.queue_depth
        ));
    }
    let op = args.workload.opcode();
    let overrides: Vec<Assignment> = match &args.module {
        Some(m) => vec![Assignment {
            op,
            module: m.clone(),
        }],
        None => Vec::new(),
    };
    // The I/OAT devices (and the DSA model) see DMA memory through a
    // mapper registered here: env tells it of every DMA region, made before
    // or after. DSA first: it runs every opcode.
    let mut offload = args.dsa.modules(register_mapper);
    offload.extend(args.ioat.modules(register_mapper));
    let accel = Accel::new(offload, &overrides).map_err(|e| match &e {
        io_engine::accel::AccelError::UnknownModule(m) if m == io_engine::accel::ioat::NAME => {
            format!("{e}: add --ioat (hardware) or --ioat-model N (the device model)")
        }
        io_engine::accel::AccelError::UnknownModule(m) if m == io_engine::accel::dsa::NAME => {
            format!("{e}: add --dsa (work queues of the idxd driver) or --dsa-model N (the device model)")
        }
        _ => e.to_string(),
    })?;
    let cfg = Config {
        workload: args.workload,
        size: args.size,
        queue_depth: args.queue_depth as usize,
        alloc_depth: alloc as usize,
        verify: args.verify,
        fill: args.fill,
        seed: args.seed,
        iovcnt: args.iovcnt as usize,
        fail_percent: args.fail_percent,
        batch: args.batch as usize,
        ceiling: args.ceiling,
        seconds: args.seconds,
    };
    let need = cfg.bytes_per_core().saturating_mul(cores.len());
    io_engine::env::dma::check_memory(need).map_err(|e| {
        format!(
            "buffers for -a {alloc} -o {} on {} cores: {e}",
            args.size,
            cores.len()
        )
    })?;

    let module = accel.assigned(op);
    if !args.json {
        print_config(&args, &cores, alloc, module);
    }
    let reactors = Reactors::start(&cores, PollMode::Busy).map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut replies = Vec::new();
    for core in 0..reactors.len() {
        let (accel, cfg, stop) = (accel.clone(), cfg.clone(), stop.clone());
        replies.push(reactors.spawn_on(core, move || worker::run(accel, cfg, stop)));
    }
    if args.ceiling && !args.json {
        println!(
            "(then the plain loop over the same buffers for {} seconds)\n",
            args.seconds
        );
    }
    std::thread::sleep(Duration::from_secs_f64(args.seconds));
    stop.store(true, Ordering::Release);
    let mut outcomes: Vec<Outcome> = Vec::new();
    for r in replies {
        outcomes.push(r.wait().map_err(|e| e.to_string())??);
    }
    reactors.stop();

    let (ops, mods) = accel.stats();
    let engine = accel.module_counters(module);
    let ok = outcomes
        .iter()
        .all(|o| o.failed == 0 && o.miscompares == o.expected_miscompares);
    if args.json {
        print_json(
            &args, &cores, alloc, module, &outcomes, &ops, &mods, &engine,
        );
    } else {
        print_table(&cores, args.size, &outcomes);
        print_engine(module, &outcomes, &engine);
        if !ok {
            eprintln!(
                "accel-perf: failures or unexpected miscompares (expected {} miscompares from -P)",
                outcomes.iter().map(|o| o.expected_miscompares).sum::<u64>()
            );
        }
    }
    Ok(ok)
}

fn print_config(args: &Args, cores: &CoreSet, alloc: u32, module: &str) {
    println!("io-engine accel-perf configuration:");
    println!("Core mask:      {}", mask_of(cores));
    println!("Workload Type:  {}", args.workload.opcode());
    if matches!(args.workload, Workload::Crc32c | Workload::CopyCrc32c) {
        println!("CRC-32C seed:   {}", args.seed);
        println!("Vector count:   {}", args.iovcnt);
    }
    if matches!(args.workload, Workload::Fill) {
        println!("Fill pattern:   {:#04x}", args.fill);
    }
    if matches!(args.workload, Workload::Compare) {
        println!("Failure inject: {} %", args.fail_percent);
    }
    println!("Transfer size:  {} bytes", args.size);
    println!("Module:         {module}");
    println!("Queue depth:    {}", args.queue_depth);
    println!("Allocate depth: {alloc}");
    println!("Batch size:     {}", args.batch);
    println!("Run time:       {} seconds", args.seconds);
    println!("Verify:         {}", if args.verify { "Yes" } else { "No" });
    println!();
    println!("Running for {} seconds...", args.seconds);
    println!();
}

fn mask_of(cores: &CoreSet) -> String {
    let m = cores.iter().fold(0u128, |m, c| m | (1u128 << c.min(127)));
    format!("{m:#x}")
}

fn mib_s(o: &Outcome, size: usize) -> f64 {
    o.ops_per_s() * size as f64 / (1024.0 * 1024.0)
}

fn print_table(cores: &CoreSet, size: usize, outcomes: &[Outcome]) {
    println!(
        "{:<20}{:>18}{:>16}{:>12}{:>14}",
        "Core", "Transfers", "Bandwidth", "Failed", "Miscompares"
    );
    println!("{}", "-".repeat(80));
    for (cpu, o) in cores.iter().zip(outcomes) {
        println!(
            "{:<20}{:>16.0}/s{:>11.0} MiB/s{:>12}{:>14}",
            cpu,
            o.ops_per_s(),
            mib_s(o, size),
            o.failed,
            o.miscompares
        );
    }
    println!("{}", "=".repeat(80));
    let total: f64 = outcomes.iter().map(Outcome::ops_per_s).sum();
    println!(
        "{:<20}{:>16.0}/s{:>11.0} MiB/s{:>12}{:>14}",
        "Total",
        total,
        total * size as f64 / (1024.0 * 1024.0),
        outcomes.iter().map(|o| o.failed).sum::<u64>(),
        outcomes.iter().map(|o| o.miscompares).sum::<u64>()
    );
    if let Some(c) = ceiling_total(outcomes) {
        println!(
            "{:<20}{:>16.0}/s{:>11.0} MiB/s   (framework at {:.1} % of it)",
            "Plain loop",
            c,
            c * size as f64 / (1024.0 * 1024.0),
            100.0 * total / c
        );
    }
}

/// The module's own counters (I/OAT: doorbell writes and descriptors;
/// DSA: portal writes, its doorbells, and descriptors), per operation.
fn print_engine(module: &str, outcomes: &[Outcome], engine: &[(&'static str, u64)]) {
    let get = |k: &str| engine.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
    let (Some(doorbells), Some(descriptors)) = (get("doorbell_writes"), get("descriptors")) else {
        return;
    };
    let ops = outcomes.iter().map(|o| o.completed).sum::<u64>().max(1) as f64;
    let what = if module == io_engine::accel::dsa::NAME {
        "portal writes"
    } else {
        "doorbell writes"
    };
    println!(
        "Module {module}: {doorbells} {what} ({:.4} per operation), {descriptors} \
         descriptors ({:.2} per operation)",
        doorbells as f64 / ops,
        descriptors as f64 / ops
    );
}

fn ceiling_total(outcomes: &[Outcome]) -> Option<f64> {
    outcomes.iter().map(|o| o.ceiling_ops_per_s).sum()
}

#[expect(
    clippy::too_many_arguments,
    reason = "one call site, every part of the report"
)]
fn print_json(
    args: &Args,
    cores: &CoreSet,
    alloc: u32,
    module: &str,
    outcomes: &[Outcome],
    ops: &[io_engine::accel::OpStats],
    mods: &[io_engine::accel::ModuleStats],
    engine: &[(&'static str, u64)],
) {
    let op: Opcode = args.workload.opcode();
    let per_core: Vec<_> = cores
        .iter()
        .zip(outcomes)
        .map(|(cpu, o)| {
            json!({
                "core": cpu,
                "transfers": o.completed,
                "seconds": o.seconds,
                "ops_per_s": o.ops_per_s(),
                "mib_s": mib_s(o, args.size),
                "failed": o.failed,
                "miscompares": o.miscompares,
                "expected_miscompares": o.expected_miscompares,
            })
        })
        .collect();
    let total_ops: f64 = outcomes.iter().map(Outcome::ops_per_s).sum();
    let counters: Vec<_> = ops
        .iter()
        .filter(|s| s.module == module && s.executed + s.failed > 0)
        .collect();
    let batches = mods
        .iter()
        .find(|m| m.module == module)
        .map_or(0, |m| m.batches);
    let mut module_json = json!({
        "name": module,
        "counters": counters,
        "batches": batches,
    });
    // The module's own counters (I/OAT: doorbell_writes, descriptors).
    for (k, v) in engine {
        module_json[*k] = json!(v);
    }
    let out = json!({
        "config": {
            "workload": op.name(),
            "transfer_size": args.size,
            "queue_depth": args.queue_depth,
            "alloc_depth": alloc,
            "seconds": args.seconds,
            "core_mask": mask_of(cores),
            "verify": args.verify,
            "fill": args.fill,
            "seed": args.seed,
            "iovcnt": args.iovcnt,
            "fail_percent": args.fail_percent,
            "module": args.module,
            "batch": args.batch,
        },
        "cores": per_core,
        "total": {
            "transfers": outcomes.iter().map(|o| o.completed).sum::<u64>(),
            "ops_per_s": total_ops,
            "mib_s": total_ops * args.size as f64 / (1024.0 * 1024.0),
            "failed": outcomes.iter().map(|o| o.failed).sum::<u64>(),
            "miscompares": outcomes.iter().map(|o| o.miscompares).sum::<u64>(),
            "expected_miscompares": outcomes.iter().map(|o| o.expected_miscompares).sum::<u64>(),
        },
        "ceiling": ceiling_total(outcomes).map(|c| json!({
            "ops_per_s": c,
            "mib_s": c * args.size as f64 / (1024.0 * 1024.0),
            "ratio": total_ops / c,
        })),
        "module": module_json,
    });
    println!("{out}");
}
