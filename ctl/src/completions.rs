//! `completions SHELL`: the shell completion script of the command tree, as
//! clap_complete writes it, with its bash script mended for a binary name
//! that has hyphens.
//!
//! clap_complete (4.6.12, the newest release; clap-rs/clap#6421) spells the
//! state of a bash completion in two ways: the loop over the typed words
//! builds `io__engine__ctl__subcmd__bdev` (each `-` of the binary name
//! becomes `__`), but the `case` arms that complete each subcommand are
//! labelled `io__subcmd__engine__subcmd__ctl__subcmd__bdev` (the `-`s of the
//! binary name become the subcommand separator). No arm matches after the
//! first word, so bash completes nothing there and falls back to file
//! names (`complete -o default`). The arms are renamed to the loop's
//! spelling; once clap_complete writes them so, there is nothing to
//! rename. zsh's and fish's scripts keep the name as it is and need no
//! mending.
//!
//! Thread: the CLI's main thread (no engine is asked).

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// The name the scripts complete: the binary's.
pub(crate) const BIN_NAME: &str = "io-engine-ctl";

/// The completion script for `shell`.
pub(crate) fn script(shell: Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), BIN_NAME, &mut script);
    if shell == Shell::Bash {
        mend_bash(&String::from_utf8_lossy(&script), BIN_NAME).into_bytes()
    } else {
        script
    }
}

/// Renames the `case` arms of a clap_complete bash script for `bin` to the
/// state names its word loop builds (see the module's comment).
fn mend_bash(script: &str, bin: &str) -> String {
    if !bin.contains('-') {
        return script.to_owned();
    }
    // The separator clap_complete puts between a command and its subcommand.
    const CMD_SEP: &str = "__subcmd__";
    let misspelt = bin.replace('-', CMD_SEP);
    let loop_spelling = bin.replace('-', "__");
    script.replace(&misspelt, &loop_spelling)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bash_script() -> String {
        String::from_utf8(script(Shell::Bash)).expect("UTF-8")
    }

    #[test]
    fn every_bash_state_the_loop_builds_has_its_arm() {
        let text = bash_script();
        // States the loop sets: `cmd="STATE"`; arms: `        STATE)`.
        let states: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("cmd=\"")?.strip_suffix('"'))
            .filter(|s| !s.is_empty())
            .collect();
        assert!(
            states.contains(&"io__engine__ctl__subcmd__perf__subcmd__run"),
            "{states:?}"
        );
        for state in &states {
            assert!(
                text.lines().any(|l| l.trim() == format!("{state})")),
                "no arm for {state}"
            );
        }
        assert!(
            !text.contains("io__subcmd__engine"),
            "a misspelt arm is left"
        );
    }

    #[test]
    fn names_without_hyphens_are_left_alone() {
        let text = "x__subcmd__y)\n";
        assert_eq!(mend_bash(text, "ctl"), text);
        assert_eq!(
            mend_bash("a__subcmd__b__subcmd__c__subcmd__bdev)", "a-b-c"),
            "a__b__c__subcmd__bdev)"
        );
    }
}
