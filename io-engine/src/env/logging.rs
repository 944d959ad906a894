//! Logging set-up for the binaries: tracing-subscriber's formatter on
//! stderr, filtered by `RUST_LOG` (or a default level), colours only on a
//! terminal, text or JSON lines.
//!
//! Thread: the main thread, once, before any other thread starts.

/// Installs the process's tracing subscriber. `default_level` applies when
/// `RUST_LOG` is unset or invalid (`"info"` for the daemon, `"warn"` for
/// the benchmarks; rustls's events from `error` only); `json` writes one
/// JSON object per event.
pub fn init(default_level: &str, json: bool) {
    // rustls's own warnings stay out of the default: it warns about what
    // clients send that it ignores anyway (libnbd's IP address as SNI, on
    // every NBD TLS connection by address); the engine logs its TLS
    // failures itself.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{default_level},rustls=error"))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
