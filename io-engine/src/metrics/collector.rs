//! The collector behind the Prometheus endpoint: what each metric is, and
//! the `prometheus` [`Collector`] that turns the engine's [`Snapshot`],
//! taken at scrape time, into metric families.
//!
//! Thread: whichever thread scrapes — a blocking-pool thread of the daemon's
//! runtime for `GET /metrics`, the caller for [`super::render`]; never a
//! reactor (`Engine::snapshot` only reads).
//!
//! The data path keeps no Prometheus objects: nothing here runs per IO.
//! A snapshot part that could not be read is left out of that scrape; a
//! reading that cannot be right (a torn in-flight or in-use count) is left
//! out or clamped, never reported as garbage.

use std::collections::HashMap;
use std::sync::Weak;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus::{Registry, TextEncoder};

use super::process::ProcessMetrics;
use crate::bdev::{IoType, LATENCY_BUCKETS, OpStats, latency_bucket_bounds_ns};
use crate::engine::{Engine, Snapshot, guarded};

/// The Prometheus type of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Only goes up (or resets to 0).
    Counter,
    /// Any value at the moment of the scrape.
    Gauge,
    /// Cumulative buckets, `_sum` and `_count`.
    Histogram,
}

impl Kind {
    fn proto(self) -> MetricType {
        match self {
            Kind::Counter => MetricType::COUNTER,
            Kind::Gauge => MetricType::GAUGE,
            Kind::Histogram => MetricType::HISTOGRAM,
        }
    }

    /// The name in a `# TYPE` line.
    #[cfg(test)]
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One metric family: name, help text, type and label names.
#[derive(Debug)]
pub(super) struct Def {
    /// Full name (counters end in `_total`).
    pub(super) name: &'static str,
    /// The `# HELP` text.
    pub(super) help: &'static str,
    /// Its type.
    pub(super) kind: Kind,
    /// Label names, in the order values are given.
    pub(super) labels: &'static [&'static str],
}

macro_rules! defs {
    ($($id:ident: $kind:ident $name:literal [$($label:literal),*] $help:literal;)*) => {
        $(
            pub(super) static $id: Def = Def {
                name: $name,
                help: $help,
                kind: Kind::$kind,
                labels: &[$($label),*],
            };
        )*
        /// Every metric the endpoint serves.
        pub(super) static DEFS: &[&Def] = &[$(&$id),*];
    };
}

defs! {
    BDEV_OPS: Counter "io_engine_bdev_ops_total" ["bdev", "op"]
        "IOs completed successfully, per device and operation.";
    BDEV_BYTES: Counter "io_engine_bdev_bytes_total" ["bdev", "op"]
        "Bytes moved by successfully completed IOs, per device and operation.";
    BDEV_ERRORS: Counter "io_engine_bdev_errors_total" ["bdev", "op"]
        "IOs completed with an error, per device and operation.";
    BDEV_LATENCY: Histogram "io_engine_bdev_io_latency_seconds" ["bdev", "op"]
        "Latency of successfully completed IOs, from submission to completion, per device and operation (read and write always, others once done).";
    BDEV_IN_FLIGHT: Gauge "io_engine_bdev_in_flight" ["bdev"]
        "IOs handed to the device and not yet completed.";
    BDEV_SIZE: Gauge "io_engine_bdev_size_bytes" ["bdev", "product"]
        "Size of the device in bytes.";
    BDEV_OPEN: Gauge "io_engine_bdev_open_descriptors" ["bdev"]
        "Open descriptors of the device (IO users, shares, benchmarks).";
    REACTOR_INFO: Gauge "io_engine_reactor_info" ["core", "cpu", "poll_mode"]
        "Always 1, one per reactor: the labels give the CPU it is pinned to and its poll mode.";
    REACTOR_BUSY: Counter "io_engine_reactor_busy_seconds_total" ["core"]
        "Time the reactor spent in poll rounds that found work.";
    REACTOR_IDLE: Counter "io_engine_reactor_idle_seconds_total" ["core"]
        "Time the reactor spent in poll rounds that found no work, sleeps included.";
    REACTOR_ITERATIONS: Counter "io_engine_reactor_iterations_total" ["core"]
        "Rounds of the reactor's poll loop.";
    REACTOR_MESSAGES: Counter "io_engine_reactor_messages_total" ["core"]
        "Cross-core messages the reactor handled.";
    POOL_GETS: Counter "io_engine_pool_gets_total" ["pool", "core"]
        "Objects taken from the pool, per core (core=\"none\": threads without a core).";
    POOL_PUTS: Counter "io_engine_pool_puts_total" ["pool", "core"]
        "Objects returned to the pool, per core (core=\"none\": threads without a core).";
    POOL_CACHE_HITS: Counter "io_engine_pool_cache_hits_total" ["pool", "core"]
        "Gets served by the core's own cache, per core.";
    POOL_CACHE_MISSES: Counter "io_engine_pool_cache_misses_total" ["pool", "core"]
        "Gets that had to go to the pool's global store, per core.";
    POOL_EXHAUSTED: Counter "io_engine_pool_exhausted_total" ["pool"]
        "Gets that found the pool empty (the request waited for an object), summed over cores.";
    POOL_AVAILABLE: Gauge "io_engine_pool_available" ["pool"]
        "Objects in the pool's global store or in a core's cache.";
    POOL_CAPACITY: Gauge "io_engine_pool_capacity" ["pool"]
        "Objects in the pool.";
    POOL_IN_USE: Gauge "io_engine_pool_in_use" ["pool"]
        "Objects handed out now.";
    POOL_CACHE_SIZE: Gauge "io_engine_pool_cache_size" ["pool"]
        "Objects each core may keep in its cache (0: no cache).";
    NBD_CONNECTIONS: Gauge "io_engine_nbd_connections" ["export"]
        "NBD connections attached to the export now.";
    NBD_REQUESTS: Counter "io_engine_nbd_requests_total" ["export", "cmd"]
        "NBD requests received, per export and command.";
    NBD_DURATION: Histogram "io_engine_nbd_request_duration_seconds" ["export", "cmd"]
        "Time NBD clients waited, from the request read to its reply written to the socket (held replies included), per export and command (read and write always, others once received).";
    NBD_ERRORS: Counter "io_engine_nbd_errors_total" ["export", "errno"]
        "NBD requests answered with an error, per export and errno name (\"other\": a protocol error that closed the connection).";
    NBD_HANDSHAKES: Gauge "io_engine_nbd_handshakes" []
        "NBD connections in the handshake now: accepted, not in transmission yet (--nbd-max-handshakes bounds them).";
    NBD_SESSIONS: Gauge "io_engine_nbd_sessions" []
        "NBD connections established now: in transmission, or closing after it (--nbd-max-connections bounds them).";
    NBD_REFUSED: Counter "io_engine_nbd_refused_total" ["reason"]
        "NBD clients refused or cut short before transmission: reason=\"connections\" (GO refused at --nbd-max-connections sessions), \"handshakes\" (closed in the handshake to make room at --nbd-max-handshakes), \"handshake_timeout\" (not in transmission within --nbd-handshake-timeout).";
    NVMF_CONNECTIONS: Gauge "io_engine_nvmf_connections" []
        "NVMe/TCP connections open (admin and I/O queues, and ones not connected yet).";
    NVMF_QUEUE_PAIRS: Gauge "io_engine_nvmf_queue_pairs" ["export"]
        "NVMe/TCP I/O queues attached to the export now.";
    NVMF_CONTROLLERS: Gauge "io_engine_nvmf_controllers" ["export"]
        "NVMe-oF controllers of the export's subsystem now.";
    NVMF_COMMANDS: Counter "io_engine_nvmf_commands_total" ["queue", "opcode"]
        "NVMe/TCP commands received, per queue type (admin, io) and opcode (\"other\": opcodes without a name here).";
    NVMF_ERRORS: Counter "io_engine_nvmf_errors_total" ["status"]
        "NVMe/TCP commands answered with an error, per status (\"other\": statuses without a name here).";
    NVMF_BYTES: Counter "io_engine_nvmf_bytes_total" ["direction"]
        "Payload bytes of NVMe/TCP reads (direction=\"read\": to hosts) and writes (\"write\": from hosts).";
    NVMF_PDU_ERRORS: Counter "io_engine_nvmf_pdu_errors_total" []
        "NVMe/TCP connections ended by a malformed PDU (a C2HTermReq).";
    NVMF_REFUSED: Counter "io_engine_nvmf_refused_total" ["reason"]
        "NVMe/TCP connections refused at accept by their listener's limit, reason=\"connections\" (--nvmf-max-connections), or closed to make room for a newcomer, reason=\"connecting\" (--nvmf-max-connecting: the oldest silent one first).";
    ACCEL_OPS: Counter "io_engine_accel_ops_total" ["opcode", "module"]
        "Accel tasks executed (successes and miscompares), per opcode and module.";
    ACCEL_BYTES: Counter "io_engine_accel_bytes_total" ["opcode", "module"]
        "Bytes of successful accel tasks, per opcode and module.";
    ACCEL_FAILURES: Counter "io_engine_accel_failures_total" ["opcode", "module"]
        "Accel tasks the module failed, per opcode and module.";
    ACCEL_MISCOMPARES: Counter "io_engine_accel_miscompares_total" ["opcode", "module"]
        "Accel compares that found a difference, per opcode and module.";
    ACCEL_BATCHES: Counter "io_engine_accel_batches_total" ["module"]
        "Submissions to the module: one per batch or single task.";
    ACCEL_ENGINE_EVENTS: Counter "io_engine_accel_engine_events_total" ["module", "event"]
        "The engine's own counters, per module (I/OAT: descriptors, doorbell_writes, halts, timeouts, resubmitted, bad_completions, ring_full).";
    BUILD_INFO: Gauge "io_engine_build_info" ["version", "revision"]
        "Always 1: the labels give the version and git revision of this build.";
    UPTIME: Gauge "io_engine_uptime_seconds" []
        "Time since the engine started.";
    CPU_QUOTA: Gauge "io_engine_cpu_quota_cores" []
        "The cgroup CPU quota the engine runs under, in CPUs (absent without one).";
    MEMORY_LIMIT: Gauge "io_engine_memory_limit_bytes" []
        "The cgroup memory limit the engine runs under (absent when unlimited).";
}

/// The `core` label of a pool counter: the reactor index holding the slot,
/// `slotN` for a slot held by another thread, `none` without one.
fn core_label(s: &Snapshot, slot: Option<u32>) -> String {
    match slot {
        None => "none".into(),
        Some(slot) => match s.core_of_slot(slot) {
            Some(core) => core.to_string(),
            None => format!("slot{slot}"),
        },
    }
}

/// The families being built, one per [`DEFS`] entry, in that order.
struct Families {
    families: Vec<MetricFamily>,
}

/// The value of one series.
enum Value {
    Counter(f64),
    Gauge(f64),
    Histogram(proto::Histogram),
}

impl Families {
    fn new() -> Self {
        let families = DEFS
            .iter()
            .map(|d| {
                let mut f = MetricFamily::default();
                f.set_name(d.name.to_string());
                f.set_help(d.help.to_string());
                f.set_field_type(d.kind.proto());
                f
            })
            .collect();
        Families { families }
    }

    /// Adds the series `def{labels...} = value`. A mismatch between `def`
    /// and the value or label count is a bug here: logged and skipped.
    fn add(&mut self, def: &Def, labels: &[&str], value: Value) {
        let kind_ok = matches!(
            (def.kind, &value),
            (Kind::Counter, Value::Counter(_))
                | (Kind::Gauge, Value::Gauge(_))
                | (Kind::Histogram, Value::Histogram(_))
        );
        let Some(family) = DEFS
            .iter()
            .position(|d| d.name == def.name)
            .and_then(|i| self.families.get_mut(i))
        else {
            tracing::error!(metric = def.name, "metrics: unknown metric; skipped");
            return;
        };
        if !kind_ok || labels.len() != def.labels.len() {
            tracing::error!(metric = def.name, "metrics: wrong value or labels; skipped");
            return;
        }
        let pairs = def
            .labels
            .iter()
            .zip(labels)
            .map(|(name, value)| {
                let mut p = proto::LabelPair::default();
                p.set_name(name.to_string());
                p.set_value(value.to_string());
                p
            })
            .collect();
        let mut m = proto::Metric::default();
        m.set_label(pairs);
        match value {
            Value::Counter(v) => {
                let mut c = proto::Counter::default();
                c.set_value(v);
                m.set_counter(c);
            }
            Value::Gauge(v) => {
                let mut g = proto::Gauge::default();
                g.set_value(v);
                m.set_gauge(g);
            }
            Value::Histogram(h) => m.set_histogram(h),
        }
        family.mut_metric().push(m);
    }

    fn counter(&mut self, def: &Def, labels: &[&str], v: u64) {
        self.add(def, labels, Value::Counter(v as f64));
    }

    fn gauge(&mut self, def: &Def, labels: &[&str], v: f64) {
        self.add(def, labels, Value::Gauge(v));
    }

    /// The families that got a series (the text format has no empty ones).
    fn finish(self) -> Vec<MetricFamily> {
        self.families
            .into_iter()
            .filter(|f| !f.get_metric().is_empty())
            .collect()
    }
}

const NS_PER_S: f64 = 1e9;

/// The engine's latency buckets the histograms of reads, writes and flushes
/// export (indices into [`latency_bucket_bounds_ns`], whose bound `i` is
/// 2^(8+i) ns): every power of two from 2^12 ns (4.1 µs) to 2^20 ns
/// (1.05 ms), 2x apart, where this engine's latencies fall (a busy-polled
/// NBD read of a memory device over loopback takes 7-16 µs in the engine,
/// a file on an SSD tens to hundreds), then 2^23 ns (8.4 ms) for stalls;
/// `+Inf` above. 2x apart, `histogram_quantile` (linear within a bucket) is
/// off the true quantile by less than the bucket's width.
///
/// Ten, the most the cardinality budget allows: a device's counters (3 for
/// each of the 6 operations, present from the start) and gauges (3) are 21
/// series, and a device that reads, writes and flushes may cost 60, so each
/// of its three histograms has 13 series: 10 bounds, `+Inf`, `_sum`,
/// `_count`.
pub(super) const FINE_BUCKETS: [usize; 10] = [4, 5, 6, 7, 8, 9, 10, 11, 12, 15];

/// The buckets the histograms of every other operation (NBD: command)
/// export, a subset of [`FINE_BUCKETS`] so that every `le` of a family is
/// one of those: every other one, 4x apart from 4.1 µs to 1.05 ms, and the
/// stall bound. 6 bounds, 9 series, within the 10 each such operation may
/// add.
pub(super) const COARSE_BUCKETS: [usize; 6] = [4, 6, 8, 10, 12, 15];

/// The buckets exported for the operation (NBD: command) named `name`:
/// [`FINE_BUCKETS`] for reads, writes and flushes, [`COARSE_BUCKETS`]
/// for the others.
pub(super) fn exported_buckets(name: &str) -> &'static [usize] {
    match name {
        "read" | "write" | "flush" => &FINE_BUCKETS,
        _ => &COARSE_BUCKETS,
    }
}

/// The bounds of `buckets` (engine bucket indices), in seconds.
pub(super) fn bounds_s(buckets: &[usize]) -> Vec<f64> {
    let ns = latency_bucket_bounds_ns();
    buckets
        .iter()
        .filter_map(|&i| ns.get(i))
        .map(|&b| b as f64 / NS_PER_S)
        .collect()
}

/// A latency histogram from the engine's non-cumulative buckets: cumulative
/// counts at each of `buckets` (indices into [`latency_bucket_bounds_ns`],
/// ascending); `+Inf` is the count.
///
/// `_count` is the op count. The counters are read one by one while IOs
/// complete, so a scrape may see an IO in a bucket before it shows in `ops`;
/// `_count` is then the bucket total instead, so that `+Inf` = `_count` and
/// every bucket is at most `_count` (both are monotonic, and so is their
/// maximum). At rest the two are equal.
pub(super) fn histogram(op: &OpStats, buckets: &[usize]) -> proto::Histogram {
    let mut cumulative = [0u64; LATENCY_BUCKETS];
    let mut running = 0u64;
    for (c, &n) in cumulative.iter_mut().zip(&op.latency_buckets) {
        running = running.saturating_add(n);
        *c = running;
    }
    let buckets: Vec<proto::Bucket> = buckets
        .iter()
        .zip(bounds_s(buckets))
        .filter_map(|(&i, le)| {
            let mut b = proto::Bucket::default();
            b.set_upper_bound(le);
            b.set_cumulative_count(*cumulative.get(i)?);
            Some(b)
        })
        .collect();
    let total = running.saturating_add(op.latency_buckets[LATENCY_BUCKETS]);
    let count = op.ops.max(total);
    // No explicit +Inf bucket: the encoder writes `le="+Inf"` from the count
    // (an infinite bound of ours would print as `le="inf"`).
    let mut h = proto::Histogram::default();
    h.set_bucket(buckets);
    h.set_sample_count(count);
    h.set_sample_sum(op.latency_total_ns as f64 / NS_PER_S);
    h
}

/// Whether the histogram of an operation (NBD: command) named `name`
/// is exported: reads and writes always, from 0, so that `rate()` sees
/// their first IOs; the others once done (their first scrape interval's
/// IOs are then missing from `rate()`, as for any series born non-zero).
/// An operation never done shows no latency; its counters still say 0.
fn exported(name: &str, op: &OpStats) -> bool {
    matches!(name, "read" | "write") || op.ops > 0 || op.latency_buckets.iter().any(|&n| n > 0)
}

/// Above this, a count of things in flight or in use is a torn reading
/// (submitted and completed, or gets and puts, read at different moments
/// and subtracted with wrap-around), not a count.
const TORN: u64 = 1 << 63;

/// Builds every family from a snapshot.
pub(super) fn families(s: &Snapshot) -> Vec<MetricFamily> {
    let mut f = Families::new();

    for d in s.devices.iter().flatten() {
        let name = d.info.name.as_str();
        for op in IoType::ALL {
            let o = d.stats.op(op);
            let labels = [name, op.as_str()];
            f.counter(&BDEV_OPS, &labels, o.ops);
            f.counter(&BDEV_BYTES, &labels, o.bytes);
            f.counter(&BDEV_ERRORS, &labels, o.errors);
            if exported(op.as_str(), o) {
                f.add(
                    &BDEV_LATENCY,
                    &labels,
                    Value::Histogram(histogram(o, exported_buckets(op.as_str()))),
                );
            }
        }
        // A torn reading means completions caught up with submissions
        // during the read: next to nothing is in flight.
        let in_flight = if d.stats.in_flight >= TORN {
            0
        } else {
            d.stats.in_flight
        };
        f.gauge(&BDEV_IN_FLIGHT, &[name], in_flight as f64);
        f.gauge(
            &BDEV_SIZE,
            &[name, d.info.product.as_str()],
            d.info.size_bytes as f64,
        );
        f.gauge(&BDEV_OPEN, &[name], d.info.open as f64);
    }

    for r in s.reactors.iter().flatten() {
        let core = r.index.to_string();
        let core = [core.as_str()];
        f.gauge(
            &REACTOR_INFO,
            &[core[0], r.cpu.to_string().as_str(), r.poll_mode],
            1.0,
        );
        f.add(
            &REACTOR_BUSY,
            &core,
            Value::Counter(r.busy_ns as f64 / NS_PER_S),
        );
        f.add(
            &REACTOR_IDLE,
            &core,
            Value::Counter(r.idle_ns as f64 / NS_PER_S),
        );
        f.counter(&REACTOR_ITERATIONS, &core, r.iterations);
        f.counter(&REACTOR_MESSAGES, &core, r.messages);
    }

    for p in s.pools.iter().flatten() {
        let pool = p.name.as_str();
        let mut exhausted = 0u64;
        let mut cores = Vec::with_capacity(p.per_core.len());
        for c in &p.per_core {
            let core = core_label(s, c.slot);
            let labels = [pool, core.as_str()];
            f.counter(&POOL_GETS, &labels, c.gets);
            f.counter(&POOL_PUTS, &labels, c.puts);
            f.counter(&POOL_CACHE_HITS, &labels, c.cache_hits);
            f.counter(&POOL_CACHE_MISSES, &labels, c.cache_misses);
            exhausted = exhausted.saturating_add(c.exhausted);
            cores.push(core);
        }
        // The engine lists only the cores that used the pool: every other
        // reactor's series start at 0, so that they exist from the start.
        for r in s.reactors.iter().flatten() {
            let core = r.index.to_string();
            if !cores.contains(&core) {
                let labels = [pool, core.as_str()];
                for def in [&POOL_GETS, &POOL_PUTS, &POOL_CACHE_HITS, &POOL_CACHE_MISSES] {
                    f.counter(def, &labels, 0);
                }
            }
        }
        f.counter(&POOL_EXHAUSTED, &[pool], exhausted);
        f.gauge(&POOL_CAPACITY, &[pool], p.capacity as f64);
        f.gauge(&POOL_CACHE_SIZE, &[pool], p.cache_size as f64);
        // More in use than exist: gets and puts of different cores were read
        // at different moments. Leave both gauges out of this scrape.
        if p.in_use <= p.capacity {
            f.gauge(&POOL_IN_USE, &[pool], p.in_use as f64);
            f.gauge(&POOL_AVAILABLE, &[pool], p.available as f64);
        }
    }

    for e in s.exports.iter().flatten() {
        let export = e.export.as_str();
        f.gauge(&NBD_CONNECTIONS, &[export], e.connections as f64);
        for (cmd, n) in &e.requests {
            f.counter(&NBD_REQUESTS, &[export, cmd.as_str()], *n);
        }
        for (errno, n) in &e.errors {
            f.counter(&NBD_ERRORS, &[export, errno.as_str()], *n);
        }
        for (cmd, d) in e.durations.iter().filter(|(c, d)| exported(c, d)) {
            f.add(
                &NBD_DURATION,
                &[export, cmd.as_str()],
                Value::Histogram(histogram(d, exported_buckets(cmd))),
            );
        }
    }

    if let Some(n) = &s.nbd {
        f.gauge(&NBD_HANDSHAKES, &[], n.handshakes as f64);
        f.gauge(&NBD_SESSIONS, &[], n.sessions as f64);
        for (reason, count) in &n.refused {
            f.counter(&NBD_REFUSED, &[reason], *count);
        }
    }

    if let Some(n) = &s.nvmf {
        f.gauge(&NVMF_CONNECTIONS, &[], n.connections as f64);
        for (export, queues, controllers) in &n.exports {
            f.gauge(&NVMF_QUEUE_PAIRS, &[export], *queues as f64);
            f.gauge(&NVMF_CONTROLLERS, &[export], *controllers as f64);
        }
        for (queue, op, count) in &n.stats.commands {
            f.counter(&NVMF_COMMANDS, &[queue, op], *count);
        }
        for (status, count) in &n.stats.errors {
            f.counter(&NVMF_ERRORS, &[status], *count);
        }
        f.counter(&NVMF_BYTES, &["read"], n.stats.bytes_read);
        f.counter(&NVMF_BYTES, &["write"], n.stats.bytes_written);
        f.counter(&NVMF_PDU_ERRORS, &[], n.stats.pdu_errors);
        for (reason, count) in &n.stats.refused {
            f.counter(&NVMF_REFUSED, &[reason], *count);
        }
    }

    if let Some((ops, modules)) = &s.accel {
        for o in ops {
            let labels = [o.opcode.name(), o.module];
            f.counter(&ACCEL_OPS, &labels, o.executed);
            f.counter(&ACCEL_BYTES, &labels, o.bytes);
            f.counter(&ACCEL_FAILURES, &labels, o.failed);
            f.counter(&ACCEL_MISCOMPARES, &labels, o.miscompares);
        }
        for m in modules {
            f.counter(&ACCEL_BATCHES, &[m.module], m.batches);
        }
    }
    for &(module, event, n) in s.accel_engine.iter().flatten() {
        f.counter(&ACCEL_ENGINE_EVENTS, &[module, event], n);
    }

    f.gauge(&BUILD_INFO, &[s.build.version, s.build.revision], 1.0);
    if let Some(up) = s.uptime {
        f.gauge(&UPTIME, &[], up.as_secs_f64());
    }
    if let Some(cpus) = s.cpu_quota {
        f.gauge(&CPU_QUOTA, &[], cpus);
    }
    if let Some(bytes) = s.memory_limit {
        f.gauge(&MEMORY_LIMIT, &[], bytes as f64);
    }
    f.finish()
}

/// Where a collector gets its snapshot.
enum Source {
    /// A running engine, read at each collection. Weak: the exporter never
    /// keeps the engine alive (the daemon stops it by unwrapping its `Arc`).
    Live(Weak<Engine>),
    /// A snapshot already taken.
    Fixed(Box<Snapshot>),
}

/// The `prometheus` collector of the engine's metrics: [`Collector::collect`]
/// builds every family from a snapshot taken then.
pub(super) struct EngineCollector {
    source: Source,
    descs: Vec<Desc>,
}

impl EngineCollector {
    /// Reads `engine` at every collection, while it lives.
    pub(super) fn live(engine: Weak<Engine>) -> Self {
        Self::with(Source::Live(engine))
    }

    /// Reports `snapshot`.
    pub(super) fn fixed(snapshot: Snapshot) -> Self {
        Self::with(Source::Fixed(Box::new(snapshot)))
    }

    fn with(source: Source) -> Self {
        EngineCollector {
            source,
            descs: descs(),
        }
    }
}

/// The descriptors of [`DEFS`]; one that does not build is logged and left
/// out (a test proves they all build).
pub(super) fn descs() -> Vec<Desc> {
    DEFS.iter()
        .filter_map(|d| {
            Desc::new(
                d.name.to_string(),
                d.help.to_string(),
                d.labels.iter().map(|l| l.to_string()).collect(),
                HashMap::new(),
            )
            .inspect_err(|e| tracing::error!(metric = d.name, "metrics: bad descriptor: {e}"))
            .ok()
        })
        .collect()
}

impl Collector for EngineCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let built = guarded("metric families", || match &self.source {
            Source::Live(engine) => match engine.upgrade() {
                Some(engine) => families(&engine.snapshot()),
                None => families(&Snapshot::without_engine()),
            },
            Source::Fixed(snapshot) => families(snapshot),
        });
        built.unwrap_or_default()
    }
}

/// A registry holding one [`EngineCollector`], and its text encoding.
pub(super) struct Exporter {
    registry: Registry,
}

impl Exporter {
    /// A registry with `collector` registered.
    pub(super) fn new(collector: EngineCollector) -> Self {
        let registry = Registry::new();
        if let Err(e) = registry.register(Box::new(collector)) {
            tracing::error!("metrics: cannot register the engine collector: {e}");
        }
        Exporter { registry }
    }

    /// Adds the `process_*` metrics of this process (CPU seconds, resident
    /// and virtual memory, open and maximum fds, threads, start time: the
    /// `prometheus` crate's process collector, read from `/proc/self`, with
    /// the CPU seconds read at clock-tick precision by [`ProcessMetrics`]).
    pub(super) fn with_process(self) -> Self {
        if let Err(e) = self.registry.register(Box::new(ProcessMetrics::for_self())) {
            tracing::error!("metrics: cannot register the process collector: {e}");
        }
        self
    }

    /// One scrape: gathers and encodes in the text format 0.0.4.
    pub(super) fn render(&self) -> String {
        encode(&self.registry.gather())
    }
}

/// Encodes `families` as text; a family the encoder refuses is logged and
/// left out.
pub(super) fn encode(families: &[MetricFamily]) -> String {
    let encoder = TextEncoder::new();
    let mut out = String::new();
    for f in families {
        match encoder.encode_to_string(std::slice::from_ref(f)) {
            Ok(text) => out.push_str(&text),
            Err(e) => tracing::error!(metric = f.name(), "metrics: cannot encode: {e}"),
        }
    }
    out
}

/// One scrape of `engine`, in the text format: what `GET /metrics` answers
/// but for the `process_*` metrics.
pub fn render(engine: &Engine) -> String {
    Exporter::new(EngineCollector::fixed(engine.snapshot())).render()
}
