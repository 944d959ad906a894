//! io-engine-ctl: the command-line client of the engine's gRPC API. The
//! binary (`src/main.rs`) only calls [`run`]; the modules are private and
//! unit-tested here.
//!
//! Thread: the CLI's main thread, which parses the command line and then
//! runs the command on a single-threaded tokio runtime.

mod cli;
mod client;
mod client_tls;
mod commands;
mod completions;
mod config_dump;
mod error;
mod format;
mod host_secrets;
mod rate;
mod render;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

use crate::cli::Cli;
use crate::error::CtlError;

/// Exit status when the engine answered with an error or could not be used.
const EXIT_FAILURE: u8 = 1;

/// Parses the process's arguments, runs the command and returns the exit
/// status: 0 on success, 1 on an error from or about the engine, 2 on a usage
/// error. Errors are reported as one line on stderr.
pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    if let Err(message) = cli.check_tls() {
        return usage_error(&Cli::command().error(ErrorKind::ArgumentConflict, message));
    }
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CtlError::Runtime)
        .and_then(|runtime| runtime.block_on(commands::execute(&cli, &mut io::stdout().lock())));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`| head`) is the reader being done, not an error.
        Err(CtlError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            report(&e.to_string());
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// Handles a clap error: help and version are printed as clap formats them;
/// real usage errors become one line. Returns clap's exit status (0 or 2).
fn usage_error(e: &clap::Error) -> ExitCode {
    let status = u8::try_from(e.exit_code()).unwrap_or(EXIT_FAILURE);
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // Nothing useful is left to do if the terminal is gone.
            let _ = e.print();
        }
        _ => report(&one_line(&e.render().to_string())),
    }
    ExitCode::from(status)
}

/// Prints `io-engine-ctl: error: <message>` on stderr.
fn report(message: &str) {
    let _ = writeln!(io::stderr(), "io-engine-ctl: error: {message}");
}

/// Folds clap's multi-line error text into one line: the message (without
/// its `error: ` prefix), then the usage line and the pointer to `--help`.
fn one_line(text: &str) -> String {
    let mut message = Vec::new();
    let mut usage = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(u) = line.strip_prefix("Usage: ") {
            usage.get_or_insert(u);
        } else if !line.starts_with("For more information") && !line.starts_with("tip: ") {
            message.push(line.strip_prefix("error: ").unwrap_or(line));
        }
    }
    let mut line = message.join(" ");
    if let Some(usage) = usage {
        line.push_str(&format!(" (usage: {usage}; see --help)"));
    }
    line
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn clap_error(args: &[&str]) -> String {
        let e = Cli::command()
            .try_get_matches_from(std::iter::once("io-engine-ctl").chain(args.iter().copied()))
            .expect_err("a usage error");
        one_line(&e.render().to_string())
    }

    #[test]
    fn usage_errors_fold_into_one_line() {
        assert_eq!(
            clap_error(&["bdev", "create"]),
            "the following required arguments were not provided: <URI> \
             (usage: io-engine-ctl bdev create <URI>; see --help)"
        );
        let text = clap_error(&["stats", "io", "--watch", "0"]);
        assert!(!text.contains('\n'), "{text}");
        assert!(
            text.starts_with("invalid value '0' for '--watch <SECONDS>': \"0\" is not a number"),
            "{text}"
        );
    }

    #[test]
    fn tips_are_dropped() {
        let text = clap_error(&["bdev", "lst"]);
        assert!(text.starts_with("unrecognized subcommand 'lst'"), "{text}");
        assert!(!text.contains("tip:"), "{text}");
    }
}
