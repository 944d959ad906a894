//! The Prometheus endpoint, served by the daemon itself: the engine's device,
//! reactor, pool and build metrics in the text format 0.0.4.
//!
//! Thread: [`serve`] runs on the daemon's tokio runtime (accept loop and
//! connections as tasks; each scrape's collection on its blocking pool);
//! [`render`] runs on its caller. Neither ever runs on a reactor, and
//! neither sends reactors any work.
//!
//! Aggregate at scrape time: the data path keeps only its plain per-core
//! counters (no Prometheus object, nothing per IO beyond what the engine
//! already counts). A scrape takes `Engine::snapshot()`, the reading the
//! gRPC stats service answers from too — the engine sums each device's,
//! reactor's and pool's per-core counters with relaxed loads — and a custom
//! `prometheus` collector builds the metric families from it, which
//! a `prometheus::Registry` gathers and the `TextEncoder` writes. The
//! engine's non-cumulative latency buckets become a cumulative histogram in
//! seconds. Every operation of every device is reported, zero or not.
//!
//! A collection never panics the daemon: a part of the engine that panics
//! while read, or a reading that cannot be right, gives fewer metrics in that
//! scrape, logged. `docs/metrics.md` lists every metric.

mod collector;
mod http;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;

use crate::engine::Engine;

/// The `Content-Type` of `GET /metrics`: Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One scrape of `engine`, in the text format: what `GET /metrics` answers.
pub fn render(engine: &Engine) -> String {
    collector::Exporter::new(collector::EngineCollector::fixed(engine.snapshot())).render()
}

/// Serves the endpoint on `listener` until `shutdown` completes:
/// `GET /metrics` (the metrics, [`CONTENT_TYPE`]), `GET /` (a page pointing
/// there), 404 for any other path.
///
/// On shutdown it stops accepting, lets open connections finish (for at most
/// a few seconds) and returns. The engine is read through a weak reference:
/// once `serve` has returned, the exporter keeps no `Arc<Engine>` alive, so
/// the daemon can unwrap its own to stop the engine.
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    http::serve(listener, engine, shutdown).await
}
