//! JSON views of the API's messages: the same snake_case field names as the
//! .proto files, 64-bit counters and sizes as JSON integers, absent counter
//! messages as zeros and absent optional values as `null`. The generated
//! prost types do not implement serde, so each message has a borrowing twin.
//!
//! Thread: the CLI's main thread.

use io_engine_api::v1::{
    Bdev, BdevIoStats, EngineInfo, Export, GetAccelStatsResponse, GetAssignmentsResponse,
    GetIoStatsResponse, GetPoolStatsResponse, GetReactorStatsResponse, Hugepages,
    ListModulesResponse, OpStats, PoolCoreStats, PoolStats, ReactorStats,
};
use serde::Serialize;

/// `Bdev`.
#[derive(Debug, Serialize)]
pub(crate) struct BdevJson<'a> {
    name: &'a str,
    uuid: &'a str,
    uri: &'a str,
    product: &'a str,
    block_size: u32,
    num_blocks: u64,
    size_bytes: u64,
    claimed: bool,
    open_count: u32,
    shared: bool,
    share_uri: &'a str,
}

impl<'a> From<&'a Bdev> for BdevJson<'a> {
    fn from(b: &'a Bdev) -> Self {
        Self {
            name: &b.name,
            uuid: &b.uuid,
            uri: &b.uri,
            product: &b.product,
            block_size: b.block_size,
            num_blocks: b.num_blocks,
            size_bytes: b.size_bytes,
            claimed: b.claimed,
            open_count: b.open_count,
            shared: b.shared,
            share_uri: &b.share_uri,
        }
    }
}

/// `ListBdevsResponse`.
#[derive(Debug, Serialize)]
pub(crate) struct ListBdevsJson<'a> {
    bdevs: Vec<BdevJson<'a>>,
}

impl<'a> ListBdevsJson<'a> {
    /// The view of a list of devices.
    pub(crate) fn new(bdevs: &'a [Bdev]) -> Self {
        Self {
            bdevs: bdevs.iter().map(BdevJson::from).collect(),
        }
    }
}

/// `ListModulesResponse` (`accel modules`).
#[derive(Debug, Serialize)]
pub(crate) struct AccelModulesJson<'a> {
    modules: Vec<AccelModuleJson<'a>>,
}

#[derive(Debug, Serialize)]
struct AccelModuleJson<'a> {
    name: &'a str,
    opcodes: &'a [String],
    max_batch: u64,
    max_transfer: u64,
    implementation: &'a str,
}

impl<'a> AccelModulesJson<'a> {
    /// The view of the module list.
    pub(crate) fn new(r: &'a ListModulesResponse) -> Self {
        Self {
            modules: r
                .modules
                .iter()
                .map(|m| AccelModuleJson {
                    name: &m.name,
                    opcodes: &m.opcodes,
                    max_batch: m.max_batch,
                    max_transfer: m.max_transfer,
                    implementation: &m.implementation,
                })
                .collect(),
        }
    }
}

/// `GetAssignmentsResponse` (`accel assignments`).
#[derive(Debug, Serialize)]
pub(crate) struct AccelAssignmentsJson<'a> {
    assignments: Vec<AccelAssignmentJson<'a>>,
    fallbacks: &'a [String],
}

#[derive(Debug, Serialize)]
struct AccelAssignmentJson<'a> {
    opcode: &'a str,
    module: &'a str,
}

impl<'a> AccelAssignmentsJson<'a> {
    /// The view of the assignments.
    pub(crate) fn new(r: &'a GetAssignmentsResponse) -> Self {
        Self {
            assignments: r
                .assignments
                .iter()
                .map(|a| AccelAssignmentJson {
                    opcode: &a.opcode,
                    module: &a.module,
                })
                .collect(),
            fallbacks: &r.fallbacks,
        }
    }
}

/// `GetAccelStatsResponse` (`accel stats`): every pair, zeroes included.
#[derive(Debug, Serialize)]
pub(crate) struct AccelStatsJson<'a> {
    ops: Vec<AccelOpJson<'a>>,
    modules: Vec<AccelModuleStatsJson<'a>>,
}

#[derive(Debug, Serialize)]
struct AccelOpJson<'a> {
    opcode: &'a str,
    module: &'a str,
    executed: u64,
    failed: u64,
    miscompares: u64,
    bytes: u64,
}

#[derive(Debug, Serialize)]
struct AccelModuleStatsJson<'a> {
    module: &'a str,
    batches: u64,
}

impl<'a> AccelStatsJson<'a> {
    /// The view of the accel counters.
    pub(crate) fn new(r: &'a GetAccelStatsResponse) -> Self {
        Self {
            ops: r
                .ops
                .iter()
                .map(|o| AccelOpJson {
                    opcode: &o.opcode,
                    module: &o.module,
                    executed: o.executed,
                    failed: o.failed,
                    miscompares: o.miscompares,
                    bytes: o.bytes,
                })
                .collect(),
            modules: r
                .modules
                .iter()
                .map(|m| AccelModuleStatsJson {
                    module: &m.module,
                    batches: m.batches,
                })
                .collect(),
        }
    }
}

/// `Export`.
#[derive(Debug, Serialize)]
pub(crate) struct ExportJson<'a> {
    bdev: &'a str,
    protocol: &'a str,
    read_only: bool,
    uri: &'a str,
    connections: u32,
}

impl<'a> From<&'a Export> for ExportJson<'a> {
    fn from(e: &'a Export) -> Self {
        Self {
            bdev: &e.bdev,
            protocol: &e.protocol,
            read_only: e.read_only,
            uri: &e.uri,
            connections: e.connections,
        }
    }
}

/// `ListExportsResponse`.
#[derive(Debug, Serialize)]
pub(crate) struct ListExportsJson<'a> {
    exports: Vec<ExportJson<'a>>,
}

impl<'a> ListExportsJson<'a> {
    /// The view of a list of exports.
    pub(crate) fn new(exports: &'a [Export]) -> Self {
        Self {
            exports: exports.iter().map(ExportJson::from).collect(),
        }
    }
}

/// `OpStats`.
#[derive(Debug, Serialize)]
struct OpStatsJson {
    ops: u64,
    bytes: u64,
    errors: u64,
    latency_total_ns: u64,
    latency_min_ns: u64,
    latency_max_ns: u64,
}

impl OpStatsJson {
    /// An absent message counts as zeros.
    fn new(s: Option<&OpStats>) -> Self {
        let s = s.copied().unwrap_or_default();
        Self {
            ops: s.ops,
            bytes: s.bytes,
            errors: s.errors,
            latency_total_ns: s.latency_total_ns,
            latency_min_ns: s.latency_min_ns,
            latency_max_ns: s.latency_max_ns,
        }
    }
}

/// `BdevIoStats`.
#[derive(Debug, Serialize)]
struct BdevIoStatsJson<'a> {
    name: &'a str,
    read: OpStatsJson,
    write: OpStatsJson,
    unmap: OpStatsJson,
    flush: OpStatsJson,
    write_zeroes: OpStatsJson,
    in_flight: u64,
}

impl<'a> From<&'a BdevIoStats> for BdevIoStatsJson<'a> {
    fn from(s: &'a BdevIoStats) -> Self {
        Self {
            name: &s.name,
            read: OpStatsJson::new(s.read.as_ref()),
            write: OpStatsJson::new(s.write.as_ref()),
            unmap: OpStatsJson::new(s.unmap.as_ref()),
            flush: OpStatsJson::new(s.flush.as_ref()),
            write_zeroes: OpStatsJson::new(s.write_zeroes.as_ref()),
            in_flight: s.in_flight,
        }
    }
}

/// `GetIoStatsResponse`.
#[derive(Debug, Serialize)]
pub(crate) struct GetIoStatsJson<'a> {
    stats: Vec<BdevIoStatsJson<'a>>,
    uptime_ns: u64,
}

impl<'a> From<&'a GetIoStatsResponse> for GetIoStatsJson<'a> {
    fn from(r: &'a GetIoStatsResponse) -> Self {
        Self {
            stats: r.stats.iter().map(BdevIoStatsJson::from).collect(),
            uptime_ns: r.uptime_ns,
        }
    }
}

/// `ReactorStats`.
#[derive(Debug, Serialize)]
struct ReactorStatsJson<'a> {
    core: u32,
    cpu: u32,
    poll_mode: &'a str,
    iterations: u64,
    busy_ns: u64,
    idle_ns: u64,
    messages: u64,
}

impl<'a> From<&'a ReactorStats> for ReactorStatsJson<'a> {
    fn from(r: &'a ReactorStats) -> Self {
        Self {
            core: r.core,
            cpu: r.cpu,
            poll_mode: &r.poll_mode,
            iterations: r.iterations,
            busy_ns: r.busy_ns,
            idle_ns: r.idle_ns,
            messages: r.messages,
        }
    }
}

/// `GetReactorStatsResponse`.
#[derive(Debug, Serialize)]
pub(crate) struct GetReactorStatsJson<'a> {
    reactors: Vec<ReactorStatsJson<'a>>,
}

impl<'a> From<&'a GetReactorStatsResponse> for GetReactorStatsJson<'a> {
    fn from(r: &'a GetReactorStatsResponse) -> Self {
        Self {
            reactors: r.reactors.iter().map(ReactorStatsJson::from).collect(),
        }
    }
}

/// `PoolCoreStats`; `core` is `null` for threads that are not reactors.
#[derive(Debug, Serialize)]
struct PoolCoreStatsJson {
    core: Option<u32>,
    gets: u64,
    puts: u64,
    cache_hits: u64,
    cache_misses: u64,
    exhausted: u64,
}

impl From<&PoolCoreStats> for PoolCoreStatsJson {
    fn from(c: &PoolCoreStats) -> Self {
        Self {
            core: c.core,
            gets: c.gets,
            puts: c.puts,
            cache_hits: c.cache_hits,
            cache_misses: c.cache_misses,
            exhausted: c.exhausted,
        }
    }
}

/// `PoolStats`.
#[derive(Debug, Serialize)]
struct PoolStatsJson<'a> {
    name: &'a str,
    capacity: u64,
    cache_size: u64,
    available: u64,
    in_use: u64,
    exhausted: u64,
    cores: Vec<PoolCoreStatsJson>,
}

impl<'a> From<&'a PoolStats> for PoolStatsJson<'a> {
    fn from(p: &'a PoolStats) -> Self {
        Self {
            name: &p.name,
            capacity: p.capacity,
            cache_size: p.cache_size,
            available: p.available,
            in_use: p.in_use,
            exhausted: p.exhausted,
            cores: p.cores.iter().map(PoolCoreStatsJson::from).collect(),
        }
    }
}

/// `GetPoolStatsResponse`.
#[derive(Debug, Serialize)]
pub(crate) struct GetPoolStatsJson<'a> {
    pools: Vec<PoolStatsJson<'a>>,
}

impl<'a> From<&'a GetPoolStatsResponse> for GetPoolStatsJson<'a> {
    fn from(r: &'a GetPoolStatsResponse) -> Self {
        Self {
            pools: r.pools.iter().map(PoolStatsJson::from).collect(),
        }
    }
}

/// `Hugepages`.
#[derive(Debug, Serialize)]
struct HugepagesJson {
    page_size_bytes: u64,
    total: u64,
    free: u64,
}

impl From<&Hugepages> for HugepagesJson {
    fn from(h: &Hugepages) -> Self {
        Self {
            page_size_bytes: h.page_size_bytes,
            total: h.total,
            free: h.free,
        }
    }
}

/// `EngineInfo`; `hugepages` is `null` when the engine did not report it.
#[derive(Debug, Serialize)]
pub(crate) struct EngineInfoJson<'a> {
    version: &'a str,
    git_revision: &'a str,
    cores: &'a [u32],
    poll_mode: &'a str,
    uptime_ns: u64,
    hugepages: Option<HugepagesJson>,
    accel_modules: &'a [String],
    io_pool_size: u64,
    io_pool_cache: u64,
    accel_notes: &'a [String],
}

impl<'a> From<&'a EngineInfo> for EngineInfoJson<'a> {
    fn from(e: &'a EngineInfo) -> Self {
        Self {
            version: &e.version,
            git_revision: &e.git_revision,
            cores: &e.cores,
            poll_mode: &e.poll_mode,
            uptime_ns: e.uptime_ns,
            hugepages: e.hugepages.as_ref().map(HugepagesJson::from),
            accel_modules: &e.accel_modules,
            io_pool_size: e.io_pool_size,
            io_pool_cache: e.io_pool_cache,
            accel_notes: &e.accel_notes,
        }
    }
}

/// An empty response (`DestroyBdevResponse`, `ResetIoStatsResponse`): `{}`.
#[derive(Debug, Serialize)]
pub(crate) struct EmptyJson {}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::{Value, json};

    use super::*;

    /// The field names of `message NAME { ... }` in one of the API's .proto
    /// files, read from the source so the views cannot drift from it.
    fn proto_fields(file: &str, message: &str) -> BTreeSet<String> {
        let path = format!(
            "{}/../proto/io_engine/v1/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let start = text
            .find(&format!("message {message} {{"))
            .unwrap_or_else(|| panic!("no message {message} in {file}"));
        let body = &text[start..];
        let body = &body[body.find('{').unwrap() + 1..body.find('}').unwrap()];
        body.lines()
            .map(|l| l.split("//").next().unwrap().trim())
            .filter(|l| l.contains('='))
            .map(|l| {
                let lhs = l.split('=').next().unwrap();
                lhs.split_whitespace().last().unwrap().to_owned()
            })
            .collect()
    }

    fn to_value(view: impl Serialize) -> Value {
        serde_json::to_value(view).unwrap()
    }

    fn keys(v: &Value) -> BTreeSet<String> {
        v.as_object().expect("an object").keys().cloned().collect()
    }

    fn op(n: u64) -> OpStats {
        OpStats {
            ops: n,
            bytes: n * 4096,
            errors: 1,
            latency_total_ns: n * 1000,
            latency_min_ns: 500,
            latency_max_ns: 2000,
        }
    }

    fn bdev() -> Bdev {
        Bdev {
            name: "m0".into(),
            uuid: "u".into(),
            uri: "malloc:///m0?size_mb=64&blk_size=4096".into(),
            product: "malloc".into(),
            block_size: 4096,
            num_blocks: 16384,
            size_bytes: 64 << 20,
            claimed: true,
            open_count: 2,
            shared: false,
            share_uri: String::new(),
        }
    }

    #[test]
    fn field_names_equal_the_proto_field_names() {
        let io = GetIoStatsResponse {
            stats: vec![BdevIoStats {
                name: "m0".into(),
                read: Some(op(1)),
                ..Default::default()
            }],
            uptime_ns: 1,
        };
        let pools = GetPoolStatsResponse {
            pools: vec![PoolStats {
                cores: vec![PoolCoreStats::default()],
                ..Default::default()
            }],
        };
        let reactors = GetReactorStatsResponse {
            reactors: vec![ReactorStats::default()],
        };
        let info = EngineInfo {
            hugepages: Some(Hugepages::default()),
            ..Default::default()
        };
        let bdevs = [bdev()];
        let list = to_value(ListBdevsJson::new(&bdevs));
        let io = to_value(GetIoStatsJson::from(&io));
        let pools = to_value(GetPoolStatsJson::from(&pools));
        let reactors = to_value(GetReactorStatsJson::from(&reactors));
        let info = to_value(EngineInfoJson::from(&info));
        let cases = [
            ("bdev.proto", "Bdev", list["bdevs"][0].clone()),
            ("bdev.proto", "ListBdevsResponse", list),
            ("stats.proto", "OpStats", io["stats"][0]["read"].clone()),
            ("stats.proto", "BdevIoStats", io["stats"][0].clone()),
            ("stats.proto", "GetIoStatsResponse", io),
            (
                "stats.proto",
                "ReactorStats",
                reactors["reactors"][0].clone(),
            ),
            ("stats.proto", "GetReactorStatsResponse", reactors),
            (
                "stats.proto",
                "PoolCoreStats",
                pools["pools"][0]["cores"][0].clone(),
            ),
            ("stats.proto", "PoolStats", pools["pools"][0].clone()),
            ("stats.proto", "GetPoolStatsResponse", pools),
            ("engine.proto", "Hugepages", info["hugepages"].clone()),
            ("engine.proto", "EngineInfo", info),
        ];
        for (file, message, value) in cases {
            assert_eq!(keys(&value), proto_fields(file, message), "{message}");
        }
    }

    #[test]
    fn bdev_sizes_are_integers() {
        let b = bdev();
        let v = to_value(BdevJson::from(&b));
        assert_eq!(v["size_bytes"], json!(67_108_864));
        assert_eq!(v["num_blocks"], json!(16384));
        assert_eq!(v["share_uri"], json!(""));
    }

    #[test]
    fn absent_counters_are_zeros_and_absent_options_null() {
        let io = GetIoStatsResponse {
            stats: vec![BdevIoStats {
                name: "n0".into(),
                ..Default::default()
            }],
            uptime_ns: 5,
        };
        let v = to_value(GetIoStatsJson::from(&io));
        assert_eq!(
            v["stats"][0]["flush"],
            json!({"ops": 0, "bytes": 0, "errors": 0, "latency_total_ns": 0,
                   "latency_min_ns": 0, "latency_max_ns": 0})
        );
        let info = EngineInfo::default();
        let v = to_value(EngineInfoJson::from(&info));
        assert_eq!(v["hugepages"], Value::Null);
        let pool = GetPoolStatsResponse {
            pools: vec![PoolStats {
                cores: vec![
                    PoolCoreStats {
                        core: Some(1),
                        ..Default::default()
                    },
                    PoolCoreStats::default(),
                ],
                ..Default::default()
            }],
        };
        let v = to_value(GetPoolStatsJson::from(&pool));
        assert_eq!(v["pools"][0]["cores"][0]["core"], json!(1));
        assert_eq!(v["pools"][0]["cores"][1]["core"], Value::Null);
    }

    #[test]
    fn empty_responses_are_empty_objects() {
        assert_eq!(serde_json::to_string(&EmptyJson {}).unwrap(), "{}");
    }
}
