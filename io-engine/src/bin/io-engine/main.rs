//! io-engine: the daemon. Starts the reactors, creates the devices given on
//! the command line, and serves the gRPC API and the Prometheus endpoint
//! until SIGTERM or SIGINT.
//!
//! Thread: `main` parses flags, binds the listeners, starts the engine and
//! then runs the control-plane runtime (a small tokio runtime, confined to
//! the CPUs the reactors leave free, sharing theirs when they take every
//! CPU) that serves gRPC and /metrics and runs the engine's NBD and
//! NVMe/TCP accept loops, each listener handed to the engine
//! (`Engine::serve_nbd`, `Engine::serve_nvmf`). The data plane runs on the
//! reactors.

mod config;
mod share_flag;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use io_engine::accel::Assignment;
use io_engine::accel::dsa::DsaArgs;
use io_engine::accel::ioat::IoatArgs;
use io_engine::control::{GrpcTls, GrpcTlsArgs, Limits};
use io_engine::engine::{Engine, EngineConfig};
use io_engine::env::affinity;
use io_engine::env::core_sizing::CoreSizing;
use io_engine::env::cores::allowed_cpus;
use io_engine::env::cpu_quota::CpuQuota;
use io_engine::env::dma::register_mapper;
use io_engine::env::socket_path::SocketPath;
use io_engine::export::nbd::{Listener, TlsConfig, TlsMode};
use io_engine::export::nvmf;
use io_engine::pool::DEFAULT_CACHE_SIZE;
use io_engine::reactor::PollMode;
use share_flag::ShareFlag;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How long a shutdown may take before the daemon gives up waiting.
const DRAIN_TIMEOUT: Duration = Duration::from_millis(4500);

/// The io-engine daemon: reactors on pinned cores, block devices, a gRPC
/// control plane and a Prometheus endpoint.
///
/// Every flag can also be set by an environment variable (shown as [env:]).
/// Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 1 if the drain
/// timed out, 2 on a bad flag or a failed start (one line on stderr).
#[derive(Parser, Debug)]
#[command(name = "io-engine", version = VERSION, about, long_about)]
struct Args {
    /// Cores as a hex mask (SPDK's -m), e.g. 0x3. Default (none of -m, -l,
    /// --core-count): one reactor per whole CPU of the cgroup CPU quota on
    /// the first CPUs this process may run on, or only the first of them
    /// without a quota.
    #[arg(
        short = 'm',
        long,
        env = "IO_ENGINE_REACTOR_MASK",
        conflicts_with = "core_list"
    )]
    reactor_mask: Option<String>,

    /// Cores as a list, e.g. 0,2-3.
    #[arg(short = 'l', long, env = "IO_ENGINE_CORE_LIST")]
    core_list: Option<String>,

    /// Run N reactors, on the first N CPUs this process may run on.
    #[arg(
        long,
        env = "IO_ENGINE_CORE_COUNT",
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..),
        conflicts_with_all = ["reactor_mask", "core_list"]
    )]
    core_count: Option<u32>,

    /// Address of the gRPC API.
    #[arg(long, env = "IO_ENGINE_GRPC_ADDR", default_value = "127.0.0.1:10124")]
    grpc_addr: SocketAddr,

    #[command(flatten)]
    grpc_tls: GrpcTlsArgs,

    /// Address of the Prometheus endpoint (GET /metrics).
    #[arg(long, env = "IO_ENGINE_METRICS_ADDR", default_value = "127.0.0.1:9502")]
    metrics_addr: SocketAddr,

    /// Device to create at start, e.g. 'malloc:///m0?size_mb=64'; repeat the
    /// flag for more (in the environment variable, separate URIs by commas).
    #[arg(
        long = "bdev",
        value_name = "URI",
        env = "IO_ENGINE_BDEV",
        value_delimiter = ','
    )]
    bdevs: Vec<String>,

    /// How idle reactors wait: busy (spin, lowest latency), adaptive (sleep
    /// in epoll_wait as soon as idle, wake on a message or fd readiness) or
    /// adaptive:MICROS (spin that long idle before sleeping).
    #[arg(long, env = "IO_ENGINE_POLL_MODE", default_value = "busy")]
    poll_mode: PollMode,

    /// Run an accel opcode on a given module, e.g. copy=software; repeat the
    /// flag for more (in the environment variable, separate by commas).
    /// Default: each opcode on the best registered module that supports it.
    #[arg(
        long = "accel-assign",
        value_name = "OPCODE=MODULE",
        env = "IO_ENGINE_ACCEL_ASSIGN",
        value_delimiter = ','
    )]
    accel_assign: Vec<Assignment>,

    #[command(flatten)]
    ioat: IoatArgs,

    #[command(flatten)]
    dsa: DsaArgs,

    #[command(flatten)]
    grpc_limits: Limits,

    /// IO objects in the shared pool.
    #[arg(long, env = "IO_ENGINE_IO_POOL_SIZE", default_value_t = 65535)]
    io_pool_size: usize,

    /// IO objects cached per core (0: no cache).
    #[arg(long, env = "IO_ENGINE_IO_POOL_CACHE", default_value_t = DEFAULT_CACHE_SIZE)]
    io_pool_cache: usize,

    /// NBD listening address (TCP).
    #[arg(long, env = "IO_ENGINE_NBD_ADDR", default_value = "127.0.0.1:10809")]
    nbd_addr: SocketAddr,

    /// Also listen for NBD on this Unix socket path. A socket another
    /// process listens on is refused (exit 2), a stale one replaced; at
    /// shutdown the file is removed if it is still this daemon's.
    #[arg(long, env = "IO_ENGINE_NBD_SOCKET", value_name = "PATH")]
    nbd_socket: Option<std::path::PathBuf>,

    /// NVMe/TCP listening address; repeat to listen on more (in the
    /// environment variable, separate by commas).
    #[arg(
        long,
        env = "IO_ENGINE_NVMF_ADDR",
        default_value = "127.0.0.1:4420",
        value_delimiter = ','
    )]
    nvmf_addr: Vec<SocketAddr>,

    /// NVMe/TCP connections (queue pairs) allowed per listener; more are
    /// refused (0: no limit).
    #[arg(long, env = "IO_ENGINE_NVMF_MAX_CONNECTIONS", default_value_t = 1024)]
    nvmf_max_connections: usize,

    /// NVMe/TCP connections per listener that have not finished ICReq and
    /// Connect (0: no limit); a newcomer beyond takes the place of the one
    /// that made the least progress, the oldest of those, which is closed.
    /// Each has 10 s to connect.
    #[arg(long, env = "IO_ENGINE_NVMF_MAX_CONNECTING", default_value_t = 128)]
    nvmf_max_connecting: usize,

    /// NVMe/TCP: write data a command capsule may carry, in bytes (a
    /// multiple of 16 from 4096 to 65536); larger writes go by R2T.
    #[arg(
        long,
        env = "IO_ENGINE_NVMF_IN_CAPSULE",
        default_value_t = 8192,
        value_name = "BYTES"
    )]
    nvmf_in_capsule: usize,

    /// NVMe/TCP: the largest transfer of one command (MDTS), in bytes: 4 KiB
    /// times a power of two, at most 8 MiB.
    #[arg(
        long,
        env = "IO_ENGINE_NVMF_MAX_TRANSFER",
        default_value_t = 131072,
        value_name = "BYTES"
    )]
    nvmf_max_transfer: usize,

    /// NVMe/TCP: data digests (CRC-32C) of data PDUs of at least BYTES
    /// are computed by the accel engine crc32c is assigned to, where that
    /// is an offload engine (DSA) on the connection's core; smaller PDUs,
    /// and all on cores where crc32c runs on software, inline by the core's
    /// SIMD CRC. At least 4096; `off`: always inline.
    #[arg(
        long,
        env = "IO_ENGINE_NVMF_DIGEST_OFFLOAD",
        default_value_t = nvmf::DigestOffloadMin(Some(nvmf::DIGEST_OFFLOAD_MIN)),
        value_name = "BYTES|off"
    )]
    nvmf_digest_offload: nvmf::DigestOffloadMin,

    /// NVMe/TCP: commands a queue holds (MQES + 1), 2 to 1024.
    #[arg(long, env = "IO_ENGINE_NVMF_QUEUE_DEPTH", default_value_t = 128)]
    nvmf_queue_depth: u16,

    /// NVMe/TCP: queues (admin and I/O, once connected and authenticated)
    /// one host NQN may hold across the target; its next Connect is
    /// refused with "controller busy" (0: no limit). The default is 8
    /// controllers of 64 I/O queues.
    #[arg(
        long,
        env = "IO_ENGINE_NVMF_MAX_QUEUES_PER_HOST",
        default_value_t = nvmf::QUEUES_PER_HOST,
        value_name = "N"
    )]
    nvmf_max_queues_per_host: usize,

    /// Device to share at start, as NAME[:PROTOCOL][:ro][:nqn=NQN][:host=NQN]...:
    /// over NBD (the default) or NVMe/TCP (`nvmf`), read-only with `ro`; an
    /// NVMe/TCP share's subsystem NQN with `nqn=` (default
    /// nqn.2024-12.io.io-engine:NAME) and the hosts allowed to connect with
    /// `host=`, repeated (none: any host); `nqn=` and `host=` come last,
    /// each NQN running to the next `:nqn=`/`:host=`, colons included;
    /// repeat the flag for more (in the environment variable, separate by
    /// commas).
    #[arg(
        long = "share",
        value_name = "NAME[:nbd|:nvmf][:ro][:nqn=NQN][:host=NQN]...",
        env = "IO_ENGINE_SHARE",
        value_delimiter = ','
    )]
    shares: Vec<String>,

    /// NBD sessions (connections in transmission) allowed in total and per
    /// export; beyond, GO is refused with ERR_POLICY and the reason (0: no
    /// limit). Connections still in the handshake do not count here: see
    /// --nbd-max-handshakes.
    #[arg(long, env = "IO_ENGINE_NBD_MAX_CONNECTIONS", default_value_t = 64)]
    nbd_max_connections: usize,

    /// Longest an NBD connection holds a ready reply back (microseconds),
    /// so that a client with many requests in flight gets its replies
    /// together: one write and one client wake-up for many. A client with
    /// one request at a time is never held. 0: every reply goes out at once.
    #[arg(
        long,
        env = "IO_ENGINE_NBD_REPLY_HOLD",
        default_value_t = 100,
        value_name = "MICROS"
    )]
    nbd_reply_hold: u64,

    /// Longest an NBD connection may take from accept to its transmission
    /// phase (options, and TLS if any), in seconds; it is closed then (0:
    /// no limit).
    #[arg(
        long,
        env = "IO_ENGINE_NBD_HANDSHAKE_TIMEOUT",
        default_value_t = 10,
        value_name = "SECS"
    )]
    nbd_handshake_timeout: u64,

    /// NBD connections that may be in the handshake at once (accepted, not
    /// in transmission yet); a newcomer beyond takes the place of the one
    /// that made the least progress, the oldest of those, which is closed
    /// (0: no limit).
    #[arg(long, env = "IO_ENGINE_NBD_MAX_HANDSHAKES", default_value_t = 128)]
    nbd_max_handshakes: usize,
    /// NBD over TLS (STARTTLS): off, allow (offered, plaintext accepted
    /// too) or require (every option before STARTTLS but ABORT refused
    /// with TLS_REQD; export URIs become nbds://). allow and require need
    /// --nbd-tls-cert and --nbd-tls-key.
    #[arg(
        long,
        env = "IO_ENGINE_NBD_TLS",
        default_value = "off",
        value_name = "off|allow|require"
    )]
    nbd_tls: TlsMode,

    /// NBD TLS: the server's certificate chain (PEM).
    #[arg(long, env = "IO_ENGINE_NBD_TLS_CERT", value_name = "FILE")]
    nbd_tls_cert: Option<std::path::PathBuf>,

    /// NBD TLS: the server's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "IO_ENGINE_NBD_TLS_KEY", value_name = "FILE")]
    nbd_tls_key: Option<std::path::PathBuf>,

    /// NBD TLS: CA certificates (PEM) client certificates must chain to; a
    /// client without one fails the TLS handshake. Default: no client
    /// certificates asked for.
    #[arg(long, env = "IO_ENGINE_NBD_TLS_CLIENT_CA", value_name = "FILE")]
    nbd_tls_client_ca: Option<std::path::PathBuf>,

    /// Log format; RUST_LOG filters what is logged (default: info).
    #[arg(long, env = "IO_ENGINE_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Version and git revision, as `--version` prints them.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("IO_ENGINE_GIT_REVISION"),
    ")"
);

/// Raises the soft limit on open files to the hard one: every NBD and
/// NVMe/TCP connection is a descriptor, and the usual soft 1024 would run
/// out under a flood of sockets before the handshake bounds close them.
fn raise_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut l = getrlimit(Resource::Nofile);
    if let (Some(soft), Some(hard)) = (l.current, l.maximum)
        && soft < hard
    {
        l.current = Some(hard);
        if let Err(e) = setrlimit(Resource::Nofile, l) {
            tracing::warn!("open-file limit stays at {soft}: {e}");
        }
    }
}

/// A start-up failure: one line, exit status 2.
struct Fatal(String);

impl<E: std::fmt::Display> From<E> for Fatal {
    fn from(e: E) -> Self {
        Fatal(e.to_string())
    }
}

fn main() -> ExitCode {
    let args = match config::parse::<Args>() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // The message up to its first blank line, on one line (a list
            // of missing flags follows its heading on lines of its own).
            let text = e.render().to_string();
            let line = text
                .lines()
                .map(str::trim)
                .take_while(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            let line = if line.is_empty() {
                "bad arguments"
            } else {
                &line
            };
            eprintln!("io-engine: {line} (see --help)");
            return ExitCode::from(2);
        }
    };
    io_engine::env::logging::init("info", args.log_format == LogFormat::Json);
    match run(args) {
        Ok(code) => code,
        Err(Fatal(msg)) => {
            eprintln!("io-engine: error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<ExitCode, Fatal> {
    raise_fd_limit();
    let nbd_tls = TlsConfig::load(
        args.nbd_tls,
        args.nbd_tls_cert.as_deref(),
        args.nbd_tls_key.as_deref(),
        args.nbd_tls_client_ca.as_deref(),
    )?;
    let (cores, core_sizing) = CoreSizing::choose(
        args.reactor_mask.as_deref(),
        args.core_list.as_deref(),
        args.core_count
            .and_then(|n| usize::try_from(n).ok())
            .and_then(NonZeroUsize::new),
        allowed_cpus()?,
        CpuQuota::of_this_process(),
    )?;
    if let Some(warning) = core_sizing.warning(&cores) {
        tracing::warn!("{warning}");
    }
    // The control plane runs on the CPUs the reactors leave free, if any, so
    // busy reactors never delay a request; otherwise it shares them.
    let control_cpus: Vec<u32> = core_sizing
        .allowed
        .iter()
        .filter(|c| !cores.contains(*c))
        .collect();
    let confine = move || {
        if !control_cpus.is_empty()
            && let Err(e) = affinity::confine_current_thread(&control_cpus)
        {
            tracing::warn!("control-plane thread keeps its affinity: {e}");
        }
    };
    confine();
    let grpc_tls = args.grpc_tls.load(args.grpc_addr)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("control")
        .on_thread_start(confine)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the control-plane runtime: {e}"))?;
    let grpc = runtime
        .block_on(TcpListener::bind(args.grpc_addr))
        .map_err(|e| format!("cannot listen for gRPC on {}: {e}", args.grpc_addr))?;
    let metrics = runtime
        .block_on(TcpListener::bind(args.metrics_addr))
        .map_err(|e| format!("cannot listen for metrics on {}: {e}", args.metrics_addr))?;

    let engine = Arc::new(Engine::start(EngineConfig {
        cores,
        core_sizing,
        poll_mode: args.poll_mode,
        io_pool_size: args.io_pool_size,
        io_pool_cache: args.io_pool_cache,
        nbd_max_per_export: args.nbd_max_connections,
        nbd_max_connections: args.nbd_max_connections,
        nbd_reply_hold: Duration::from_micros(args.nbd_reply_hold),
        nbd_handshake_timeout: Duration::from_secs(args.nbd_handshake_timeout),
        nbd_max_handshakes: args.nbd_max_handshakes,
        nbd_tls,
        nvmf_max_connections: args.nvmf_max_connections,
        nvmf_max_connecting: args.nvmf_max_connecting,
        nvmf_limits: nvmf::Limits::new(
            args.nvmf_in_capsule,
            args.nvmf_max_transfer,
            args.nvmf_queue_depth,
        )
        .map_err(|e| format!("NVMe/TCP: {e}"))?
        .with_queues_per_host(args.nvmf_max_queues_per_host),
        nvmf_digest_offload: args.nvmf_digest_offload.0,
        // The I/OAT devices and the DSA model see DMA memory through a
        // mapper registered here: env tells it of every DMA region, made
        // before or after. DSA first: it runs every opcode, so malloc's
        // copies and fills and the NVMe/TCP Copy command go to it unless
        // --accel-assign says otherwise.
        accel_modules: {
            let mut m = args.dsa.modules(register_mapper);
            m.extend(args.ioat.modules(register_mapper));
            m
        },
        accel_assign: args.accel_assign.clone(),
    })?);
    for uri in &args.bdevs {
        engine
            .registry()
            .create(uri)
            .map_err(|e| format!("--bdev {uri}: {e}"))?;
    }
    for share in &args.shares {
        let flag = ShareFlag::parse(share)?;
        engine
            .share(
                flag.name,
                flag.protocol,
                flag.read_only,
                Some(flag.nvmf_options()),
            )
            .map_err(|e| format!("--share {}: {e}", share_flag::redacted(share)))?;
    }
    let mut nvmf = Vec::new();
    for addr in &args.nvmf_addr {
        nvmf.push(
            runtime
                .block_on(TcpListener::bind(addr))
                .map_err(|e| format!("cannot listen for NVMe/TCP on {addr}: {e}"))?,
        );
    }
    let nbd = runtime
        .block_on(TcpListener::bind(args.nbd_addr))
        .map_err(|e| format!("cannot listen for NBD on {}: {e}", args.nbd_addr))?;
    // The socket's path is this daemon's until it stops: a live one is
    // refused (exit 2, as a TCP port in use), a stale one replaced.
    let (nbd_unix, nbd_socket_path) = match &args.nbd_socket {
        Some(path) => {
            let _guard = runtime.enter();
            let (listener, owned) = SocketPath::bind(path)
                .map_err(|e| format!("cannot listen for NBD on --nbd-socket {e}"))?;
            listener
                .set_nonblocking(true)
                .and_then(|()| tokio::net::UnixListener::from_std(listener))
                .map(|l| (Some(l), Some(owned)))
                .map_err(|e| format!("cannot listen for NBD on {}: {e}", path.display()))?
        }
        None => (None, None),
    };
    let signals = {
        let _guard = runtime.enter();
        Signals::install().map_err(|e| format!("cannot install signal handlers: {e}"))?
    };
    // The bound addresses (a port of 0 gets one from the kernel).
    let bound = |l: &TcpListener, asked: SocketAddr| l.local_addr().unwrap_or(asked);
    tracing::info!(
        version = VERSION,
        cores = %engine.config().cores,
        core_source = %engine.config().core_sizing.source,
        poll_mode = engine.config().poll_mode.name(),
        grpc = %bound(&grpc, args.grpc_addr),
        grpc_tls = match &grpc_tls {
            None => "off",
            Some(tls) if tls.mutual() => "mutual",
            Some(_) => "on",
        },
        metrics = %bound(&metrics, args.metrics_addr),
        nbd = %bound(&nbd, args.nbd_addr),
        nbd_tls = %args.nbd_tls,
        nvmf = nvmf
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(","),
        devices = args.bdevs.len(),
        "io-engine serving"
    );

    let mut nbd_listeners = vec![Listener::Tcp(nbd)];
    nbd_listeners.extend(nbd_unix.map(Listener::Unix));
    let clean = runtime.block_on(serve(
        engine.clone(),
        (grpc, args.grpc_limits, grpc_tls),
        metrics,
        (nbd_listeners, nvmf),
        signals,
    ));
    // Removes the socket file if it is still the one bound at start.
    drop(nbd_socket_path);
    // Blocking work still running (a device being mapped) gets the rest of
    // the drain time, not more.
    runtime.shutdown_timeout(Duration::from_millis(300));

    // Release the devices, then stop the reactors.
    for info in engine.registry().list() {
        if let Err(e) = engine.registry().destroy(&info.name) {
            tracing::warn!("at shutdown: {e}");
        }
    }
    match Arc::try_unwrap(engine) {
        Ok(engine) => engine.stop(),
        Err(_) => tracing::warn!("engine still referenced at shutdown; reactors stop at exit"),
    }
    if clean {
        tracing::info!("io-engine stopped");
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(1))
    }
}

/// Serves gRPC, metrics, NBD and NVMe/TCP until SIGTERM or SIGINT, then
/// drains: stops accepting, ends perf runs early, lets requests in
/// progress finish. Returns whether the drain finished in time.
async fn serve(
    engine: Arc<Engine>,
    (grpc, grpc_limits, grpc_tls): (TcpListener, Limits, Option<GrpcTls>),
    metrics: TcpListener,
    (nbd_listeners, nvmf_listeners): (Vec<Listener>, Vec<TcpListener>),
    mut signals: Signals,
) -> bool {
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    // Handed over before the API serves: the engine knows the addresses
    // share URIs name (the first TCP listener of each protocol) by then.
    let export_loops: Vec<_> = nbd_listeners
        .into_iter()
        .map(|l| tokio::spawn(engine.serve_nbd(l, stopped())))
        .chain(
            nvmf_listeners
                .into_iter()
                .map(|l| tokio::spawn(engine.serve_nvmf(l, stopped()))),
        )
        .collect();
    let grpc_task = tokio::spawn(io_engine::control::serve(
        grpc,
        engine.clone(),
        grpc_limits,
        grpc_tls,
        stopped(),
    ));
    let metrics_task = tokio::spawn(io_engine::metrics::serve(
        metrics,
        engine.clone(),
        stopped(),
    ));

    let signal = signals.wait().await;
    tracing::info!("{signal}: shutting down");
    io_engine::perf::cancel_all();
    let _ = stop_tx.send(true);
    // Unshared exports close their connections once their IO is done.
    engine.unshare_all();
    for t in export_loops {
        let _ = t.await;
    }
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        // Each NBD connection answers the requests it has read, then closes
        // and releases its device; the devices are destroyed after this.
        while engine.connections() > 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if let Ok(Err(e)) = grpc_task.await {
            tracing::error!("{e}");
        }
        if let Ok(Err(e)) = metrics_task.await {
            tracing::error!("metrics endpoint: {e}");
        }
    })
    .await;
    if drained.is_err() {
        tracing::error!("requests still running after {DRAIN_TIMEOUT:?}; stopping anyway");
    }
    drained.is_ok()
}

/// SIGTERM and SIGINT, caught from the moment this is made.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers; call inside the runtime, before saying the
    /// daemon serves (a signal before then would kill it outright).
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn wait(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
