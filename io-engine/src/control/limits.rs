//! [`Limits`]: the control plane's bounds, so that a flood of requests
//! cannot take the control-plane runtime (shared with the metrics endpoint)
//! or the blocking pool (where device memory is mapped) from everyone else:
//! how many gRPC requests run at once, how large a request may be, and how
//! long one may run. They are daemon flags (`--grpc-max-concurrent-requests`,
//! `--grpc-max-request-bytes`, `--grpc-request-timeout`); `RequestLimit`
//! keeps the first and the last, the services' decoders the second.
//!
//! Thread: the thread that builds the server (read only once it runs).

use std::time::Duration;

/// The control plane's bounds (daemon flags).
#[derive(Debug, Clone, clap::Args)]
pub struct Limits {
    /// gRPC requests served at once, over all connections; one more is
    /// refused at once with RESOURCE_EXHAUSTED (health checks are neither
    /// counted nor refused).
    #[arg(
        long = "grpc-max-concurrent-requests",
        env = "IO_ENGINE_GRPC_MAX_CONCURRENT_REQUESTS",
        value_name = "N",
        default_value_t = Limits::DEFAULT.max_concurrent_requests,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_concurrent_requests: u32,

    /// Largest gRPC request message, in bytes; a larger one is refused with
    /// OUT_OF_RANGE before it is decoded.
    #[arg(
        long = "grpc-max-request-bytes",
        env = "IO_ENGINE_GRPC_MAX_REQUEST_BYTES",
        value_name = "BYTES",
        default_value_t = Limits::DEFAULT.max_request_bytes,
        value_parser = clap::value_parser!(u32).range(1024..)
    )]
    pub max_request_bytes: u32,

    /// Longest a gRPC request may run, in seconds; one still running then
    /// gets DEADLINE_EXCEEDED, while its handler finishes in the background
    /// and keeps its place (a device being created may still be). A perf
    /// run is bounded by its own run time instead.
    #[arg(
        long = "grpc-request-timeout",
        env = "IO_ENGINE_GRPC_REQUEST_TIMEOUT",
        value_name = "SECS",
        default_value_t = Limits::DEFAULT.request_timeout_secs,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub request_timeout_secs: u32,
}

impl Limits {
    /// The defaults: 64 requests at once, 4 MiB requests (gRPC's usual
    /// default), 30 s per request.
    pub const DEFAULT: Limits = Limits {
        max_concurrent_requests: 64,
        max_request_bytes: 4 << 20,
        request_timeout_secs: 30,
    };

    /// The per-request timeout.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs.into())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}
