//! The HTTP side of the Prometheus endpoint: an axum router with
//! `GET /metrics` (gzip-compressed for a scraper that sends
//! `Accept-Encoding: gzip`, as Prometheus does), a small index page at `/`
//! and 404 elsewhere, served until the daemon's shutdown future completes.
//!
//! Thread: the daemon's tokio runtime runs the accept loop and one task per
//! connection; each scrape's collection runs on the runtime's blocking pool
//! (`spawn_blocking`), so it never stalls a runtime worker, and a panic there
//! answers 500 instead of taking anything down; so does its compression.
//! Reactors are never involved.

use std::future::{Future, IntoFuture};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::collector::{EngineCollector, Exporter};
use crate::engine::Engine;

/// How long connections still open at shutdown may take to finish: a scrape
/// takes milliseconds, and the daemon's own drain allows a few seconds for
/// everything. Short in tests, which wait it out.
pub(super) const SHUTDOWN_GRACE: Duration = if cfg!(test) {
    Duration::from_millis(300)
} else {
    Duration::from_secs(2)
};

const INDEX: &str = "io-engine Prometheus exporter\n\nMetrics: /metrics\n";

/// The `Content-Type` of `GET /metrics`: Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves the endpoint on `listener` until `shutdown` completes:
/// `GET /metrics` (the engine's metrics and the `process_*` ones,
/// [`CONTENT_TYPE`], gzip-compressed when the request's `Accept-Encoding`
/// takes gzip), `GET /` (a page pointing there), 404 for any other path.
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
    let exporter =
        Arc::new(Exporter::new(EngineCollector::live(Arc::downgrade(&engine))).with_process());
    let app = router(exporter);
    match listener.local_addr() {
        Ok(addr) => tracing::info!(%addr, "metrics endpoint listening (GET /metrics)"),
        Err(e) => tracing::warn!("metrics endpoint: no local address: {e}"),
    }

    let (fired_tx, fired_rx) = tokio::sync::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        let _ = fired_tx.send(());
    };
    let server = axum::serve(listener, app)
        .with_graceful_shutdown(signal)
        .into_future();
    // Graceful shutdown waits for open connections; one that never finishes
    // its request must not hold the daemon's exit.
    let grace = async move {
        if fired_rx.await.is_err() {
            // The signal was dropped unfired: only the server can end.
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    let result = tokio::select! {
        biased;
        r = server => r,
        () = grace => {
            tracing::warn!(
                "metrics endpoint: connections still open {SHUTDOWN_GRACE:?} after shutdown; \
                 leaving them"
            );
            Ok(())
        }
    };
    // The strong reference lives exactly as long as the server: after this,
    // the exporter holds the engine only weakly.
    drop(engine);
    tracing::info!("metrics endpoint stopped");
    result
}

/// The routes, over `exporter`.
pub(super) fn router(exporter: Arc<Exporter>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/", get(index))
        .fallback(not_found)
        .with_state(exporter)
}

async fn metrics(State(exporter): State<Arc<Exporter>>, request: HeaderMap) -> Response {
    let compress = accepts_gzip(&request);
    let scrape = move || {
        let text = exporter.render();
        if compress {
            gzip(text.as_bytes())
        } else {
            text.into_bytes()
        }
    };
    match tokio::task::spawn_blocking(scrape).await {
        Ok(body) => {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                CONTENT_TYPE.parse().expect("a valid value"),
            );
            headers.insert(header::VARY, header::ACCEPT_ENCODING.into());
            if compress {
                headers.insert(
                    header::CONTENT_ENCODING,
                    "gzip".parse().expect("a valid value"),
                );
            }
            (headers, body).into_response()
        }
        Err(e) => {
            tracing::error!("metrics: collection failed: {e}");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "metrics collection failed\n",
            )
                .into_response()
        }
    }
}

/// Whether `Accept-Encoding` takes gzip: a `gzip` (or `x-gzip`) coding
/// whose `q` is not 0. `*` is not enough: identity is always acceptable,
/// and a client that did not name gzip may not expect it.
pub(super) fn accepts_gzip(request: &HeaderMap) -> bool {
    request
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip")) && !refused
        })
}

/// `text` gzip-compressed (fast level: a scrape is text that compresses
/// some 20x at any level).
fn gzip(text: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(
        Vec::with_capacity(text.len() / 8),
        flate2::Compression::fast(),
    );
    // Writing to a Vec cannot fail.
    z.write_all(text).expect("writing to memory");
    z.finish().expect("writing to memory")
}

async fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], INDEX).into_response()
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "not found: the metrics are at /metrics\n",
    )
        .into_response()
}
