//! Runs a parsed command: calls the engine and prints the answer as a table
//! or as JSON, including the `stats io --watch` loop.
//!
//! Thread: the CLI's main thread, inside its single-threaded tokio runtime.

use std::io::Write;
use std::time::Duration;

use serde::Serialize;
use tokio::time::{Instant, MissedTickBehavior};

use crate::cli::{
    AccelCommand, BdevCommand, Cli, Command, EngineCommand, ExportCommand, IoArgs, OutputFormat,
    StatsCommand,
};
use crate::client::Client;
use crate::error::CtlError;
use crate::rate::interval_rates;
use crate::render;

/// Connects to the engine, runs `cli.command` and writes its result to `out`.
pub(crate) async fn execute(cli: &Cli, out: &mut impl Write) -> Result<(), CtlError> {
    let mut client = Client::connect(&cli.endpoint, cli.timeout).await?;
    let mut printer = Printer {
        format: cli.output,
        out,
    };
    match &cli.command {
        Command::Bdev(cmd) => match cmd {
            BdevCommand::Create { uri } => {
                let b = client.create_bdev(uri).await?;
                printer.show(&b, || render::bdev(&b))
            }
            BdevCommand::Destroy { name } => {
                let r = client.destroy_bdev(name).await?;
                printer.show(&r, || format!("destroyed device {name:?}\n"))
            }
            BdevCommand::Get { name } => {
                let b = client.get_bdev(name).await?;
                printer.show(&b, || render::bdev(&b))
            }
            BdevCommand::List => {
                let r = client.list_bdevs().await?;
                printer.show(&r, || render::bdev_list(&r.bdevs))
            }
            BdevCommand::Share {
                name,
                protocol,
                allowed_hosts,
                nqn,
                read_only,
            } => {
                let e = client
                    .share(name, protocol, *read_only, allowed_hosts, nqn.as_deref())
                    .await?;
                printer.show(&e, || format!("{}\n", e.uri))
            }
            BdevCommand::Unshare { name } => {
                let r = client.unshare(name).await?;
                printer.show(&r, || format!("unshared device {name:?}\n"))
            }
        },
        Command::Accel(cmd) => match cmd {
            AccelCommand::Modules => {
                let r = client.accel_modules().await?;
                printer.show(&r, || render::accel_modules(&r))
            }
            AccelCommand::Assignments => {
                let r = client.accel_assignments().await?;
                printer.show(&r, || render::accel_assignments(&r))
            }
            AccelCommand::Stats => {
                let r = client.accel_stats().await?;
                printer.show(&r, || render::accel_stats(&r))
            }
        },
        Command::Export(ExportCommand::List) => {
            let r = client.list_exports().await?;
            printer.show(&r, || render::export_list(&r.exports))
        }
        Command::Stats(cmd) => match cmd {
            StatsCommand::Io(IoArgs {
                name,
                watch: None,
                count: _,
            }) => {
                let r = client.io_stats(name.as_deref()).await?;
                printer.show(&r, || render::io_stats(&r))
            }
            StatsCommand::Io(IoArgs {
                name,
                watch: Some(period),
                count,
            }) => {
                let watching =
                    watch_io(&mut client, &mut printer, name.as_deref(), *period, *count);
                tokio::select! {
                    result = watching => result,
                    // Ctrl-C ends the watch normally, between two intervals.
                    signal = tokio::signal::ctrl_c() => signal.map_err(CtlError::Signal),
                }
            }
            StatsCommand::Reactors => {
                let r = client.reactor_stats().await?;
                printer.show(&r, || render::reactor_stats(&r))
            }
            StatsCommand::Pools => {
                let r = client.pool_stats().await?;
                printer.show(&r, || render::pool_stats(&r))
            }
            StatsCommand::Reset { name } => {
                let r = client.reset_io_stats(name.as_deref()).await?;
                printer.show(&r, || match name {
                    Some(name) => format!("reset the IO counters of device {name:?}\n"),
                    None => "reset the IO counters of every device\n".to_owned(),
                })
            }
        },
        Command::Engine(EngineCommand::Info) => {
            let e = client.engine_info().await?;
            printer.show(&e, || render::engine_info(&e))
        }
    }
}

/// Prints per-interval rates every `period`, `count` times or forever.
async fn watch_io(
    client: &mut Client,
    printer: &mut Printer<'_, impl Write>,
    name: Option<&str>,
    period: Duration,
    count: Option<u64>,
) -> Result<(), CtlError> {
    let mut before = client.io_stats(name).await?;
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    // A slow answer delays the next reading rather than bunching readings up.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut done = 0;
    while count.is_none_or(|count| done < count) {
        ticks.tick().await;
        let after = client.io_stats(name).await?;
        let rates = interval_rates(&before, &after);
        match printer.format {
            OutputFormat::Json => printer.write(&json_line(&rates)),
            OutputFormat::Table => {
                let separator = if done == 0 { "" } else { "\n" };
                printer.write(&format!("{separator}{}", render::io_rates(&rates)))
            }
        }?;
        before = after;
        done += 1;
    }
    Ok(())
}

/// Writes results in the chosen format.
struct Printer<'a, W: Write> {
    format: OutputFormat,
    out: &'a mut W,
}

impl<W: Write> Printer<'_, W> {
    /// Prints `json` (the engine's answer, or the rates of `--watch`)
    /// pretty-printed, or the table `table` makes.
    fn show(
        &mut self,
        json: &impl Serialize,
        table: impl FnOnce() -> String,
    ) -> Result<(), CtlError> {
        let text = match self.format {
            OutputFormat::Json => json_pretty(json),
            OutputFormat::Table => table(),
        };
        self.write(&text)
    }

    /// Writes and flushes, so a watch shows each interval at once.
    fn write(&mut self, text: &str) -> Result<(), CtlError> {
        self.out
            .write_all(text.as_bytes())
            .and_then(|()| self.out.flush())
            .map_err(CtlError::Output)
    }
}

/// A JSON document followed by a newline.
fn json_pretty(value: &impl Serialize) -> String {
    // The messages hold only strings, numbers, booleans, options, messages
    // and sequences, which always serialize.
    let mut text = serde_json::to_string_pretty(value).expect("messages always serialize");
    text.push('\n');
    text
}

/// A JSON document on one line, followed by a newline.
fn json_line(value: &impl Serialize) -> String {
    let mut text = serde_json::to_string(value).expect("messages always serialize");
    text.push('\n');
    text
}
