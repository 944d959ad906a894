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
