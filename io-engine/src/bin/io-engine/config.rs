//! `--config FILE`: the daemon's flags from a TOML file.
//!
//! Thread: `main`, before logging or anything else starts.
//!
//! One generic mechanism, so that a flag added to `Args` is a config key
//! with no change here: each top-level key is the long name of a flag
//! (`reactor-mask`, `poll-mode`, `bdev`, `share`), and its value is what the
//! flag takes (a string, number or boolean; an array for a repeatable flag;
//! `true` for a switch). The file's values become command-line arguments
//! for the flags that neither the command line nor the environment set, so
//! the precedence is flag > environment variable > file > default, and a
//! list (`bdev`, `share`) given by a flag or variable replaces the file's
//! list instead of adding to it. A file key is also left out when a flag it
//! conflicts with is set (a file's `core-list` gives way to `-m`).
//!
//! Errors are one line naming the file and the key: an unknown key, a
//! value of the wrong shape, a value the flag refuses, a file that cannot
//! be read or is not TOML. The daemon then exits with status 2.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};

/// The id and long name of the option naming the file.
const CONFIG: &str = "config";

/// Its environment variable.
const CONFIG_ENV: &str = "IO_ENGINE_CONFIG";

/// Parses the process's arguments into `T`, with the values of the
/// `--config` file (or `IO_ENGINE_CONFIG`) for the flags not set otherwise.
pub fn parse<T: clap::Parser>() -> Result<T, clap::Error> {
    parse_from(std::env::args_os())
}

/// [`parse`] of the given arguments (the first is the program name).
pub fn parse_from<T, I>(args: I) -> Result<T, clap::Error>
where
    T: clap::Parser,
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let cmd = command::<T>();
    let mut argv: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let matches = cmd.clone().try_get_matches_from(&argv)?;
    let Some(path) = matches.get_one::<PathBuf>(CONFIG).cloned() else {
        return T::from_arg_matches(&matches);
    };
    let fail = |kind: ErrorKind, msg: String| {
        clap::Error::raw(kind, format!("config {}: {msg}", path.display()))
    };
    let table = read(&path).map_err(|msg| fail(ErrorKind::Io, msg))?;
    let extra =
        file_args(&cmd, &matches, &table).map_err(|msg| fail(ErrorKind::UnknownArgument, msg))?;
    argv.extend(extra);
    // The arguments alone parsed, so an error now comes from the file.
    let matches = cmd
        .try_get_matches_from(&argv)
        .map_err(|e| fail(e.kind(), first_line(&e)))?;
    T::from_arg_matches(&matches)
}

/// `T`'s command with the `--config` option added.
fn command<T: clap::CommandFactory>() -> Command {
    T::command().arg(
        Arg::new(CONFIG)
            .long(CONFIG)
            .env(CONFIG_ENV)
            .value_name("FILE")
            .value_parser(clap::value_parser!(PathBuf))
            .help(
                "TOML file of flags: each key a long flag name (poll-mode = \"adaptive\", \
                 bdev = [\"malloc:///m0?size_mb=64\"]); flags and environment variables \
                 take precedence over it",
            ),
    )
}

/// The file as a TOML table, or one line saying why not.
fn read(path: &Path) -> Result<toml::Table, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    text.parse::<toml::Table>().map_err(|e| {
        let message = e.message().trim().replace('\n', "; ");
        match e.span() {
            Some(span) => {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!("not TOML: line {line}, column {column}: {message}")
            }
            None => format!("not TOML: {message}"),
        }
    })
}

/// The command-line arguments that carry the file's values, for the flags
/// not set by `matches` (nor in conflict with a flag that is).
fn file_args(
    cmd: &Command,
    matches: &ArgMatches,
    table: &toml::Table,
) -> Result<Vec<OsString>, String> {
    let mut out = Vec::new();
    let set = |id: &str| {
        matches!(
            matches.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    };
    for (key, value) in table {
        let Some(arg) = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()))
        else {
            return Err(format!(
                "unknown key `{key}` (the keys are the daemon's long flags: io-engine --help)"
            ));
        };
        if arg.get_id() == CONFIG {
            return Err(format!("`{key}` cannot be set inside a config file"));
        }
        let flag = format!("--{key}");
        let values = flag_values(arg, value).map_err(|why| format!("`{key}`: {why}"))?;
        if set(arg.get_id().as_str()) || conflicts(cmd, arg).iter().any(|id| set(id)) {
            continue;
        }
        for v in values {
            out.push(match v {
                Some(v) => OsString::from(format!("{flag}={v}")),
                None => OsString::from(&flag),
            });
        }
    }
    Ok(out)
}

/// What one key's value becomes: a `--flag=VALUE` (`Some`) or a bare
/// `--flag` (`None`) per element.
fn flag_values(arg: &Arg, value: &toml::Value) -> Result<Vec<Option<String>>, String> {
    match arg.get_action() {
        ArgAction::Set => Ok(vec![Some(scalar(value)?)]),
        ArgAction::Append => match value {
            toml::Value::Array(items) => items.iter().map(|v| scalar(v).map(Some)).collect(),
            v => Ok(vec![Some(scalar(v)?)]),
        },
        ArgAction::SetTrue | ArgAction::SetFalse => {
            let on = value
                .as_bool()
                .ok_or_else(|| format!("expected true or false, found {}", value.type_str()))?;
            let wanted = matches!(arg.get_action(), ArgAction::SetTrue);
            Ok(if on == wanted { vec![None] } else { vec![] })
        }
        ArgAction::Count => {
            let n = value
                .as_integer()
                .and_then(|n| u8::try_from(n).ok())
                .ok_or_else(|| format!("expected a count of 0 to 255, found {value:?}"))?;
            Ok(vec![None; n as usize])
        }
        _ => Err("cannot be set in a config file".into()),
    }
}

/// A single value as the flag would take it on the command line.
fn scalar(value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(n) => Ok(n.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        v => Err(format!("expected one value, found {}", v.type_str())),
    }
}

/// The ids of the arguments `arg` conflicts with, in either direction
/// (clap records a conflict on one side only).
fn conflicts(cmd: &Command, arg: &Arg) -> BTreeSet<String> {
    let mut ids: BTreeSet<String> = cmd
        .get_arg_conflicts_with(arg)
        .iter()
        .map(|a| a.get_id().to_string())
        .collect();
    for other in cmd.get_arguments() {
        if cmd
            .get_arg_conflicts_with(other)
            .iter()
            .any(|a| a.get_id() == arg.get_id())
        {
            ids.insert(other.get_id().to_string());
        }
    }
    ids
}

/// The message of a clap error on one line, without its `error: ` prefix.
fn first_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let line = text.lines().next().unwrap_or("invalid value");
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The shapes of flag the daemon has, and a switch it will have.
    #[derive(Parser, Debug)]
    struct Flags {
        #[arg(short = 'm', long, conflicts_with = "core_list")]
        reactor_mask: Option<String>,
        #[arg(short = 'l', long)]
        core_list: Option<String>,
        #[arg(long, default_value_t = 512)]
        io_pool_cache: usize,
        #[arg(long = "bdev", value_delimiter = ',')]
        bdevs: Vec<String>,
        #[arg(long)]
        ioat: bool,
        #[arg(long, default_value = "busy")]
        poll_mode: String,
    }

    fn with_file(text: &str, args: &[&str]) -> Result<Flags, clap::Error> {
        let dir = std::env::temp_dir().join(format!(
            "io-engine-config-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("engine.toml");
        std::fs::write(&path, text).unwrap();
        let mut argv = vec![
            "io-engine".to_string(),
            format!("--config={}", path.display()),
        ];
        argv.extend(args.iter().map(|a| a.to_string()));
        let parsed = parse_from::<Flags, _>(argv);
        let _ = std::fs::remove_dir_all(&dir);
        parsed
    }

    fn message(e: clap::Error) -> String {
        first_line(&e)
    }

    #[test]
    fn the_file_fills_flags_the_command_line_leaves_unset() {
        let f = with_file(
            "core-list = \"0\"\nio-pool-cache = 7\nbdev = [\"null:///a\", \"null:///b\"]\nioat = true\n",
            &[],
        )
        .unwrap();
        assert_eq!(f.core_list.as_deref(), Some("0"));
        assert_eq!(f.io_pool_cache, 7);
        assert_eq!(f.bdevs, ["null:///a", "null:///b"]);
        assert!(f.ioat);
        assert_eq!(
            f.poll_mode, "busy",
            "a key the file lacks keeps its default"
        );
    }

    #[test]
    fn the_command_line_wins_and_its_lists_replace_the_files() {
        let f = with_file(
            "io-pool-cache = 7\nbdev = [\"null:///a\"]\ncore-list = \"0\"\nioat = false\n",
            &[
                "--io-pool-cache",
                "9",
                "--bdev",
                "null:///c",
                "-m",
                "0x1",
                "--ioat",
            ],
        )
        .unwrap();
        assert_eq!(f.io_pool_cache, 9);
        assert_eq!(f.bdevs, ["null:///c"]);
        // The file's core-list gives way to -m instead of conflicting.
        assert_eq!(f.reactor_mask.as_deref(), Some("0x1"));
        assert_eq!(f.core_list, None);
        assert!(f.ioat, "a false in the file does not undo a switch given");
    }

    #[test]
    fn a_single_value_for_a_list_is_one_element() {
        let f = with_file("bdev = \"null:///a\"\n", &[]).unwrap();
        assert_eq!(f.bdevs, ["null:///a"]);
    }

    #[test]
    fn bad_files_name_the_file_and_the_key() {
        let cases = [
            ("frobnicate = 1\n", "unknown key `frobnicate`"),
            ("ioat = \"yes\"\n", "`ioat`: expected true or false"),
            (
                "core-list = [\"0\", \"1\"]\n",
                "`core-list`: expected one value, found array",
            ),
            (
                "poll-mode = { a = 1 }\n",
                "`poll-mode`: expected one value, found table",
            ),
            ("io-pool-cache = \"many\"\n", "'many'"),
            (
                "core-list = \"0\"\nreactor-mask = \"0x1\"\n",
                "cannot be used with",
            ),
            (
                "config = \"other.toml\"\n",
                "`config` cannot be set inside a config file",
            ),
            ("help = true\n", "unknown key `help`"),
            ("core-list = \n", "not TOML: line 1, column"),
        ];
        for (text, expected) in cases {
            let e = with_file(text, &[]).expect_err(text);
            let line = message(e);
            assert!(
                line.starts_with("config ") && line.contains("engine.toml: "),
                "{text:?}: {line}"
            );
            assert!(
                line.contains(expected),
                "{text:?}: {line:?} lacks {expected:?}"
            );
        }
    }

    #[test]
    fn a_missing_file_is_one_line() {
        let e = parse_from::<Flags, _>(["io-engine", "--config", "/nonexistent/engine.toml"])
            .expect_err("no such file");
        let line = message(e);
        assert!(
            line.starts_with("config /nonexistent/engine.toml: cannot read: "),
            "{line}"
        );
    }

    #[test]
    fn every_daemon_flag_is_a_config_key() {
        // The real flags: a flag added to Args is a key with no change here.
        let cmd = command::<crate::Args>();
        let matches = cmd.clone().try_get_matches_from(["io-engine"]).unwrap();
        let mut keys = 0;
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if matches!(
                arg.get_action(),
                ArgAction::Help | ArgAction::Version | ArgAction::HelpLong | ArgAction::HelpShort
            ) || long == CONFIG
            {
                continue;
            }
            let value = match arg.get_action() {
                ArgAction::SetTrue | ArgAction::SetFalse => {
                    toml::Value::Boolean(matches!(arg.get_action(), ArgAction::SetTrue))
                }
                ArgAction::Count => toml::Value::Integer(1),
                _ => toml::Value::String("x".into()),
            };
            let mut table = toml::Table::new();
            table.insert(long.to_string(), value);
            let args = file_args(&cmd, &matches, &table).unwrap_or_else(|e| panic!("{long}: {e}"));
            assert_eq!(args.len(), 1, "{long}: {args:?}");
            assert!(
                args[0].to_string_lossy().starts_with(&format!("--{long}")),
                "{long}: {args:?}"
            );
            keys += 1;
        }
        assert!(keys >= 13, "only {keys} keys");
    }
}
