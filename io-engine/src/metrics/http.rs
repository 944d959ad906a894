//! The HTTP side of the Prometheus endpoint: an axum router with
//! `GET /metrics`, a small index page at `/` and 404 elsewhere, served until
//! the daemon's shutdown future completes.
//!
//! Thread: the daemon's tokio runtime runs the accept loop and one task per
//! connection; each scrape's collection runs on the runtime's blocking pool
//! (`spawn_blocking`), so it never stalls a runtime worker, and a panic there
//! answers 500 instead of taking anything down. Reactors are never involved.

use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
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
    let exporter = Arc::new(Exporter::new(EngineCollector::live(Arc::downgrade(
        &engine,
    ))));
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

async fn metrics(State(exporter): State<Arc<Exporter>>) -> Response {
    match tokio::task::spawn_blocking(move || exporter.render()).await {
        Ok(body) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response(),
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
