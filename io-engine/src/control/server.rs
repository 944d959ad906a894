//! The tonic server: the six `io_engine.v1` services, the standard health
//! service (SERVING until shutdown) and reflection (`grpc.reflection.v1`
//! and `v1alpha`, which older tools still ask for), all on one listener
//! (plaintext, or TLS with a [`GrpcTls`]), behind the control plane's
//! [`Limits`], and the graceful stop.
//!
//! Thread: the control-plane runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use io_engine_api::v1 as pb;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::server::NamedService;
use tonic::transport::Server;
use tonic_health::ServingStatus;

use super::plaintext_refusal::PlaintextRefusal;
use super::tls_incoming::TlsIncoming;
use super::{
    AccelService, BdevService, ControlError, EngineService, ExportService, GrpcTls, Limits,
    PerfService, RequestLimitLayer, StatsService,
};
use crate::engine::Engine;

use pb::accel_service_server::AccelServiceServer;
use pb::bdev_service_server::BdevServiceServer;
use pb::engine_service_server::EngineServiceServer;
use pb::export_service_server::ExportServiceServer;
use pb::perf_service_server::PerfServiceServer;
use pb::stats_service_server::StatsServiceServer;

/// How long requests in progress may take once shutdown starts.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Serves the API on `listener` (over TLS with `tls`) within `limits`
/// until `shutdown`
/// completes, then reports NOT_SERVING to health checks, stops accepting,
/// and lets requests in progress finish.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    limits: Limits,
    tls: Option<GrpcTls>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ControlError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_service_status("", ServingStatus::Serving).await;
    for name in [
        BdevServiceServer::<BdevService>::NAME,
        StatsServiceServer::<StatsService>::NAME,
        EngineServiceServer::<EngineService>::NAME,
        PerfServiceServer::<PerfService>::NAME,
        ExportServiceServer::<ExportService>::NAME,
        AccelServiceServer::<AccelService>::NAME,
    ] {
        health
            .set_service_status(name, ServingStatus::Serving)
            .await;
    }
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1alpha = reflection().build_v1alpha()?;
    let reflection = reflection().build_v1()?;
    let max = limits.max_request_bytes as usize;
    let (drain_tx, drain_rx) = tokio::sync::oneshot::channel::<()>();
    let draining = async move {
        shutdown.await;
        health
            .set_service_status("", ServingStatus::NotServing)
            .await;
        let _ = drain_tx.send(());
    };
    let router = Server::builder()
        .layer(RequestLimitLayer::new(&limits))
        .add_service(health_service)
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .add_service(
            BdevServiceServer::new(BdevService::new(engine.clone())).max_decoding_message_size(max),
        )
        .add_service(
            StatsServiceServer::new(StatsService::new(engine.clone()))
                .max_decoding_message_size(max),
        )
        .add_service(
            EngineServiceServer::new(EngineService::new(engine.clone()))
                .max_decoding_message_size(max),
        )
        .add_service(
            PerfServiceServer::new(PerfService::new(engine.clone())).max_decoding_message_size(max),
        )
        .add_service(
            ExportServiceServer::new(ExportService::new(engine.clone()))
                .max_decoding_message_size(max),
        )
        .add_service(
            AccelServiceServer::new(AccelService::new(engine)).max_decoding_message_size(max),
        );
    type Serving = Pin<Box<dyn Future<Output = Result<(), tonic::transport::Error>> + Send>>;
    let server: Serving = match tls {
        Some(tls) => {
            // Plaintext peers are answered at most as many at once as
            // requests are served, apart from them: they cannot take a
            // TLS client's place.
            let refusal =
                PlaintextRefusal::new(tls.mutual(), limits.max_concurrent_requests as usize);
            let incoming =
                TlsIncoming::new(listener, TlsAcceptor::from(tls.server_config()), refusal);
            Box::pin(router.serve_with_incoming_shutdown(incoming, draining))
        }
        None => Box::pin(
            router.serve_with_incoming_shutdown(TcpListenerStream::new(listener), draining),
        ),
    };
    // Requests in progress get SHUTDOWN_GRACE to finish; an idle client that
    // keeps its connection open does not hold the shutdown up past that.
    let grace = async {
        if drain_rx.await.is_ok() {
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        r = server => r?,
        _ = grace => tracing::info!("gRPC connections still open after {SHUTDOWN_GRACE:?}; closing them"),
    }
    Ok(())
}
