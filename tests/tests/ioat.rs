//! End-to-end tests of the I/OAT module on its device model (this machine
//! has no I/OAT hardware): the daemon with `--ioat-model 2` moving malloc
//! data through I/OAT (perf runs with verify, `accel modules`, `accel
//! stats`, GetInfo, /metrics), `--ioat` on this host falling back to
//! software and saying why, accel-perf on the model with and without
//! batching, and bdev-perf verifying a malloc device through the model.

use io_engine_tests::accel_perf::{
    accel_notes, accel_perf_json, accel_perf_table, accel_perf_usage_error,
    bdev_perf_through_model, fell_back_to_software, model_copies, perf_on_m0 as perf,
};
use io_engine_tests::daemon::Daemon;
use io_engine_tests::http::sample;
use io_engine_tests::{accel_op, http, text, u};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_moves_malloc_data_on_the_ioat_model() {
    let d = Daemon::start_quiet([
        "--ioat-model",
        "2",
        "--bdev",
        "malloc:///m0?size_mb=16&blk_size=4096",
    ]);
    let log = d.stderr();
    assert!(log.contains("ioat: 2 channels ready"), "{log}");

    let modules = d.ctl_json(&["accel", "modules"]);
    let first = &modules["modules"][0];
    assert_eq!(first["name"], "ioat", "ioat first: {modules}");
    assert_eq!(first["opcodes"], serde_json::json!(["copy", "fill"]));
    let imp = first["implementation"].as_str().unwrap();
    assert_eq!(
        imp.matches("model-").count(),
        2,
        "both model channels: {modules}"
    );
    assert_eq!(modules["modules"][1]["name"], "software");
    assert!(d.ctl_ok(&["accel", "modules"]).contains("ioat"));
    let a = d.ctl_json(&["accel", "assignments"]);
    let assigned = |op: &str| {
        a["assignments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["opcode"] == op)
            .unwrap()["module"]
            .clone()
    };
    assert_eq!(assigned("copy"), "ioat", "{a}");
    assert_eq!(assigned("fill"), "ioat", "{a}");
    assert_eq!(assigned("crc32c"), "software", "{a}");

    // Verified IO (each write read back and compared), then plain reads
    // and writes: all data movement is I/OAT copies.
    let v = perf(&d, "randwrite", true).await;
    let r = perf(&d, "randread", false).await;
    let w = perf(&d, "write", false).await;
    let ios: u64 = [v, r, w]
        .iter()
        .map(|x| x.total.as_ref().unwrap().ios)
        .sum();

    let st = d.ctl_json(&["accel", "stats"]);
    let copy = accel_op(&st, "copy", "ioat");
    assert_eq!(u(&copy["executed"]), ios, "one I/OAT copy per IO: {st}");
    assert_eq!(u(&copy["failed"]), 0, "{st}");
    let soft = accel_op(&st, "copy", "software");
    assert_eq!(u(&soft["executed"]), 0, "nothing fell back: {st}");
    let table = d.ctl_ok(&["accel", "stats"]);
    assert!(table.contains("ioat"), "{table}");

    let (notes, info) = accel_notes(&d);
    assert_eq!(info["accel_modules"][0], "ioat", "{info}");
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("ioat: 2 channels ready: model-")),
        "{info}"
    );
    assert!(d.ctl_ok(&["engine", "info"]).contains("accel note"));

    let body = http::get(&d.metrics_url()).expect("GET /metrics").text();
    assert_eq!(
        sample(
            &body,
            r#"io_engine_accel_ops_total{opcode="copy",module="ioat"}"#
        ),
        ios as f64
    );
    let batches = sample(&body, r#"io_engine_accel_batches_total{module="ioat"}"#);
    assert!(batches > 0.0);
    // The driver's own counters: doorbell writes (one per batch handed
    // over, or per backlog drain), at least one descriptor per copy, no
    // faults on a healthy device.
    let event = |e: &str| {
        sample(
            &body,
            &format!(r#"io_engine_accel_engine_events_total{{module="ioat",event="{e}"}}"#),
        )
    };
    let doorbells = event("doorbell_writes");
    assert!(
        doorbells > 0.0 && doorbells <= event("descriptors"),
        "{body}"
    );
    assert!(event("descriptors") >= ios as f64, "{body}");
    assert_eq!(event("halts"), 0.0);
    assert_eq!(event("bad_completions"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ioat_on_a_host_without_it_runs_on_software_and_says_why() {
    let d = Daemon::start_quiet(["--ioat", "--bdev", "malloc:///m0?size_mb=8&blk_size=4096"]);
    if !fell_back_to_software(&d, "channel", "copy and fill run on the software module") {
        // A host with a usable I/OAT function: nothing to check here.
        return;
    }
    let log = d.stderr();
    assert!(
        log.contains("copy and fill run on the software module"),
        "{log}"
    );
    perf(&d, "randwrite", true).await;
}

#[test]
fn accel_perf_verifies_copy_and_fill_on_the_model() {
    for w in ["copy", "fill"] {
        let (v, out) = accel_perf_json(&["-w", w, "--ioat-model", "1", "-y", "-t", "0.5"]);
        assert!(out.status.success(), "{w}: {}", text(&out.stderr));
        assert_eq!(v["module"]["name"], "ioat", "{v}");
        assert_eq!(v["total"]["failed"], 0);
        assert!(u(&v["total"]["transfers"]) > 0);
        assert!(u(&v["module"]["doorbell_writes"]) > 0, "{v}");
        assert!(u(&v["module"]["descriptors"]) >= u(&v["total"]["transfers"]));
    }
    let s = accel_perf_table(&["-w", "copy", "--ioat-model", "1", "-y", "-t", "0.3"]);
    assert!(s.contains("Module:         ioat"), "{s}");
    assert!(
        s.contains("Module ioat: ") && s.contains("doorbell writes ("),
        "{s}"
    );
    // -M ioat without an I/OAT flag: a usage error that says what to add.
    let e = accel_perf_usage_error(&["-w", "copy", "-M", "ioat"]);
    assert!(e.contains("add --ioat (hardware) or --ioat-model N"), "{e}");
}

#[test]
fn batching_brings_doorbells_below_one_per_128_operations() {
    let run_b = |b: &str| {
        let v = model_copies("ioat", "1024", &["-t", "1", "-y", "-b", b]);
        assert_eq!(v["total"]["failed"], 0);
        v
    };
    let alone = run_b("0");
    let batched = run_b("256");
    let per_op =
        |v: &Value| u(&v["module"]["doorbell_writes"]) as f64 / u(&v["total"]["transfers"]) as f64;
    assert!(per_op(&alone) >= 0.99, "{alone}");
    assert!(per_op(&batched) <= 1.0 / 128.0, "{batched}");
    // Whether batching is also faster is a benchmark's question
    // (bench/accel-model prints both rates from the same run), not a timed
    // test's on a shared machine.
}

#[test]
fn bdev_perf_verifies_a_malloc_device_through_the_model() {
    let v = bdev_perf_through_model("--ioat-model", "ioat");
    assert!(
        u(&v["accel"]["modules"]["ioat"]["doorbell_writes"]) > 0,
        "{v}"
    );
}
