//! How the messages print as JSON where serde's default is not what
//! `io-engine-ctl --output json` shows: `build.rs` names these functions in
//! `#[serde(serialize_with = ...)]` attributes on the generated fields.
//!
//! Thread: any (pure functions).

use serde::{Serialize, Serializer};

/// An absent message as its zero value (`{"ops": 0, ...}`), not `null`.
pub(crate) fn zeros_if_absent<T, S>(value: &Option<T>, serializer: S) -> Result<S::Ok, S::Error>
where
    T: Default + Serialize,
    S: Serializer,
{
    match value {
        Some(v) => v.serialize(serializer),
        None => T::default().serialize(serializer),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::{Value, json};

    use super::*;
    use crate::v1::{
        Bdev, BdevIoStats, DestroyBdevResponse, EngineInfo, GetIoStatsResponse,
        GetPoolStatsResponse, GetReactorStatsResponse, Hugepages, ListBdevsResponse, OpStats,
        PoolCoreStats, PoolStats, ReactorStats, ResetIoStatsResponse, UnshareResponse,
    };

    /// The field names of `message NAME { ... }` in one of the API's .proto
    /// files, read from the source so the JSON cannot drift from it.
    fn proto_fields(file: &str, message: &str) -> BTreeSet<String> {
        let path = format!("{}/io_engine/v1/{file}", env!("CARGO_MANIFEST_DIR"));
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

    fn to_value(message: &impl Serialize) -> Value {
        serde_json::to_value(message).unwrap()
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
            backing_path: String::new(),
            backing_kind: String::new(),
            volatile_write_cache: false,
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
        let list = to_value(&ListBdevsResponse {
            bdevs: vec![bdev()],
        });
        let io = to_value(&io);
        let pools = to_value(&pools);
        let reactors = to_value(&reactors);
        let info = to_value(&info);
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
        let v = to_value(&bdev());
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
        let v = to_value(&io);
        assert_eq!(
            v["stats"][0]["flush"],
            json!({"ops": 0, "bytes": 0, "errors": 0, "latency_total_ns": 0,
                   "latency_min_ns": 0, "latency_max_ns": 0})
        );
        let v = to_value(&EngineInfo::default());
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
        let v = to_value(&pool);
        assert_eq!(v["pools"][0]["cores"][0]["core"], json!(1));
        assert_eq!(v["pools"][0]["cores"][1]["core"], Value::Null);
    }

    #[test]
    fn empty_responses_are_empty_objects() {
        for text in [
            serde_json::to_string(&DestroyBdevResponse {}),
            serde_json::to_string(&UnshareResponse {}),
            serde_json::to_string(&ResetIoStatsResponse {}),
        ] {
            assert_eq!(text.unwrap(), "{}");
        }
    }
}
