//! `io-engine-ctl completions SHELL` with the built binary: the scripts
//! need no engine; bash's is sourced by a real bash, which then completes
//! the command; zsh's and fish's name the subcommands.
//!
//! Thread: the test threads (each runs the binary as a child process).

use std::process::{Command, Output};

/// The script for `shell`, asserting the binary succeeded without an engine
/// (the endpoint names a port nothing listens on).
fn script(shell: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_io-engine-ctl"))
        .args(["--endpoint", "127.0.0.1:1", "completions", shell])
        .output()
        .expect("the binary runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{shell}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "{shell}: {:?}", out.stderr);
    String::from_utf8(out.stdout).expect("UTF-8 script")
}

/// Runs `script` in a bash without startup files, after sourcing the
/// completion script.
fn bash(script: &str) -> Output {
    let bin = env!("CARGO_BIN_EXE_io-engine-ctl");
    Command::new("bash")
        .args([
            "--norc",
            "-c",
            &format!("source <('{bin}' completions bash) && {script}"),
        ])
        .output()
        .expect("bash runs")
}

#[test]
fn bash_sources_the_script_and_registers_the_completion() {
    let out = bash("complete -p io-engine-ctl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("io-engine-ctl"), "{stdout}");
}

#[test]
fn bash_completes_the_subcommands() {
    // What bash would offer after `io-engine-ctl ` (COMP_WORDS as typed).
    let out = bash(
        "COMP_WORDS=(io-engine-ctl '') COMP_CWORD=1 COMP_LINE='io-engine-ctl ' COMP_POINT=14\n\
         f=$(complete -p io-engine-ctl | sed -E 's/.*-F ([^ ]+).*/\\1/')\n\
         \"$f\" io-engine-ctl '' io-engine-ctl\n\
         printf '%s\\n' \"${COMPREPLY[@]}\"",
    );
    let words = String::from_utf8_lossy(&out.stdout);
    for sub in ["bdev", "perf", "config", "completions", "export", "stats"] {
        assert!(
            words.lines().any(|w| w == sub),
            "{sub} not offered: {words}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// What bash offers at the end of `line` (typed after the prompt, words
/// split at spaces as bash splits these): the completion function is called
/// as bash calls it, with COMP_WORDS, COMP_CWORD, COMP_LINE and COMP_POINT
/// set, and its COMPREPLY is returned. An empty answer is what makes bash
/// fall back to file names.
fn complete(line: &str) -> Vec<String> {
    let mut words: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
    if line.ends_with(' ') {
        words.push("");
    }
    let cword = words.len() - 1;
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let (cur, prev) = (quoted[cword].clone(), quoted[cword - 1].clone());
    let out = bash(&format!(
        "COMP_WORDS=({words}) COMP_CWORD={cword} COMP_LINE='{line}' COMP_POINT={point}\n\
         f=$(complete -p io-engine-ctl | sed -E 's/.*-F ([^ ]+).*/\\1/')\n\
         \"$f\" io-engine-ctl {cur} {prev}\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words = quoted.join(" "),
        point = line.len(),
    ));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{line:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Asserts that completing `line` offers every word of `expected`.
fn offers(line: &str, expected: &[&str]) {
    let words = complete(line);
    for w in expected {
        assert!(
            words.iter().any(|o| o == w),
            "{line:?} does not offer {w}: {words:?}"
        );
    }
}

#[test]
fn bash_completes_after_the_first_word() {
    offers(
        "io-engine-ctl bdev ",
        &["create", "destroy", "get", "list", "share", "unshare"],
    );
    offers(
        "io-engine-ctl stats ",
        &["io", "reactors", "pools", "reset"],
    );
    offers("io-engine-ctl perf ", &["run"]);
    // Global options before the command do not lose the way.
    offers("io-engine-ctl --output json accel ", &["modules", "stats"]);
    // Only the subcommands, no options, when nothing is typed: the words
    // offered are the command's and nothing else.
    let bdev = complete("io-engine-ctl bdev ");
    assert!(bdev.iter().all(|w| !w.contains('/')), "{bdev:?}");
}

#[test]
fn bash_completes_a_subcommands_options_and_values() {
    offers(
        "io-engine-ctl perf run --",
        &[
            "--io-size",
            "--queue-depth",
            "--workload",
            "--rw-mix-read",
            "--time",
            "--verify",
            "--core-list",
            "--reactor-mask",
            "--output",
        ],
    );
    let short = complete("io-engine-ctl perf run -");
    assert!(short.iter().any(|w| w == "-o"), "{short:?}");
    // A nested level and a value: `bdev share NAME --protocol <TAB>`.
    assert_eq!(
        complete("io-engine-ctl bdev share m0 --protocol "),
        ["nbd", "nvmf"]
    );
    offers(
        "io-engine-ctl bdev share m0 --",
        &["--protocol", "--allowed-host", "--read-only", "--nqn"],
    );
    assert_eq!(
        complete("io-engine-ctl perf run m0 --output "),
        ["table", "json"]
    );
    offers("io-engine-ctl stats io --", &["--watch", "--count"]);
    // Values that are not files complete as nothing, not as the file
    // names of the current directory (a crate here: Cargo.toml, src).
    for line in [
        "io-engine-ctl --endpoint ",
        "io-engine-ctl --timeout ",
        "io-engine-ctl --tls-server-name ",
        "io-engine-ctl perf run m0 -o ",
        "io-engine-ctl stats io --watch ",
    ] {
        let words = complete(line);
        assert!(
            words.iter().all(|w| w != "Cargo.toml" && w != "src"),
            "{line:?} offers files: {words:?}"
        );
    }
    // Files where a file is meant.
    let ca = complete("io-engine-ctl --tls-ca ");
    assert!(ca.iter().any(|w| w == "Cargo.toml"), "{ca:?}");
}

#[test]
fn zsh_and_fish_scripts_name_the_subcommands() {
    for shell in ["zsh", "fish"] {
        let text = script(shell);
        for sub in ["bdev", "perf", "config", "export", "no-headers"] {
            assert!(text.contains(sub), "{shell}: no {sub}");
        }
    }
    assert!(script("zsh").starts_with("#compdef io-engine-ctl"));
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_io-engine-ctl"))
        .args(["completions", "tcsh"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2));
}
