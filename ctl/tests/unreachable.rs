//! The built `io-engine-ctl` binary without a working engine: nothing
//! listening, a listener that never answers, usage errors and `--help`.
//!
//! Thread: the test harness's threads, each running the binary as a child
//! process.

use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The binary with no `IO_ENGINE_*` variables from the caller's environment.
fn ctl() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_io-engine-ctl"));
    for var in [
        "IO_ENGINE_ENDPOINT",
        "IO_ENGINE_OUTPUT",
        "IO_ENGINE_TIMEOUT",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("the binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("UTF-8 stderr")
}

/// Asserts `out` failed with `code` and exactly one `io-engine-ctl: error:`
/// line on stderr and nothing on stdout; returns the message.
fn one_line_error(out: &Output, code: i32) -> String {
    assert_eq!(out.status.code(), Some(code), "stderr: {}", stderr(out));
    assert!(out.stdout.is_empty(), "stdout: {:?}", out.stdout);
    let err = stderr(out);
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.ends_with('\n'), "{err:?}");
    err.strip_prefix("io-engine-ctl: error: ")
        .unwrap_or_else(|| panic!("prefix: {err:?}"))
        .trim_end()
        .to_owned()
}

#[test]
fn nothing_listening_is_exit_1_naming_the_endpoint() {
    for args in [
        &["bdev", "list"][..],
        &["bdev", "get", "m0"],
        &["stats", "io", "--watch", "0.1"],
        &["engine", "info"],
    ] {
        let out = run(ctl().args(["--endpoint", "http://127.0.0.1:1"]).args(args));
        let msg = one_line_error(&out, 1);
        assert!(
            msg.starts_with("cannot reach the engine at http://127.0.0.1:1: "),
            "{args:?}: {msg}"
        );
        assert!(msg.contains("refused"), "{args:?}: {msg}");
        assert!(
            msg.contains("daemon runs") && msg.contains("--endpoint (or IO_ENGINE_ENDPOINT)"),
            "{args:?}: {msg}"
        );
    }
}

#[test]
fn the_endpoint_comes_from_the_environment() {
    let out = run(ctl()
        .env("IO_ENGINE_ENDPOINT", "127.0.0.1:1")
        .args(["stats", "reactors"]));
    let msg = one_line_error(&out, 1);
    assert!(
        msg.starts_with("cannot reach the engine at http://127.0.0.1:1: "),
        "{msg}"
    );
    // The option wins over the variable.
    let out = run(ctl().env("IO_ENGINE_ENDPOINT", "http://127.0.0.1:2").args([
        "--endpoint",
        "http://127.0.0.1:1",
        "stats",
        "pools",
    ]));
    let msg = one_line_error(&out, 1);
    assert!(msg.contains("http://127.0.0.1:1:"), "{msg}");
}

#[test]
fn a_silent_engine_times_out_instead_of_hanging() {
    // Bound and listening, so the TCP connection succeeds, but nobody ever
    // reads or answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let start = Instant::now();
    let out = run(ctl().args(["--endpoint", &url, "--timeout", "0.3", "bdev", "list"]));
    let elapsed = start.elapsed();
    let msg = one_line_error(&out, 1);
    assert_eq!(
        msg,
        format!("the engine at {url} did not answer BdevService.List within 0.3 s (see --timeout)")
    );
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    drop(listener);
}

#[test]
fn usage_errors_are_exit_2_on_one_line() {
    let cases: [(&[&str], &str); 7] = [
        (
            &["bdev", "create"],
            "the following required arguments were not provided: <URI>",
        ),
        (
            &["bdev", "list", "--output", "yaml"],
            "invalid value 'yaml' for '--output <FORMAT>'",
        ),
        (
            &["stats", "io", "--watch", "0"],
            "invalid value '0' for '--watch <SECONDS>'",
        ),
        (
            &["stats", "io", "--count", "2"],
            "the following required arguments were not provided",
        ),
        (
            &["--endpoint", "ftp://h:1", "engine", "info"],
            "is not an http or https URL",
        ),
        (
            &["--endpoint", "https://h:1", "engine", "info"],
            "is https: give --tls-ca FILE",
        ),
        (
            &["--tls-ca", "ca.crt", "engine", "info"],
            "need an https:// endpoint",
        ),
    ];
    for (args, expected) in cases {
        let msg = one_line_error(&run(ctl().args(args)), 2);
        assert!(msg.contains(expected), "{args:?}: {msg}");
    }
}

#[test]
fn a_bad_output_format_in_the_environment_is_a_usage_error() {
    let out = run(ctl().env("IO_ENGINE_OUTPUT", "xml").args(["bdev", "list"]));
    let msg = one_line_error(&out, 2);
    assert!(msg.contains("invalid value 'xml'"), "{msg}");
}

#[test]
fn help_documents_every_command_and_option() {
    let out = run(ctl().arg("--help"));
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    for word in [
        "bdev",
        "stats",
        "engine",
        "--endpoint",
        "[env: IO_ENGINE_ENDPOINT=]",
        "[default: http://127.0.0.1:10124]",
        "--output",
        "[env: IO_ENGINE_OUTPUT=]",
        "[default: table]",
        "--timeout",
        "Exit status",
    ] {
        assert!(help.contains(word), "{word} missing from:\n{help}");
    }
    let sub_help = |args: &[&str]| {
        let out = run(ctl().args(args).arg("--help"));
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let bdev = sub_help(&["bdev"]);
    for word in ["create", "destroy", "get", "list"] {
        assert!(bdev.contains(word), "{word}:\n{bdev}");
    }
    let stats = sub_help(&["stats"]);
    for word in ["io", "reactors", "pools", "reset"] {
        assert!(stats.contains(word), "{word}:\n{stats}");
    }
    let io = sub_help(&["stats", "io"]);
    for word in ["--watch <SECONDS>", "--count <K>", "[NAME]", "Ctrl-C"] {
        assert!(io.contains(word), "{word}:\n{io}");
    }
    assert!(sub_help(&["engine"]).contains("info"));
}

#[test]
fn a_missing_subcommand_shows_help_and_exits_2() {
    let out = run(ctl().arg("stats"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("Usage: io-engine-ctl stats"),
        "{}",
        stderr(&out)
    );
}
