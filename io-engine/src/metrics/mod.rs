//! The Prometheus endpoint, served by the daemon itself: the engine's device,
//! reactor, pool, export, accel and build metrics, and the process's own
//! (`process_*`), in the text format 0.0.4, gzip-compressed when asked.
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
//! seconds, at ten of the engine's 26 bounds, 2x apart, for reads, writes
//! and flushes (`collector::FINE_BUCKETS`), six of those for the other
//! operations (`collector::COARSE_BUCKETS`).
//! Every operation of every device has its counters, zero or not; reads
//! and writes have a latency histogram from the start, the other
//! operations once the device has done one, so that an idle device costs
//! 47 series and one doing reads, writes and flushes 60, the budget.
//! `process_cpu_seconds_total` is read at clock-tick precision
//! (`process.rs`), the crate's other `process_*` metrics as they are.
//! Every pool has its per-core counters for every reactor, zero or not.
//!
//! A collection never panics the daemon: a part of the engine that panics
//! while read, or a reading that cannot be right, gives fewer metrics in that
//! scrape, logged. `docs/metrics.md` lists every metric.

mod collector;
mod http;
mod process;

#[cfg(test)]
mod tests;

pub use collector::render;
pub use http::{CONTENT_TYPE, serve};
