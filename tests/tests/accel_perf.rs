//! End-to-end tests of `accel-perf`: the release binary run on every
//! workload with verification, its JSON and table reports, miscompare
//! injection, batching, and its usage errors (status 2, one clear line).
//!
//! Runs are short (0.3 s each) on the first CPU this process may use.

use std::process::Output;

use io_engine_tests::accel_perf::{accel_perf, accel_perf_json, one_cpu_mask as mask};
use io_engine_tests::{available_cpus, text};
use serde_json::Value;

/// accel-perf's JSON report of a 0.3 s run with `args` on one CPU.
fn json_run(args: &[&str]) -> (Value, Output) {
    let mut all = vec!["-t", "0.3"];
    all.extend_from_slice(args);
    accel_perf_json(&all)
}

#[test]
fn every_workload_runs_verified_with_a_consistent_report() {
    for w in [
        "copy",
        "fill",
        "crc32c",
        "copy_crc32c",
        "compare",
        "dualcast",
    ] {
        for size in ["512", "4096", "65536"] {
            let (v, out) = json_run(&["-w", w, "-o", size, "-y", "-q", "16", "-a", "64"]);
            assert!(out.status.success(), "{w} {size}: {}", text(&out.stderr));
            let total = &v["total"];
            let ops = total["ops_per_s"].as_f64().unwrap();
            assert!(ops > 1000.0, "{w} {size}: {ops} ops/s");
            assert_eq!(total["failed"], 0, "{w}");
            assert_eq!(total["miscompares"], 0, "{w}");
            let mib = total["mib_s"].as_f64().unwrap();
            let want = ops * size.parse::<f64>().unwrap() / 1048576.0;
            assert!(
                (mib - want).abs() <= 1e-6 * want,
                "{w}: {mib} MiB/s vs {want}"
            );
            assert_eq!(v["cores"].as_array().unwrap().len(), 1);
            assert_eq!(v["config"]["workload"], w);
            assert_eq!(v["config"]["verify"], true);
            assert_eq!(v["module"]["name"], "software");
            // The module's own counters saw the same tasks.
            let counters = v["module"]["counters"].as_array().unwrap();
            let executed: u64 = counters
                .iter()
                .filter(|c| c["opcode"] == w)
                .map(|c| c["executed"].as_u64().unwrap())
                .sum();
            assert_eq!(executed, total["transfers"].as_u64().unwrap(), "{w}: {v}");
        }
    }
}

#[test]
fn crc32c_over_several_vectors_with_a_seed_verifies() {
    let (v, out) = json_run(&["-w", "crc32c", "-C", "4", "-S", "12345", "-y"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(v["config"]["iovcnt"], 4);
    assert_eq!(v["total"]["failed"], 0);
    let (_, out) = json_run(&["-w", "copy_crc32c", "-C", "3", "-y", "-o", "1000"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn injected_miscompares_are_expected_and_others_fail_nothing() {
    let (v, out) = json_run(&["-w", "compare", "-P", "25", "-a", "100", "-q", "32"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = &v["total"];
    let mis = t["miscompares"].as_u64().unwrap();
    assert!(mis > 0, "{v}");
    assert_eq!(mis, t["expected_miscompares"].as_u64().unwrap());
    let transfers = t["transfers"].as_u64().unwrap() as f64;
    let share = mis as f64 / transfers;
    assert!(
        (0.2..=0.3).contains(&share),
        "{share} of compares miscompared"
    );
}

#[test]
fn batching_submits_once_per_batch() {
    let (v, out) = json_run(&["-w", "copy", "-o", "512", "-q", "256", "-b", "64"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let transfers = v["total"]["transfers"].as_u64().unwrap();
    let batches = v["module"]["batches"].as_u64().unwrap();
    assert!(
        batches > 0 && batches * 60 <= transfers,
        "{batches} batches for {transfers}"
    );
    let (v0, _) = json_run(&["-w", "copy", "-o", "512", "-q", "256", "-b", "0"]);
    assert_eq!(
        v0["module"]["batches"].as_u64().unwrap(),
        v0["total"]["transfers"].as_u64().unwrap(),
        "without batching every task is its own submission"
    );
}

#[test]
fn the_table_has_a_config_block_a_core_row_and_a_total() {
    let m = mask();
    // -f takes the byte in decimal, as SPDK's does.
    let out = accel_perf(&["-m", &m, "-t", "0.3", "-w", "fill", "-f", "90"]);
    let s = text(&out.stdout);
    assert!(out.status.success(), "{s}{}", text(&out.stderr));
    assert!(s.contains("Workload Type:  fill"), "{s}");
    assert!(s.contains("Fill pattern:   0x5a"), "{s}");
    assert!(s.contains("Module:         software"), "{s}");
    let total = s.lines().find(|l| l.starts_with("Total")).expect(&s);
    assert!(total.contains("/s") && total.contains("MiB/s"), "{total}");
    let cpu = available_cpus()[0].to_string();
    assert!(
        s.lines()
            .any(|l| l.split_whitespace().next() == Some(cpu.as_str())),
        "no row for core {cpu}: {s}"
    );
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    let m = mask();
    for (args, needle) in [
        (
            vec!["-w", "copy", "-q", "64", "-a", "8"],
            "below the queue depth",
        ),
        (vec!["-w", "copy", "-M", "nosuch"], "unknown accel module"),
        (vec!["-w", "move"], "invalid value"),
        (vec!["-w", "copy", "-o", "0"], "transfer size"),
        (vec!["-w", "copy", "-t", "0"], "run time"),
    ] {
        let mut all = vec!["-m", m.as_str()];
        all.extend(args.iter());
        let out = accel_perf(&all);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(needle),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn the_ceiling_is_the_plain_loop_over_the_same_buffers() {
    let (v, out) = json_run(&["-w", "copy", "-o", "4096", "--ceiling"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let c = &v["ceiling"];
    let ops = c["ops_per_s"].as_f64().expect("ceiling ops_per_s");
    assert!(ops > 1000.0, "{c}");
    let ratio = c["ratio"].as_f64().unwrap();
    let want = v["total"]["ops_per_s"].as_f64().unwrap() / ops;
    assert!((ratio - want).abs() < 1e-9, "{ratio} vs {want}");
    let (v, _) = json_run(&["-w", "copy"]);
    assert!(v["ceiling"].is_null(), "no ceiling unless asked: {v}");
}
