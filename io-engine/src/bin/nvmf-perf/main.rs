//! nvmf-perf: the project's NVMe/TCP load generator, with
//! spdk_nvme_perf's options and meanings. It connects one controller (an
//! admin queue, Number of Queues = cores x `-P`, then one I/O queue per
//! connection), runs a worker pinned to each core of `-c` that busy-polls
//! its connections with `-q` commands in flight each, and reports IOPS,
//! bandwidth and latency per connection and in total.
//!
//! Thread: `main` parses the arguments, sets the controller and the I/O
//! queues up (blocking sockets), starts the workers (one thread per core,
//! see `worker`), waits for them and prints the report.

mod conn_stats;
mod connection;
mod controller;
mod copy;
mod histogram;
mod plan;
mod region;
mod report;
mod setup_queue;
mod transport_id;
mod wire;
mod worker;
mod workload;

use std::process::ExitCode;

use clap::Parser;
use io_engine::env::cores::CoreSet;
use io_engine::env::tsc;
use io_engine::export::nvmf::pdu::Digests;
use io_engine::perf::args;

use connection::Connection;
use controller::Controller;
use plan::Plan;
use region::Region;
use report::{Config, Report, Row};
use transport_id::TransportId;
use worker::Worker;
use workload::Workload;

/// Drive an NVMe/TCP target at a fixed queue depth from pinned cores.
///
/// Each core of -c runs -P connections (I/O queues of one controller),
/// each keeping -q commands of -o bytes in flight for -t seconds. Exit
/// status: 0 on success, 1 if any command failed or a verify mismatched,
/// 2 on a usage or connection error.
#[derive(Parser, Debug)]
#[command(name = "nvmf-perf", version)]
struct Args {
    /// Commands in flight per connection.
    #[arg(short = 'q', long = "io-depth", value_parser = clap::value_parser!(u32).range(1..=65535))]
    queue_depth: u32,

    /// IO size in bytes (suffixes k, m accepted: 4k), a multiple of the
    /// namespace's block size.
    #[arg(short = 'o', long = "io-size", value_parser = parse_size)]
    io_size: u64,

    /// IO pattern.
    #[arg(short = 'w', long = "io-pattern", value_enum)]
    workload: Workload,

    /// Percentage of reads for randrw.
    #[arg(short = 'M', long = "rwmixread", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    read_percent: u32,

    /// Run time in seconds.
    #[arg(short = 't', long = "time", value_parser = args::parse_seconds)]
    seconds: f64,

    /// Cores as a hex mask: one worker thread pinned to each.
    #[arg(short = 'c', long = "core-mask", default_value = "0x1")]
    core_mask: String,

    /// Connections (I/O queues) per core.
    #[arg(short = 'P', long = "num-qpairs", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    connections: u32,

    /// The target, as an SPDK transport ID:
    /// 'trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:4420 subnqn:NQN'
    /// (also ns:N, hostnqn:NQN).
    #[arg(short = 'r', long = "transport")]
    target: TransportId,

    /// Header digests (CRC-32C) on every connection.
    #[arg(short = 'H', long = "enable-tcp-hdgst")]
    header_digest: bool,

    /// Data digests (CRC-32C) on every connection.
    #[arg(short = 'I', long = "enable-tcp-ddgst")]
    data_digest: bool,

    /// Verify: each connection works in its own LBA range; writes carry a
    /// pattern derived from the LBA and a generation, reads check it (a
    /// read or Copy source not yet written is written first). Needs a
    /// workload that reads (not write or randwrite).
    #[arg(short = 'y', long = "verify")]
    verify: bool,

    /// Print the results as one JSON object on stdout.
    #[arg(long = "json")]
    json: bool,
}

/// `-o`: 1 byte to 16 MiB, with a k/m suffix.
fn parse_size(s: &str) -> Result<u64, String> {
    args::parse_size(s, "IO size", 16 << 20)
}

/// A usage or connection error: printed as one line, exit status 2.
struct Fatal(String);

impl<E: std::fmt::Display> From<E> for Fatal {
    fn from(e: E) -> Self {
        Fatal(e.to_string())
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(report) if report.ok() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(Fatal(msg)) => {
            eprintln!("nvmf-perf: error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<Report, Fatal> {
    if args.verify && !args.workload.reads() {
        return Err(Fatal(format!(
            "-y checks what is read back: -w {} reads nothing (use randrw, read, randread or copy)",
            format!("{:?}", args.workload).to_lowercase()
        )));
    }
    let cores = CoreSet::parse_mask(&args.core_mask)?;
    cores.check_available()?;
    let digests = Digests {
        header: args.header_digest,
        data: args.data_digest,
    };
    let hostnqn = args
        .target
        .hostnqn
        .clone()
        .unwrap_or_else(|| format!("nqn.2014-08.org.nvmexpress:uuid:{}", uuid::Uuid::new_v4()));
    let mut ctrl = Controller::attach(&args.target, &hostnqn, digests)?;
    let bs = ctrl.block_size as u64;
    let io_size = args.io_size;
    if !io_size.is_multiple_of(bs) {
        return Err(Fatal(format!(
            "-o {io_size} is not a multiple of the namespace's block size {bs}"
        )));
    }
    let nlb = io_size / bs;
    if nlb > 65536 {
        return Err(Fatal(format!("-o {io_size} is more than 65536 blocks")));
    }
    if let Some(max) = ctrl.max_transfer
        && args.workload != Workload::Copy
        && io_size > max
    {
        return Err(Fatal(format!(
            "-o {io_size} exceeds the target's largest transfer (MDTS: {max} bytes)"
        )));
    }
    if args.workload == Workload::Copy {
        ctrl.check_copy(nlb)?;
    }
    if args.queue_depth + 1 > ctrl.max_entries {
        return Err(Fatal(format!(
            "-q {} exceeds the target's queue size ({} entries hold {} commands)",
            args.queue_depth,
            ctrl.max_entries,
            ctrl.max_entries - 1
        )));
    }
    let n = cores.len() as u32 * args.connections;
    if n > u16::MAX as u32 - 1 {
        return Err(Fatal(format!("{n} connections are too many")));
    }
    let units = ctrl.blocks / nlb / n as u64;
    let min_units = if args.workload == Workload::Copy {
        2
    } else {
        1
    };
    if units < min_units {
        return Err(Fatal(format!(
            "the namespace ({} blocks) is too small for {n} connections of -o {io_size}",
            ctrl.blocks
        )));
    }
    let units = units.min(u32::MAX as u64) as u32;
    ctrl.set_io_queues(n)?;
    tsc::ticks_per_sec();

    let plan = Plan {
        workload: args.workload,
        read_percent: args.read_percent,
        depth: args.queue_depth as u16,
        io_size: io_size as usize,
        nsid: ctrl.nsid,
        block_size: bs as usize,
        in_capsule: ctrl.in_capsule,
        digests,
        verify: args.verify,
    };
    let mut workers = Vec::new();
    let mut qid = 1u16;
    for cpu in cores.iter() {
        let mut conns = Vec::new();
        for _ in 0..args.connections {
            let (sock, maxh2cdata) =
                ctrl.connect_io_queue(qid, args.queue_depth as u16 + 1, digests)?;
            let first = (qid - 1) as u64 * units as u64 * nlb;
            let region = Region::new(first, units, nlb as u32, bs as usize, args.verify);
            conns.push(Connection::new(sock, qid, plan, maxh2cdata, region));
            qid += 1;
        }
        workers.push(Worker { cpu, conns });
    }

    let config = Config {
        target: args.target.describe(),
        nsid: ctrl.nsid,
        cores: cores.to_string(),
        connections_per_core: args.connections,
        workload: args.workload,
        io_size,
        queue_depth: args.queue_depth,
        read_percent: (args.workload == Workload::Randrw).then_some(args.read_percent),
        seconds: args.seconds,
        header_digest: digests.header,
        data_digest: digests.data,
        verify: args.verify,
    };
    if !args.json {
        report::print_config(&config);
        println!(
            "Attached to NVMe over Fabrics controller {} (CNTLID {}), namespace {}: {} blocks of {bs} bytes",
            args.target.subnqn, ctrl.cntlid, ctrl.nsid, ctrl.blocks
        );
    }
    let handles: Vec<_> = workers.into_iter().map(|w| w.spawn(args.seconds)).collect();
    let mut rows = Vec::new();
    for h in handles {
        let done = h
            .join()
            .map_err(|_| Fatal("a worker thread panicked".into()))??;
        for c in done.conns {
            rows.push(Row {
                core: Some(done.cpu),
                qid: Some(c.qid),
                seconds: done.seconds,
                stats: c.stats,
            });
        }
    }
    drop(ctrl);
    let report = Report::new(config, rows);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        report.print();
    }
    Ok(report)
}
