//! Driving the engine's perf tools for the accel tests (`accel_perf.rs`,
//! `ioat.rs`, `dsa.rs` in `tests/tests/`): accel-perf on one CPU with its
//! JSON report, its table, its usage errors; bdev-perf's accel report of a
//! malloc device moved through an offload model; a daemon's PerfService
//! run on its malloc device `m0`, checked; and what a daemon says of its
//! accel modules.
//!
//! Thread: the test threads (the PerfService run on the test's tokio
//! runtime).

use std::process::Output;

use io_engine_api::v1 as pb;
use pb::perf_service_client::PerfServiceClient;
use serde_json::Value;

use crate::daemon::Daemon;
use crate::{accel_op, available_cpus, bin, cpu_mask, run, text, u};

/// The mask of the first CPU this process may use.
pub fn one_cpu_mask() -> String {
    cpu_mask(&[available_cpus()[0]])
}

/// accel-perf run with `args` (its CPU mask among them).
pub fn accel_perf(args: &[&str]) -> Output {
    run(bin("accel-perf"), args)
}

/// accel-perf on one CPU (the mask first) with `args`: how it ended.
pub fn accel_perf_on_one_cpu(args: &[&str]) -> Output {
    let m = one_cpu_mask();
    let mut all = vec!["-m", m.as_str()];
    all.extend_from_slice(args);
    accel_perf(&all)
}

/// accel-perf on one CPU with `--json` and `args`: its report, parsed (a
/// panic, with what it said, when the report is not JSON), and how it
/// ended.
pub fn accel_perf_json(args: &[&str]) -> (Value, Output) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = accel_perf_on_one_cpu(&all);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "accel-perf {all:?}: not JSON ({e}): {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    (v, out)
}

/// accel-perf on one CPU copying 512 B at queue depth `depth` on one
/// device of `module`'s model (`-M MODULE --MODULE-model 1`), with `more`
/// arguments; it must succeed: its report.
pub fn model_copies(module: &str, depth: &str, more: &[&str]) -> Value {
    let model = format!("--{module}-model");
    let mut args = vec![
        "-M", module, &model, "1", "-w", "copy", "-o", "512", "-q", depth,
    ];
    args.extend_from_slice(more);
    let (v, out) = accel_perf_json(&args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    v
}

/// accel-perf on one CPU with `args`, which must succeed: its table.
pub fn accel_perf_table(args: &[&str]) -> String {
    let out = accel_perf_on_one_cpu(args);
    let s = text(&out.stdout);
    assert!(out.status.success(), "{s}{}", text(&out.stderr));
    s
}

/// accel-perf on one CPU with `args`, which must be a usage error (status
/// 2): what it said.
pub fn accel_perf_usage_error(args: &[&str]) -> String {
    let out = accel_perf_on_one_cpu(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?}: {}",
        text(&out.stderr)
    );
    text(&out.stderr)
}

/// bdev-perf on one CPU, a verified randrw run of half a second on a
/// 16 MiB malloc device with `model` (`--ioat-model`, `--dsa-model`) 1:
/// its JSON report, after checking that the copies ran on `module` and
/// none failed.
pub fn bdev_perf_through_model(model: &str, module: &str) -> Value {
    let cpu = available_cpus()[0].to_string();
    let out = run(
        bin("bdev-perf"),
        [
            "-l",
            &cpu,
            "-w",
            "randrw",
            "-t",
            "0.5",
            "-y",
            model,
            "1",
            "--json",
            "--bdev",
            "malloc:///m0?size_mb=16&blk_size=4096",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let copy = accel_op(&v["accel"], "copy", module);
    assert!(u(&copy["executed"]) > 0, "{v}");
    assert_eq!(u(&copy["failed"]), 0, "{v}");
    v
}

/// A PerfService run of `workload` on the daemon's `m0` (4 KiB, QD 16,
/// half a second, verified when `verify`); asserts that every job did IO
/// and none failed or miscompared.
pub async fn perf_on_m0(d: &Daemon, workload: &str, verify: bool) -> pb::RunPerfResponse {
    let req = pb::RunPerfRequest {
        bdevs: vec!["m0".into()],
        workload: workload.into(),
        io_size: 4096,
        queue_depth: 16,
        seconds: 0.5,
        verify,
        ..Default::default()
    };
    let resp = PerfServiceClient::new(d.channel().await)
        .run(req)
        .await
        .unwrap_or_else(|s| panic!("PerfService.Run {workload}: {s:?}\n{}", d.stderr()))
        .into_inner();
    for job in &resp.jobs {
        assert!(job.ios > 0, "{workload}: no IO: {resp:?}");
        assert_eq!(job.failed, 0, "{workload}: {resp:?}");
        assert_eq!(job.miscompares, 0, "{workload}: {resp:?}");
    }
    resp
}

/// The daemon's accel notes (GetInfo), and all of GetInfo for messages.
pub fn accel_notes(d: &Daemon) -> (Vec<String>, Value) {
    let info = d.ctl_json(&["engine", "info"]);
    let notes = info["accel_notes"]
        .as_array()
        .unwrap_or_else(|| panic!("no accel notes in {info}"))
        .iter()
        .map(|n| {
            n.as_str()
                .unwrap_or_else(|| panic!("a note that is not text: {n}"))
                .to_string()
        })
        .collect();
    (notes, info)
}

/// For a daemon started with an offload module's flag (`--ioat`,
/// `--dsa`) on a host that may lack the device: `false` when one of its
/// `unit`s ("channel", "work queue") is ready here (nothing to check);
/// else `true`, once its notes say `fallback` and at least one reason
/// beside it, and every opcode runs on software.
pub fn fell_back_to_software(d: &Daemon, unit: &str, fallback: &str) -> bool {
    let (all, info) = accel_notes(d);
    let ready = [format!("{unit} ready"), format!("{unit}s ready")];
    if all.iter().any(|n| ready.iter().any(|r| n.contains(r))) {
        return false;
    }
    assert!(all.iter().any(|n| n.contains(fallback)), "{info}");
    assert!(all.len() >= 2, "a reason beside the fallback: {info}");
    let a = d.ctl_json(&["accel", "assignments"]);
    for entry in a["assignments"].as_array().unwrap() {
        assert_eq!(entry["module"], "software", "{a}");
    }
    true
}
