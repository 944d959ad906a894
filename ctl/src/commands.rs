//! Runs a parsed command: calls the engine and prints the answer as a table
//! or as JSON, including the `stats io --watch` loop; `completions` answers
//! without the engine.
//!
//! Thread: the CLI's main thread, inside its single-threaded tokio runtime.

use std::io::Write;
use std::time::Duration;

use serde::Serialize;
use tokio::time::{Instant, MissedTickBehavior};

use clap_complete::Shell;
use io_engine_api::v1::RunPerfRequest;

use crate::cli::{
    AccelCommand, BdevCommand, Cli, Command, ConfigCommand, EngineCommand, ExportCommand, IoArgs,
    OutputFormat, PerfArgs, PerfCommand, StatsCommand,
};
use crate::client::Client;
use crate::config_dump::ConfigDump;
use crate::error::CtlError;
use crate::host_secrets;
use crate::rate::interval_rates;
use crate::render;

/// Runs `cli.command` and writes its result to `out`; every command but
/// `completions` asks the engine.
pub(crate) async fn execute(cli: &Cli, out: &mut impl Write) -> Result<(), CtlError> {
    if let Command::Completions { shell } = &cli.command {
        return completions(*shell, out);
    }
    let mut client = Client::connect(&cli.endpoint, &cli.tls, cli.timeout).await?;
    let mut printer = Printer {
        format: cli.output,
        headers: !cli.no_headers,
        out,
    };
    let headers = printer.headers;
    match &cli.command {
        Command::Completions { .. } => unreachable!("answered without the engine"),
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
                printer.show(&r, || render::bdev_list(&r.bdevs, headers))
            }
            BdevCommand::Share {
                name,
                protocol,
                allowed_hosts,
                dhchap_secrets,
                dhchap_ctrl_secrets,
                nqn,
                read_only,
            } => {
                let secrets = host_secrets::read(dhchap_secrets, dhchap_ctrl_secrets)?;
                let e = client
                    .share(
                        name,
                        protocol,
                        *read_only,
                        allowed_hosts,
                        secrets,
                        nqn.as_deref(),
                    )
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
                printer.show(&r, || render::accel_modules(&r, headers))
            }
            AccelCommand::Assignments => {
                let r = client.accel_assignments().await?;
                printer.show(&r, || render::accel_assignments(&r, headers))
            }
            AccelCommand::Stats => {
                let r = client.accel_stats().await?;
                printer.show(&r, || render::accel_stats(&r, headers))
            }
        },
        Command::Export(ExportCommand::List) => {
            let r = client.list_exports().await?;
            printer.show(&r, || render::export_list(&r.exports, headers))
        }
        Command::Stats(cmd) => match cmd {
            StatsCommand::Io(IoArgs {
                name,
                watch: None,
                count: _,
            }) => {
                let r = client.io_stats(name.as_deref()).await?;
                printer.show(&r, || render::io_stats(&r, headers))
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
                printer.show(&r, || render::reactor_stats(&r, headers))
            }
            StatsCommand::Pools => {
                let r = client.pool_stats().await?;
                printer.show(&r, || render::pool_stats(&r, headers))
            }
            StatsCommand::Reset { name } => {
                let r = client.reset_io_stats(name.as_deref()).await?;
                printer.show(&r, || match name {
                    Some(name) => format!("reset the IO counters of device {name:?}\n"),
                    None => "reset the IO counters of every device\n".to_owned(),
                })
            }
        },
        Command::Perf(PerfCommand::Run(args)) => {
            let r = client.run_perf(perf_request(args)).await?;
            printer.show(&r, || render::perf(&r, headers))
        }
        Command::Config(ConfigCommand::Dump) => {
            let bdevs = client.list_bdevs().await?.bdevs;
            let exports = client.list_exports().await?.exports;
            let dump = ConfigDump::new(&bdevs, &exports);
            printer.show(&dump, || dump.to_toml(&cli.endpoint.url))
        }
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
                // Intervals are apart by a blank line, unless bare rows.
                let separator = if done == 0 || !printer.headers {
                    ""
                } else {
                    "\n"
                };
                let table = render::io_rates(&rates, printer.headers);
                printer.write(&format!("{separator}{table}"))
            }
        }?;
        before = after;
        done += 1;
    }
    Ok(())
}

/// `completions SHELL`: the completion script of the whole command tree.
fn completions(shell: Shell, out: &mut impl Write) -> Result<(), CtlError> {
    out.write_all(&crate::completions::script(shell))
        .and_then(|()| out.flush())
        .map_err(CtlError::Output)
}

/// The `PerfService.Run` request of `perf run`: unset values are the
/// API's zero values, which take the engine's defaults.
fn perf_request(args: &PerfArgs) -> RunPerfRequest {
    RunPerfRequest {
        bdevs: args.bdevs.clone(),
        workload: args.workload.clone(),
        io_size: args.io_size.unwrap_or(0),
        queue_depth: args.queue_depth.unwrap_or(0),
        read_percent: args.read_percent,
        verify: args.verify,
        seconds: args.time.as_secs_f64(),
        cores: args.cores(),
    }
}

/// Writes results in the chosen format.
struct Printer<'a, W: Write> {
    format: OutputFormat,
    /// Tables with their header lines (no `--no-headers`).
    headers: bool,
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
