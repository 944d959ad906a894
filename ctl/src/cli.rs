//! The command line: global options, the command tree and the parsers of
//! option values (endpoint URL, seconds), as clap derive definitions.
//!
//! Thread: the CLI's main thread, before the async runtime starts.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum, ValueHint};
use clap_complete::Shell;
use io_engine::env::cores::CoreSet;
use tonic::transport::Endpoint;

use crate::client_tls::ClientTls;

/// Where the engine listens unless `--endpoint` or `IO_ENGINE_ENDPOINT` says
/// otherwise.
pub(crate) const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:10124";

/// Longest wait for the TCP connection (shortened to `--timeout` when that is
/// smaller).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Smallest accepted `--watch` period or `--timeout`.
const MIN_SECONDS: Duration = Duration::from_millis(1);

/// Command-line client of the io-engine daemon's gRPC API.
///
/// Exit status: 0 on success, 1 when the engine answers with an error or
/// cannot be reached, 2 for a usage error. Errors are one line on stderr,
/// "io-engine-ctl: error: <message>"; gRPC errors start with the status code
/// name (e.g. NOT_FOUND) followed by the engine's message.
#[derive(Debug, Parser)]
#[command(name = "io-engine-ctl", version, propagate_version = true)]
pub(crate) struct Cli {
    /// URL of the engine's gRPC endpoint: http://HOST:PORT, or
    /// https://HOST:PORT for an engine serving TLS (with --tls-ca); a bare
    /// HOST:PORT means http.
    #[arg(
        long,
        global = true,
        env = "IO_ENGINE_ENDPOINT",
        default_value = DEFAULT_ENDPOINT,
        value_name = "URL", value_hint = ValueHint::Other,
        value_parser = parse_endpoint,
    )]
    pub(crate) endpoint: EngineAddress,

    #[command(flatten)]
    pub(crate) tls: ClientTls,

    /// Output format: aligned human-readable tables, or JSON with the API's
    /// field names and sizes in bytes. (Long option only: `-o` is `perf
    /// run`'s IO size, as in bdev-perf.)
    #[arg(
        long,
        global = true,
        env = "IO_ENGINE_OUTPUT",
        value_name = "FORMAT",
        value_enum,
        default_value_t = OutputFormat::Table,
    )]
    pub(crate) output: OutputFormat,

    /// Seconds to wait for each answer of the engine (fractions accepted);
    /// connecting waits at most 3 s, or this long if shorter.
    #[arg(
        long,
        global = true,
        env = "IO_ENGINE_TIMEOUT",
        default_value = "10",
        value_name = "SECONDS", value_hint = ValueHint::Other,
        value_parser = parse_seconds,
    )]
    pub(crate) timeout: Duration,

    /// Print tables without their column-header lines (and `stats io
    /// --watch` without its interval line), for scripts.
    #[arg(long, global = true)]
    pub(crate) no_headers: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    /// Aligned columns, human-readable sizes and latencies.
    Table,
    /// JSON: one object per command; with `stats io --watch`, one object per
    /// line per interval.
    Json,
}

/// The top-level commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create, destroy and describe block devices.
    #[command(subcommand, arg_required_else_help = true)]
    Bdev(BdevCommand),
    /// Read and reset the engine's counters.
    #[command(subcommand, arg_required_else_help = true)]
    Stats(StatsCommand),
    /// Describe the running engine.
    #[command(subcommand, arg_required_else_help = true)]
    Engine(EngineCommand),
    /// List the shared devices (NBD and NVMe/TCP).
    #[command(subcommand, arg_required_else_help = true)]
    Export(ExportCommand),
    /// Describe the accel framework: modules, assignments, counters.
    #[command(subcommand, arg_required_else_help = true)]
    Accel(AccelCommand),
    /// Measure devices with the engine's own reactors (bdev-perf inside the
    /// running engine).
    #[command(subcommand, arg_required_else_help = true)]
    Perf(PerfCommand),
    /// The running engine's configuration.
    #[command(subcommand, arg_required_else_help = true)]
    Config(ConfigCommand),
    /// Print a shell completion script: e.g. `source <(io-engine-ctl
    /// completions bash)`.
    Completions {
        /// The shell.
        shell: Shell,
    },
}

/// `perf ...`
#[derive(Debug, Subcommand)]
pub(crate) enum PerfCommand {
    /// Drive devices at a fixed queue depth from the engine's reactors for a
    /// while and print IOPS, bandwidth and latency per core and device.
    Run(PerfArgs),
}

/// Arguments of `perf run`: bdev-perf's flags (`-q`, `-o`, `-w`, `-M`, `-t`,
/// `-y`, `-l`/`-m`), on devices that exist (by name). Unset values take the
/// engine's defaults (4 KiB IOs, queue depth 32, half reads for randrw); the
/// engine checks them.
#[derive(Debug, Args)]
pub(crate) struct PerfArgs {
    /// Devices to drive (names).
    #[arg(required = true, value_name = "DEVICE")]
    pub(crate) bdevs: Vec<String>,
    /// IO pattern: read, write, randread, randwrite or randrw.
    #[arg(short, long)]
    pub(crate) workload: String,
    /// IOs in flight per core and device (default 32).
    #[arg(short, long, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) queue_depth: Option<u32>,
    /// IO size in bytes, suffixes k and m accepted: 4k (default 4k).
    // `-s` was this option's short name before `-o` stopped meaning
    // `--output`; scripts that use it keep working.
    #[arg(short = 'o', long, short_alias = 's', value_name = "BYTES", value_hint = ValueHint::Other, value_parser = parse_size)]
    pub(crate) io_size: Option<u64>,
    /// Percentage of reads for randrw (default 50).
    #[arg(short = 'M', long = "rw-mix-read", value_name = "PERCENT", value_hint = ValueHint::Other,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub(crate) read_percent: Option<u32>,
    /// Run time in seconds (fractions accepted).
    #[arg(short = 't', long = "time", value_name = "SECONDS", value_hint = ValueHint::Other, default_value = "5",
          value_parser = parse_seconds)]
    pub(crate) time: Duration,
    /// Write a pattern, read it back and compare (devices that store data).
    #[arg(short = 'y', long)]
    pub(crate) verify: bool,
    /// Reactors to run on, by index as `engine info` counts them, as a list:
    /// 0,2-3 (default: every reactor).
    #[arg(short = 'l', long = "core-list", visible_alias = "cores", value_name = "LIST", value_hint = ValueHint::Other,
          value_parser = parse_core_list, conflicts_with = "reactor_mask")]
    pub(crate) core_list: Option<CoreSet>,
    /// Reactors to run on as a hex mask of their indices: 0x3 is reactors 0
    /// and 1.
    #[arg(short = 'm', long = "reactor-mask", value_name = "MASK", value_hint = ValueHint::Other, value_parser = parse_core_mask)]
    pub(crate) reactor_mask: Option<CoreSet>,
}

impl PerfArgs {
    /// The reactor indices asked for, by list or by mask; empty: every
    /// reactor.
    pub(crate) fn cores(&self) -> Vec<u32> {
        self.core_list
            .as_ref()
            .or(self.reactor_mask.as_ref())
            .map(|set| set.cpus().to_vec())
            .unwrap_or_default()
    }
}

/// `config ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the devices and shares as the TOML file the daemon's --config
    /// loads (save with `> engine.toml`, restore with `io-engine --config
    /// engine.toml`).
    Dump,
}

/// `accel ...`
#[derive(Debug, Subcommand)]
pub(crate) enum AccelCommand {
    /// Registered modules, best first, with the opcodes they execute.
    Modules,
    /// The module that runs each opcode, and reactors that fell back to
    /// software.
    Assignments,
    /// Tasks, failures, miscompares and bytes per opcode and module, and
    /// submissions per module (pairs that never ran are left out).
    Stats,
}

/// `export ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ExportCommand {
    /// Every shared device with its URI and connection count.
    List,
}

/// `bdev ...`
#[derive(Debug, Subcommand)]
pub(crate) enum BdevCommand {
    /// Create a device from its URI and print it.
    ///
    /// Examples: malloc:///m0?size_mb=64&blk_size=4096,
    /// null:///n0?size_mb=1024&blk_size=512 (quote the URI in a shell).
    Create {
        /// The device URI.
        uri: String,
    },
    /// Destroy a device (it must not be open).
    Destroy {
        /// Device name.
        name: String,
    },
    /// Describe one device.
    Get {
        /// Device name.
        name: String,
    },
    /// List every device, ordered by name.
    List,
    /// Share a device over NBD (export name = device name) or NVMe/TCP.
    Share {
        /// Device name.
        name: String,
        /// The protocol: `nbd` or `nvmf` (NVMe/TCP).
        #[arg(long, default_value = "nbd", value_parser = ["nbd", "nvmf"])]
        protocol: String,
        /// NVMe-oF: a host NQN allowed to connect; repeat for more (none:
        /// any host).
        #[arg(long = "allowed-host", value_name = "NQN", value_hint = ValueHint::Other)]
        allowed_hosts: Vec<String>,
        /// NVMe-oF: an allowed host that must authenticate (DH-HMAC-CHAP),
        /// and the file holding its secret (`nvme gen-dhchap-key` output);
        /// repeat for more. Files, not values: a command line is visible
        /// to every user of the machine.
        #[arg(long = "dhchap-secret", value_name = "NQN=FILE")]
        dhchap_secrets: Vec<String>,
        /// NVMe-oF: the controller's secret for a host given with
        /// --dhchap-secret, from a file (bidirectional authentication).
        #[arg(long = "dhchap-ctrl-secret", value_name = "NQN=FILE")]
        dhchap_ctrl_secrets: Vec<String>,
        /// NVMe-oF: the subsystem's NQN (default
        /// nqn.2024-12.io.io-engine:NAME).
        #[arg(long, value_name = "NQN", value_hint = ValueHint::Other)]
        nqn: Option<String>,
        /// Refuse writes, trims and write-zeroes.
        #[arg(long)]
        read_only: bool,
    },
    /// Stop sharing a device: its connections close once their IO is done.
    Unshare {
        /// Device name.
        name: String,
    },
}

/// `stats ...`
#[derive(Debug, Subcommand)]
pub(crate) enum StatsCommand {
    /// IO counters per device, or per-interval rates with --watch.
    ///
    /// Without --watch: the cumulative counters of each operation type (ops,
    /// bytes, errors, latency average/min/max in µs) and the IOs in flight.
    /// With --watch: every SECONDS, read and write IOPS and MiB/s per device
    /// (total = read + write), computed from two consecutive readings over the
    /// engine's own uptime; runs until Ctrl-C or --count intervals.
    Io(IoArgs),
    /// Per-reactor counters: poll rounds, busy and idle time, messages.
    Reactors,
    /// Object pool counters, per pool and per core.
    Pools,
    /// Zero the IO counters of one device, or of every device.
    Reset {
        /// Device name; every device when omitted.
        name: Option<String>,
    },
}

/// Arguments of `stats io`.
#[derive(Debug, Args)]
pub(crate) struct IoArgs {
    /// Device name; every device when omitted.
    pub(crate) name: Option<String>,
    /// Print per-interval rates every SECONDS (fractions accepted, e.g. 0.5).
    #[arg(short, long, value_name = "SECONDS", value_hint = ValueHint::Other, value_parser = parse_seconds)]
    pub(crate) watch: Option<Duration>,
    /// With --watch: stop after K intervals instead of at Ctrl-C.
    #[arg(
        long,
        value_name = "K", value_hint = ValueHint::Other,
        requires = "watch",
        value_parser = clap::value_parser!(u64).range(1..),
    )]
    pub(crate) count: Option<u64>,
}

/// `engine ...`
#[derive(Debug, Subcommand)]
pub(crate) enum EngineCommand {
    /// Version, cores, poll mode, uptime, hugepages, accel modules, IO pool.
    Info,
}

/// A validated engine address: the URL as the user should read it, and the
/// tonic endpoint built from it.
#[derive(Debug, Clone)]
pub(crate) struct EngineAddress {
    /// The URL, with `http://` added when it had no scheme.
    pub(crate) url: String,
    /// The endpoint to connect to.
    pub(crate) endpoint: Endpoint,
}

impl Cli {
    /// Checks that the TLS options fit the endpoint: an https:// endpoint
    /// needs --tls-ca, an http:// one takes none of them. The message is a
    /// usage error's.
    pub(crate) fn check_tls(&self) -> Result<(), String> {
        let url = &self.endpoint.url;
        match (self.endpoint.https(), self.tls.ca.is_some(), self.tls.any()) {
            (true, false, _) => Err(format!(
                "the endpoint {url} is https: give --tls-ca FILE (or IO_ENGINE_TLS_CA), the CA \
                 certificate that signed the engine's"
            )),
            (false, _, true) => Err(format!(
                "--tls-ca, --tls-cert, --tls-key and --tls-server-name (or their IO_ENGINE_TLS_* \
                 variables) need an https:// endpoint, not {url}"
            )),
            _ => Ok(()),
        }
    }
}

impl EngineAddress {
    /// Whether the endpoint is https (TLS).
    pub(crate) fn https(&self) -> bool {
        self.url.starts_with("https://")
    }
}

/// Parses `--endpoint`: an http or https URL, or HOST:PORT meaning http.
fn parse_endpoint(value: &str) -> Result<EngineAddress, String> {
    let url = if value.contains("://") {
        value.to_owned()
    } else {
        format!("http://{value}")
    };
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(format!(
            "{value:?} is not an http or https URL: the engine's gRPC endpoint is HTTP/2, \
             plain or over TLS, e.g. {DEFAULT_ENDPOINT}"
        ));
    }
    let endpoint = Endpoint::from_shared(url.clone())
        .map_err(|e| format!("{value:?} is not a valid URL: {e}"))?;
    if endpoint.uri().host().is_none_or(str::is_empty) {
        return Err(format!("{value:?} names no host, e.g. {DEFAULT_ENDPOINT}"));
    }
    Ok(EngineAddress { url, endpoint })
}

/// Parses `perf run -l`: reactor indices and ranges, `0,2-3`.
fn parse_core_list(value: &str) -> Result<CoreSet, String> {
    CoreSet::parse_list(value).map_err(|e| e.to_string())
}

/// Parses `perf run -m`: a hex mask of reactor indices, `0x3`.
fn parse_core_mask(value: &str) -> Result<CoreSet, String> {
    CoreSet::parse_mask(value).map_err(|e| e.to_string())
}

/// Parses a byte count with an optional k or m suffix (KiB, MiB): `4096`,
/// `4k`, `1m`.
fn parse_size(value: &str) -> Result<u64, String> {
    let invalid = || format!("{value:?} is not a size of at least 1 byte, e.g. 4096, 4k or 1m");
    let lower = value.trim().to_ascii_lowercase();
    let (digits, shift) = match lower.as_bytes().last() {
        Some(b'k') => (&lower[..lower.len() - 1], 10),
        Some(b'm') => (&lower[..lower.len() - 1], 20),
        _ => (lower.as_str(), 0),
    };
    let n: u64 = digits.parse().map_err(|_| invalid())?;
    n.checked_mul(1 << shift)
        .filter(|&bytes| bytes > 0)
        .ok_or_else(invalid)
}

/// Parses a number of seconds, fractions accepted, at least 1 ms.
fn parse_seconds(value: &str) -> Result<Duration, String> {
    let invalid = || {
        format!(
            "{value:?} is not a number of seconds of at least {}, e.g. 0.5 or 2",
            MIN_SECONDS.as_secs_f64()
        )
    };
    let seconds: f64 = value.trim().parse().map_err(|_| invalid())?;
    match Duration::try_from_secs_f64(seconds) {
        Ok(d) if d >= MIN_SECONDS => Ok(d),
        _ => Err(invalid()),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("io-engine-ctl").chain(args.iter().copied()))
    }

    #[test]
    fn command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_options_have_their_env_vars_and_defaults() {
        let cmd = Cli::command();
        let arg = |id: &str| {
            cmd.get_arguments()
                .find(|a| a.get_id() == id)
                .unwrap_or_else(|| panic!("no argument {id}"))
                .clone()
        };
        let cases = [
            ("endpoint", "IO_ENGINE_ENDPOINT", DEFAULT_ENDPOINT),
            ("output", "IO_ENGINE_OUTPUT", "table"),
            ("timeout", "IO_ENGINE_TIMEOUT", "10"),
        ];
        for (id, env, default) in cases {
            let a = arg(id);
            assert_eq!(a.get_env().and_then(|e| e.to_str()), Some(env), "{id}");
            let defaults: Vec<_> = a.get_default_values().iter().collect();
            assert_eq!(defaults, [default], "{id}");
            assert!(a.is_global_set(), "{id} is global");
        }
    }

    #[test]
    fn global_options_are_accepted_after_the_subcommand() {
        let cli = parse(&[
            "bdev",
            "list",
            "--output",
            "json",
            "--endpoint",
            "10.0.0.1:99",
        ])
        .unwrap();
        assert_eq!(cli.output, OutputFormat::Json);
        assert_eq!(cli.endpoint.url, "http://10.0.0.1:99");
        assert!(matches!(cli.command, Command::Bdev(BdevCommand::List)));
    }

    #[test]
    fn stats_io_watch_accepts_fractions_and_count() {
        let cli = parse(&["stats", "io", "m0", "--watch", "0.5", "--count", "3"]).unwrap();
        let Command::Stats(StatsCommand::Io(io)) = cli.command else {
            panic!("not stats io: {:?}", cli.command);
        };
        assert_eq!(io.name.as_deref(), Some("m0"));
        assert_eq!(io.watch, Some(Duration::from_millis(500)));
        assert_eq!(io.count, Some(3));
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for args in [
            &["stats", "io", "--watch", "0"][..],
            &["stats", "io", "--watch", "-1"],
            &["stats", "io", "--watch", "soon"],
            &["stats", "io", "--watch", "1", "--count", "0"],
            &["stats", "io", "--count", "2"],
            &["--timeout", "NaN", "engine", "info"],
            &["--output", "xml", "engine", "info"],
            &["--endpoint", "ftp://h:1", "engine", "info"],
            &["--endpoint", "http://", "engine", "info"],
            &["--tls-cert", "c.pem", "engine", "info"],
            &["bdev", "create"],
            &["bdev", "frobnicate"],
        ] {
            let err = parse(args).expect_err(&format!("{args:?} must be rejected"));
            assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
        }
    }

    #[test]
    fn perf_run_takes_bdev_perfs_flags() {
        let cli = parse(&[
            "perf", "run", "m0", "n0", "-w", "randrw", "-q", "8", "-o", "64k", "-M", "70", "-t",
            "0.5", "-y", "-l", "0-1",
        ])
        .unwrap();
        let Command::Perf(PerfCommand::Run(p)) = cli.command else {
            panic!("not perf run: {:?}", cli.command);
        };
        assert_eq!(p.bdevs, ["m0", "n0"]);
        assert_eq!(p.workload, "randrw");
        assert_eq!(p.queue_depth, Some(8));
        assert_eq!(p.io_size, Some(64 << 10));
        assert_eq!(p.read_percent, Some(70));
        assert_eq!(p.time, Duration::from_millis(500));
        assert!(p.verify);
        assert_eq!(p.cores(), [0, 1]);
        let defaults = parse(&["perf", "run", "m0", "-w", "read"]).unwrap();
        let Command::Perf(PerfCommand::Run(p)) = defaults.command else {
            panic!("not perf run");
        };
        assert_eq!(
            (p.queue_depth, p.io_size, p.read_percent),
            (None, None, None)
        );
        assert_eq!(p.time, Duration::from_secs(5));
        assert!(p.cores().is_empty());
        for bad in [
            &["perf", "run", "-w", "read"][..],
            &["perf", "run", "m0"],
            &["perf", "run", "m0", "-w", "read", "-q", "0"],
            &["perf", "run", "m0", "-w", "read", "-s", "0"],
            &["perf", "run", "m0", "-w", "read", "-o", "0"],
            &["perf", "run", "m0", "-w", "read", "-M", "101"],
            &["perf", "run", "m0", "-w", "read", "-l", "2-1"],
            &["perf", "run", "m0", "-w", "read", "-m", "0"],
            &["perf", "run", "m0", "-w", "read", "-l", "0", "-m", "0x1"],
        ] {
            let err = parse(bad).expect_err(&format!("{bad:?} must be rejected"));
            assert_eq!(err.exit_code(), 2, "{bad:?}: {err}");
        }
    }

    /// The command: `-o` is the IO size, as in bdev-perf, not the
    /// output format; `--output` (long only) still is.
    #[test]
    fn perf_run_dash_o_is_the_io_size() {
        let cli = parse(&[
            "perf", "run", "-o", "4096", "m0", "-w", "randread", "-t", "1",
        ])
        .unwrap();
        let Command::Perf(PerfCommand::Run(p)) = &cli.command else {
            panic!("not perf run: {:?}", cli.command);
        };
        assert_eq!(p.io_size, Some(4096));
        assert_eq!(cli.output, OutputFormat::Table);
        // The former short name still works.
        let cli = parse(&["perf", "run", "m0", "-w", "read", "-s", "8k"]).unwrap();
        let Command::Perf(PerfCommand::Run(p)) = &cli.command else {
            panic!("not perf run");
        };
        assert_eq!(p.io_size, Some(8192));
        let cli = parse(&[
            "perf", "run", "m0", "-w", "read", "-o", "4k", "--output", "json",
        ])
        .unwrap();
        assert_eq!(cli.output, OutputFormat::Json);
        // -o is nobody's output format any more.
        assert!(parse(&["-o", "json", "bdev", "list"]).is_err());
        assert!(parse(&["bdev", "list", "-o", "json"]).is_err());
    }

    #[test]
    fn perf_run_takes_reactors_by_list_or_mask() {
        let cores = |args: &[&str]| {
            let cli = parse(&[&["perf", "run", "m0", "-w", "read"], args].concat()).unwrap();
            let Command::Perf(PerfCommand::Run(p)) = cli.command else {
                panic!("not perf run");
            };
            p.cores()
        };
        assert_eq!(cores(&["-l", "0,2-3"]), [0, 2, 3]);
        assert_eq!(cores(&["--cores", "1,0"]), [0, 1]);
        assert_eq!(cores(&["-m", "0x5"]), [0, 2]);
        assert_eq!(cores(&[]), Vec::<u32>::new());
    }

    /// Every short flag of `perf run`, globals included, is the one bdev-perf
    /// gives the same meaning (or none it knows: -h, -V).
    #[test]
    fn perf_run_short_flags_mean_what_they_mean_in_bdev_perf() {
        let cmd = Cli::command();
        let perf = cmd
            .find_subcommand("perf")
            .and_then(|p| p.find_subcommand("run"))
            .expect("perf run");
        let mut shorts: Vec<(char, String)> = perf
            .get_arguments()
            .chain(cmd.get_arguments().filter(|a| a.is_global_set()))
            .filter_map(|a| Some((a.get_short()?, a.get_id().to_string())))
            .collect();
        shorts.sort();
        let expected = [
            ('M', "read_percent"),
            ('l', "core_list"),
            ('m', "reactor_mask"),
            ('o', "io_size"),
            ('q', "queue_depth"),
            ('t', "time"),
            ('w', "workload"),
            ('y', "verify"),
        ];
        let shorts: Vec<(char, &str)> = shorts.iter().map(|(c, id)| (*c, id.as_str())).collect();
        assert_eq!(shorts, expected);
    }

    #[test]
    fn size_parser() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert!(parse_size("0").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("99999999999999999m").is_err());
    }

    #[test]
    fn no_headers_is_global() {
        let cli = parse(&["bdev", "list", "--no-headers"]).unwrap();
        assert!(cli.no_headers);
        assert!(!parse(&["bdev", "list"]).unwrap().no_headers);
    }

    #[test]
    fn seconds_parser() {
        assert_eq!(parse_seconds("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_seconds("0.001"), Ok(Duration::from_millis(1)));
        let err = parse_seconds("0.0001").unwrap_err();
        assert!(err.contains("at least 0.001"), "{err}");
        assert!(parse_seconds("inf").is_err());
    }

    #[test]
    fn endpoint_parser() {
        let a = parse_endpoint("http://127.0.0.1:10124").unwrap();
        assert_eq!(a.url, "http://127.0.0.1:10124");
        assert_eq!(a.endpoint.uri().port_u16(), Some(10124));
        assert_eq!(parse_endpoint("engine:1").unwrap().url, "http://engine:1");
        let err = parse_endpoint("ftp://engine:1").unwrap_err();
        assert!(err.contains("not an http or https URL"), "{err}");
        assert!(parse_endpoint("https://engine:1").unwrap().https());
        assert!(!parse_endpoint("engine:1").unwrap().https());
    }

    #[test]
    fn tls_options_fit_the_endpoint() {
        let https = parse(&["--endpoint", "https://h:1", "engine", "info"]).unwrap();
        let err = https.check_tls().unwrap_err();
        assert!(err.contains("give --tls-ca"), "{err}");
        let with_ca = parse(&[
            "--endpoint",
            "https://h:1",
            "--tls-ca",
            "ca.crt",
            "--tls-cert",
            "c.crt",
            "--tls-key",
            "c.key",
            "engine",
            "info",
        ])
        .unwrap();
        assert_eq!(with_ca.check_tls(), Ok(()));
        let plain = parse(&["--tls-ca", "ca.crt", "engine", "info"]).unwrap();
        let err = plain.check_tls().unwrap_err();
        assert!(err.contains("need an https:// endpoint"), "{err}");
        assert_eq!(parse(&["engine", "info"]).unwrap().check_tls(), Ok(()));
    }
}
