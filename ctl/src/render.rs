//! The table output of each command: which columns, in which order, with
//! which units.
//!
//! Thread: the CLI's main thread (pure functions).

use io_engine_api::v1::{
    Bdev, EngineInfo, Export, GetAccelStatsResponse, GetAssignmentsResponse, GetIoStatsResponse,
    GetPoolStatsResponse, GetReactorStatsResponse, ListModulesResponse, OpStats, PerfJob,
    RunPerfResponse,
};

use crate::format::{
    Align::{Left, Right},
    Table, count_limit, dash_unless, human_duration, human_latency, human_size, key_values, micros,
    percent, size_limit, yes_no,
};
use crate::rate::IntervalRates;

/// One device, as a key/value list (`bdev create`, `bdev get`).
pub(crate) fn bdev(b: &Bdev) -> String {
    key_values(&[
        ("name", b.name.clone()),
        ("uuid", b.uuid.clone()),
        ("uri", b.uri.clone()),
        ("product", b.product.clone()),
        (
            "backing",
            if b.backing_path.is_empty() {
                "-".to_string()
            } else {
                format!("{} ({})", b.backing_path, b.backing_kind.replace('_', " "))
            },
        ),
        ("write cache", yes_no(b.volatile_write_cache)),
        (
            "size",
            format!("{} ({} bytes)", human_size(b.size_bytes), b.size_bytes),
        ),
        ("block size", b.block_size.to_string()),
        ("blocks", b.num_blocks.to_string()),
        ("claimed", yes_no(b.claimed)),
        ("open count", b.open_count.to_string()),
        ("shared", yes_no(b.shared)),
        ("share uri", dash_if_empty(&b.share_uri)),
    ])
}

/// Every device, one row each (`bdev list`).
pub(crate) fn bdev_list(bdevs: &[Bdev], headers: bool) -> String {
    let mut t = Table::new(&[
        ("NAME", Left),
        ("PRODUCT", Left),
        ("SIZE", Right),
        ("BLOCK SIZE", Right),
        ("BLOCKS", Right),
        ("CLAIMED", Left),
        ("OPEN", Right),
        ("SHARED", Left),
        ("UUID", Left),
        ("BACKING", Left),
    ]);
    for b in bdevs {
        t.row(vec![
            b.name.clone(),
            b.product.clone(),
            human_size(b.size_bytes),
            b.block_size.to_string(),
            b.num_blocks.to_string(),
            yes_no(b.claimed),
            b.open_count.to_string(),
            yes_no(b.shared),
            b.uuid.clone(),
            dash_if_empty(&b.backing_path),
        ]);
    }
    t.render(headers)
}

/// Accel modules (`accel modules`).
pub(crate) fn accel_modules(r: &ListModulesResponse, headers: bool) -> String {
    let mut t = Table::new(&[
        ("MODULE", Left),
        ("OPCODES", Left),
        ("MAX BATCH", Right),
        ("MAX TRANSFER", Right),
        ("IMPLEMENTATION", Left),
    ]);
    for m in &r.modules {
        t.row(vec![
            m.name.clone(),
            m.opcodes.join(","),
            count_limit(m.max_batch),
            size_limit(m.max_transfer),
            m.implementation.clone(),
        ]);
    }
    t.render(headers)
}

/// Opcode assignments (`accel assignments`), then any fallbacks.
pub(crate) fn accel_assignments(r: &GetAssignmentsResponse, headers: bool) -> String {
    let mut t = Table::new(&[("OPCODE", Left), ("MODULE", Left)]);
    for a in &r.assignments {
        t.row(vec![a.opcode.clone(), a.module.clone()]);
    }
    let mut out = t.render(headers);
    for f in &r.fallbacks {
        out.push_str(&format!("fallback: {f}\n"));
    }
    out
}

/// Accel counters (`accel stats`): pairs that ran, then submissions per
/// module.
pub(crate) fn accel_stats(r: &GetAccelStatsResponse, headers: bool) -> String {
    let mut t = Table::new(&[
        ("OPCODE", Left),
        ("MODULE", Left),
        ("EXECUTED", Right),
        ("FAILED", Right),
        ("MISCOMPARES", Right),
        ("BYTES", Right),
    ]);
    for o in r.ops.iter().filter(|o| o.executed + o.failed > 0) {
        t.row(vec![
            o.opcode.clone(),
            o.module.clone(),
            o.executed.to_string(),
            o.failed.to_string(),
            o.miscompares.to_string(),
            human_size(o.bytes),
        ]);
    }
    let mut m = Table::new(&[("MODULE", Left), ("BATCHES", Right)]);
    for s in &r.modules {
        m.row(vec![s.module.clone(), s.batches.to_string()]);
    }
    format!("{}\n{}", t.render(headers), m.render(headers))
}

/// Shared devices (`export list`).
pub(crate) fn export_list(exports: &[Export], headers: bool) -> String {
    let mut t = Table::new(&[
        ("DEVICE", Left),
        ("PROTOCOL", Left),
        ("READ ONLY", Left),
        ("CONNECTIONS", Right),
        ("URI", Left),
    ]);
    for e in exports {
        t.row(vec![
            e.bdev.clone(),
            e.protocol.clone(),
            yes_no(e.read_only),
            e.connections.to_string(),
            e.uri.clone(),
        ]);
    }
    let mut out = t.render(headers);
    // NVMe-oF: who may connect, and the controllers connected.
    for e in exports {
        if !e.allowed_hosts.is_empty() {
            out.push_str(&format!(
                "{}: allowed hosts {}\n",
                e.bdev,
                e.allowed_hosts.join(", ")
            ));
        }
        if !e.dhchap_hosts.is_empty() {
            out.push_str(&format!(
                "{}: hosts that authenticate (DH-HMAC-CHAP) {}\n",
                e.bdev,
                e.dhchap_hosts.join(", ")
            ));
        }
        for c in &e.controllers {
            out.push_str(&format!(
                "{}: controller {} host {} ({} I/O queues)\n",
                e.bdev, c.cntlid, c.host_nqn, c.io_queues
            ));
        }
    }
    out
}

/// Cumulative IO counters: a row per device and operation type; the IOs in
/// flight are the device's, on its first row (`stats io`).
pub(crate) fn io_stats(r: &GetIoStatsResponse, headers: bool) -> String {
    let mut t = Table::new(&[
        ("DEVICE", Left),
        ("OP", Left),
        ("OPS", Right),
        ("BYTES", Right),
        ("ERRORS", Right),
        ("AVG µs", Right),
        ("MIN µs", Right),
        ("MAX µs", Right),
        ("IN FLIGHT", Right),
    ]);
    for dev in &r.stats {
        let ops = [
            ("read", &dev.read),
            ("write", &dev.write),
            ("unmap", &dev.unmap),
            ("flush", &dev.flush),
            ("write_zeroes", &dev.write_zeroes),
            ("copy", &dev.copy),
        ];
        for (i, (op, stats)) in ops.into_iter().enumerate() {
            let s: OpStats = stats.unwrap_or_default();
            let latency = |ns: u64| dash_unless(s.ops > 0, || micros(ns));
            t.row(vec![
                dev.name.clone(),
                op.to_owned(),
                s.ops.to_string(),
                human_size(s.bytes),
                s.errors.to_string(),
                latency(s.latency_total_ns.checked_div(s.ops).unwrap_or(0)),
                latency(s.latency_min_ns),
                latency(s.latency_max_ns),
                if i == 0 {
                    dev.in_flight.to_string()
                } else {
                    String::new()
                },
            ]);
        }
    }
    t.render(headers)
}

/// One interval of `stats io --watch`: a line with the engine's uptime and
/// the interval, then a row of rates per device.
pub(crate) fn io_rates(r: &IntervalRates, headers: bool) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    let mut t = Table::new(&[
        ("DEVICE", Left),
        ("READ IOPS", Right),
        ("WRITE IOPS", Right),
        ("TOTAL IOPS", Right),
        ("READ MiB/s", Right),
        ("WRITE MiB/s", Right),
        ("TOTAL MiB/s", Right),
    ]);
    for d in &r.stats {
        t.row(vec![
            d.name.clone(),
            format!("{:.0}", d.read_iops),
            format!("{:.0}", d.write_iops),
            format!("{:.0}", d.total_iops),
            format!("{:.2}", d.read_bytes_per_sec / MIB),
            format!("{:.2}", d.write_bytes_per_sec / MIB),
            format!("{:.2}", d.total_bytes_per_sec / MIB),
        ]);
    }
    if !headers {
        return t.render(false);
    }
    format!(
        "engine uptime {}, interval {:.3} s\n{}",
        human_duration(r.uptime_ns),
        r.interval_ns as f64 / 1e9,
        t.render(true)
    )
}

/// Per-reactor counters (`stats reactors`).
pub(crate) fn reactor_stats(r: &GetReactorStatsResponse, headers: bool) -> String {
    let mut t = Table::new(&[
        ("CORE", Right),
        ("CPU", Right),
        ("POLL MODE", Left),
        ("ITERATIONS", Right),
        ("BUSY", Right),
        ("IDLE", Right),
        ("BUSY %", Right),
        ("MESSAGES", Right),
    ]);
    for s in &r.reactors {
        t.row(vec![
            s.core.to_string(),
            s.cpu.to_string(),
            s.poll_mode.clone(),
            s.iterations.to_string(),
            human_duration(s.busy_ns),
            human_duration(s.idle_ns),
            percent(s.busy_ns, s.busy_ns.saturating_add(s.idle_ns)),
            s.messages.to_string(),
        ]);
    }
    t.render(headers)
}

/// Object pools: a row per pool, then a row per pool and core
/// (`stats pools`).
pub(crate) fn pool_stats(r: &GetPoolStatsResponse, headers: bool) -> String {
    let mut pools = Table::new(&[
        ("POOL", Left),
        ("CAPACITY", Right),
        ("CACHE SIZE", Right),
        ("AVAILABLE", Right),
        ("IN USE", Right),
        ("EXHAUSTED", Right),
    ]);
    let mut cores = Table::new(&[
        ("POOL", Left),
        ("CORE", Right),
        ("GETS", Right),
        ("PUTS", Right),
        ("CACHE HITS", Right),
        ("CACHE MISSES", Right),
        ("HIT %", Right),
        ("EXHAUSTED", Right),
    ]);
    for p in &r.pools {
        pools.row(vec![
            p.name.clone(),
            p.capacity.to_string(),
            p.cache_size.to_string(),
            p.available.to_string(),
            p.in_use.to_string(),
            p.exhausted.to_string(),
        ]);
        for c in &p.cores {
            cores.row(vec![
                p.name.clone(),
                c.core.map_or_else(|| "other".to_owned(), |c| c.to_string()),
                c.gets.to_string(),
                c.puts.to_string(),
                c.cache_hits.to_string(),
                c.cache_misses.to_string(),
                percent(c.cache_hits, c.cache_hits.saturating_add(c.cache_misses)),
                c.exhausted.to_string(),
            ]);
        }
    }
    format!("{}\n{}", pools.render(headers), cores.render(headers))
}

/// A perf run (`perf run`): a row per core and device, then the total.
pub(crate) fn perf(r: &RunPerfResponse, headers: bool) -> String {
    let mut t = Table::new(&[
        ("CORE", Right),
        ("DEVICE", Left),
        ("IOPS", Right),
        ("MiB/s", Right),
        ("AVG LAT", Right),
        ("MIN LAT", Right),
        ("MAX LAT", Right),
        ("FAILED", Right),
        ("MISCOMPARES", Right),
    ]);
    let row = |t: &mut Table, core: String, device: String, j: &PerfJob| {
        // A job that completed nothing has no latency to show.
        let latency = |us: f64| dash_unless(j.ios > 0, || human_latency(us));
        t.row(vec![
            core,
            device,
            format!("{:.0}", j.iops),
            format!("{:.2}", j.mib_s),
            latency(j.avg_lat_us),
            latency(j.min_lat_us),
            latency(j.max_lat_us),
            j.failed.to_string(),
            j.miscompares.to_string(),
        ]);
    };
    for j in &r.jobs {
        let core = j.core.map_or_else(|| "-".to_owned(), |c| c.to_string());
        row(&mut t, core, j.bdev.clone(), j);
    }
    let total = r.total.clone().unwrap_or_default();
    row(&mut t, "total".to_owned(), "-".to_owned(), &total);
    t.render(headers)
}

/// The engine, as a key/value list (`engine info`).
pub(crate) fn engine_info(e: &EngineInfo) -> String {
    let cores: Vec<String> = e.cores.iter().map(u32::to_string).collect();
    let hugepages = e.hugepages.as_ref().map_or_else(
        || "unknown".to_owned(),
        |h| {
            format!(
                "{} pages: {} total, {} free",
                human_size(h.page_size_bytes),
                h.total,
                h.free
            )
        },
    );
    let mut rows = vec![
        ("version", e.version.clone()),
        ("git revision", e.git_revision.clone()),
        ("cores", none_if_empty(&cores.join(", "))),
    ];
    // Why those cores (an engine older than these fields says nothing).
    if !e.core_source.is_empty() {
        let allowed: Vec<String> = e.allowed_cpus.iter().map(u32::to_string).collect();
        rows.push(("core source", e.core_source.clone()));
        rows.push(("allowed cpus", none_if_empty(&allowed.join(", "))));
        rows.push((
            "cpu quota",
            if e.cpu_quota > 0.0 {
                format!("{:.2} CPUs", e.cpu_quota)
            } else {
                "none".to_owned()
            },
        ));
    }
    rows.extend([
        ("poll mode", e.poll_mode.clone()),
        ("uptime", human_duration(e.uptime_ns)),
        ("hugepages", hugepages),
        ("accel modules", none_if_empty(&e.accel_modules.join(", "))),
    ]);
    // One row per note (what the accel modules found, software fallbacks).
    rows.extend(e.accel_notes.iter().map(|n| ("accel note", n.clone())));
    rows.push(("io pool size", e.io_pool_size.to_string()));
    rows.push(("io pool cache", e.io_pool_cache.to_string()));
    key_values(&rows)
}

fn dash_if_empty(s: &str) -> String {
    if s.is_empty() { "-" } else { s }.to_owned()
}

fn none_if_empty(s: &str) -> String {
    if s.is_empty() { "(none)" } else { s }.to_owned()
}

#[cfg(test)]
mod tests {
    use io_engine_api::v1::{
        AccelModule, AccelModuleStats, AccelOpStats, BdevIoStats, Hugepages, PoolCoreStats,
        PoolStats, ReactorStats,
    };

    use super::*;
    use crate::rate::DeviceRates;

    fn malloc(name: &str, size_mb: u64, block_size: u32) -> Bdev {
        let size_bytes = size_mb << 20;
        Bdev {
            name: name.into(),
            uuid: format!("uuid-{name}"),
            uri: format!("malloc:///{name}?size_mb={size_mb}&blk_size={block_size}"),
            product: "malloc".into(),
            block_size,
            num_blocks: size_bytes / u64::from(block_size),
            size_bytes,
            claimed: false,
            open_count: 0,
            shared: false,
            share_uri: String::new(),
            backing_path: String::new(),
            backing_kind: String::new(),
            volatile_write_cache: false,
        }
    }

    #[test]
    fn bdev_list_table() {
        let mut big = malloc("null-device-1", 1024, 4096);
        big.product = "null".into();
        big.claimed = true;
        big.open_count = 12;
        assert_eq!(
            bdev_list(&[malloc("m0", 64, 512), big], true),
            "\
NAME           PRODUCT      SIZE  BLOCK SIZE  BLOCKS  CLAIMED  OPEN  SHARED  UUID                BACKING
m0             malloc   64.0 MiB         512  131072  no          0  no      uuid-m0             -
null-device-1  null      1.0 GiB        4096  262144  yes        12  no      uuid-null-device-1  -
"
        );
    }

    #[test]
    fn bdev_detail() {
        assert_eq!(
            bdev(&malloc("m0", 64, 4096)),
            "\
name         m0
uuid         uuid-m0
uri          malloc:///m0?size_mb=64&blk_size=4096
product      malloc
backing      -
write cache  no
size         64.0 MiB (67108864 bytes)
block size   4096
blocks       16384
claimed      no
open count   0
shared       no
share uri    -
"
        );
    }

    #[test]
    fn io_stats_table() {
        let r = GetIoStatsResponse {
            stats: vec![BdevIoStats {
                name: "m0".into(),
                read: Some(OpStats {
                    ops: 1_000_000,
                    bytes: 4096 * 1_000_000,
                    errors: 0,
                    latency_total_ns: 12_345_000_000,
                    latency_min_ns: 1_500,
                    latency_max_ns: 250_126,
                }),
                write: Some(OpStats {
                    ops: 3,
                    bytes: 1536,
                    errors: 2,
                    latency_total_ns: 3_000,
                    latency_min_ns: 900,
                    latency_max_ns: 1_100,
                }),
                unmap: None,
                flush: None,
                write_zeroes: None,
                copy: None,
                in_flight: 7,
            }],
            uptime_ns: 1,
        };
        assert_eq!(
            io_stats(&r, true),
            "\
DEVICE  OP                OPS    BYTES  ERRORS  AVG µs  MIN µs  MAX µs  IN FLIGHT
m0      read          1000000  3.8 GiB       0   12.35    1.50  250.13          7
m0      write               3  1.5 KiB       2    1.00    0.90    1.10
m0      unmap               0      0 B       0       -       -       -
m0      flush               0      0 B       0       -       -       -
m0      write_zeroes        0      0 B       0       -       -       -
m0      copy                0      0 B       0       -       -       -
"
        );
    }

    #[test]
    fn io_rates_table() {
        let r = IntervalRates {
            uptime_ns: 12_500_000_000,
            interval_ns: 500_000_000,
            stats: vec![DeviceRates {
                name: "m0".into(),
                read_iops: 2000.0,
                write_iops: 0.4,
                total_iops: 2000.4,
                read_bytes_per_sec: 8_192_000.0,
                write_bytes_per_sec: 1_638.4,
                total_bytes_per_sec: 8_193_638.4,
            }],
        };
        assert_eq!(
            io_rates(&r, true),
            "\
engine uptime 12.500 s, interval 0.500 s
DEVICE  READ IOPS  WRITE IOPS  TOTAL IOPS  READ MiB/s  WRITE MiB/s  TOTAL MiB/s
m0           2000           0        2000        7.81         0.00         7.81
"
        );
    }

    #[test]
    fn accel_modules_table_prints_limits_in_units() {
        let r = ListModulesResponse {
            modules: vec![
                AccelModule {
                    name: "ioat".into(),
                    opcodes: vec!["copy".into(), "fill".into()],
                    max_batch: 128,
                    max_transfer: 2 << 20,
                    implementation: "I/OAT DMA".into(),
                },
                AccelModule {
                    name: "software".into(),
                    opcodes: vec!["copy".into()],
                    max_batch: u64::MAX,
                    max_transfer: i64::MAX as u64,
                    implementation: "avx2 kernels".into(),
                },
            ],
        };
        let expected = "\
MODULE    OPCODES    MAX BATCH  MAX TRANSFER  IMPLEMENTATION
ioat      copy,fill        128       2.0 MiB  I/OAT DMA
software  copy       unlimited     unlimited  avx2 kernels
";
        assert_eq!(accel_modules(&r, true), expected);
        assert_eq!(
            accel_modules(&r, false),
            expected.split_once('\n').unwrap().1,
            "--no-headers drops the header line only"
        );
    }

    #[test]
    fn accel_stats_tables_print_bytes_in_units() {
        let r = GetAccelStatsResponse {
            ops: vec![
                AccelOpStats {
                    opcode: "copy".into(),
                    module: "software".into(),
                    executed: 1000,
                    failed: 1,
                    miscompares: 0,
                    bytes: 4096 * 1000,
                },
                AccelOpStats {
                    opcode: "fill".into(),
                    module: "software".into(),
                    ..Default::default()
                },
            ],
            modules: vec![AccelModuleStats {
                module: "software".into(),
                batches: 10,
            }],
        };
        assert_eq!(
            accel_stats(&r, true),
            "\
OPCODE  MODULE    EXECUTED  FAILED  MISCOMPARES    BYTES
copy    software      1000       1            0  3.9 MiB

MODULE    BATCHES
software       10
"
        );
        assert_eq!(
            accel_stats(&r, false),
            "copy    software      1000       1            0  3.9 MiB\n\nsoftware       10\n",
            "the widths stay those of the table with headers"
        );
    }

    #[test]
    fn perf_table() {
        let job = |core: Option<u32>, bdev: &str, ios: u64| PerfJob {
            core,
            bdev: bdev.into(),
            ios,
            seconds: 1.0,
            iops: ios as f64,
            mib_s: ios as f64 * 4096.0 / 1048576.0,
            avg_lat_us: 12.345,
            min_lat_us: 0.9,
            max_lat_us: 1500.0,
            failed: 0,
            miscompares: 0,
        };
        let r = RunPerfResponse {
            jobs: vec![job(Some(0), "m0", 250_000), job(Some(1), "m0", 0)],
            total: Some(job(None, "", 250_000)),
        };
        assert_eq!(
            perf(&r, true),
            concat!(
                " CORE  DEVICE    IOPS   MiB/s  AVG LAT  MIN LAT  MAX LAT  FAILED  MISCOMPARES\n",
                "    0  m0      250000  976.56  12.3 µs   900 ns  1.50 ms       0            0\n",
                "    1  m0           0    0.00        -        -        -       0            0\n",
                "total  -       250000  976.56  12.3 µs   900 ns  1.50 ms       0            0\n",
            )
        );
        assert!(!perf(&r, false).contains("IOPS"));
    }

    #[test]
    fn no_headers_drops_every_header_line() {
        let rates = IntervalRates {
            uptime_ns: 1,
            interval_ns: 1,
            stats: vec![],
        };
        assert_eq!(io_rates(&rates, false), "", "no interval line either");
        assert_eq!(
            bdev_list(&[malloc("m0", 64, 512)], false).lines().count(),
            1
        );
        let reactors = GetReactorStatsResponse {
            reactors: vec![ReactorStats::default()],
        };
        assert!(!reactor_stats(&reactors, false).contains("CORE"));
        assert!(!export_list(&[], false).contains("DEVICE"));
        assert!(!accel_assignments(&GetAssignmentsResponse::default(), false).contains("OPCODE"));
        assert!(!io_stats(&GetIoStatsResponse::default(), false).contains("DEVICE"));
        assert!(!pool_stats(&GetPoolStatsResponse::default(), false).contains("POOL"));
    }

    #[test]
    fn reactor_table() {
        let r = GetReactorStatsResponse {
            reactors: vec![
                ReactorStats {
                    core: 0,
                    cpu: 2,
                    poll_mode: "busy".into(),
                    iterations: 123_456_789,
                    busy_ns: 1_000_000_000,
                    idle_ns: 3_000_000_000,
                    messages: 42,
                },
                ReactorStats {
                    core: 1,
                    cpu: 3,
                    poll_mode: "adaptive".into(),
                    ..Default::default()
                },
            ],
        };
        assert_eq!(
            reactor_stats(&r, true),
            "\
CORE  CPU  POLL MODE  ITERATIONS     BUSY     IDLE  BUSY %  MESSAGES
   0    2  busy        123456789  1.000 s  3.000 s    25.0        42
   1    3  adaptive            0  0.000 s  0.000 s       -         0
"
        );
    }

    #[test]
    fn pool_tables() {
        let r = GetPoolStatsResponse {
            pools: vec![PoolStats {
                name: "bdev_io".into(),
                capacity: 65536,
                cache_size: 256,
                available: 65000,
                in_use: 536,
                exhausted: 0,
                cores: vec![
                    PoolCoreStats {
                        core: Some(0),
                        gets: 1000,
                        puts: 990,
                        cache_hits: 900,
                        cache_misses: 100,
                        exhausted: 0,
                    },
                    PoolCoreStats {
                        core: None,
                        gets: 1,
                        ..Default::default()
                    },
                ],
            }],
        };
        assert_eq!(
            pool_stats(&r, true),
            "\
POOL     CAPACITY  CACHE SIZE  AVAILABLE  IN USE  EXHAUSTED
bdev_io     65536         256      65000     536          0

POOL      CORE  GETS  PUTS  CACHE HITS  CACHE MISSES  HIT %  EXHAUSTED
bdev_io      0  1000   990         900           100   90.0          0
bdev_io  other     1     0           0             0      -          0
"
        );
    }

    #[test]
    fn engine_info_list() {
        let e = EngineInfo {
            version: "0.1.0".into(),
            git_revision: "abc123".into(),
            cores: vec![0, 1],
            poll_mode: "busy".into(),
            uptime_ns: 3_723_000_000_000,
            hugepages: Some(Hugepages {
                page_size_bytes: 2 << 20,
                total: 1024,
                free: 1000,
            }),
            accel_modules: vec!["ioat".into(), "software".into()],
            io_pool_size: 65536,
            io_pool_cache: 256,
            accel_notes: vec!["ioat: 1 channel ready: model-0".into()],
            core_source: "cpu quota".into(),
            allowed_cpus: vec![0, 1, 2],
            cpu_quota: 2.5,
        };
        assert_eq!(
            engine_info(&e),
            "\
version        0.1.0
git revision   abc123
cores          0, 1
core source    cpu quota
allowed cpus   0, 1, 2
cpu quota      2.50 CPUs
poll mode      busy
uptime         1h 02m 03s
hugepages      2.0 MiB pages: 1024 total, 1000 free
accel modules  ioat, software
accel note     ioat: 1 channel ready: model-0
io pool size   65536
io pool cache  256
"
        );
        let unknown = engine_info(&EngineInfo::default());
        assert!(unknown.contains("hugepages      unknown\n"), "{unknown}");
        assert!(!unknown.contains("core source"), "{unknown}");
        let unlimited = engine_info(&EngineInfo {
            core_source: "first allowed CPU".into(),
            allowed_cpus: vec![0, 1],
            ..EngineInfo::default()
        });
        assert!(unlimited.contains("cpu quota      none\n"), "{unlimited}");
    }
}
