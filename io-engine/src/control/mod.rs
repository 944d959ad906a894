//! The control plane: the gRPC server (package `io_engine.v1`, plus the
//! standard health and reflection services) over a running [`Engine`].
//!
//! Thread: the control-plane runtime, a small tokio runtime whose threads
//! are not reactors. Requests reach the data plane only through the
//! reactors' run-on-core door; errors become statuses in `status`.

mod services;
mod status;

pub use services::Services;

use std::future::Future;
use std::sync::Arc;

use io_engine_api::v1 as pb;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::Server;
use tonic_health::ServingStatus;

use crate::engine::Engine;

/// Errors of the gRPC server.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The transport failed.
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The reflection service could not be built.
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
}

/// Serves the API on `listener` until `shutdown` completes, then reports
/// NOT_SERVING to health checks, stops accepting, and lets requests in
/// progress finish.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ControlError> {
    let services = Services::new(engine);
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_service_status("", ServingStatus::Serving).await;
    for name in [
        <pb::bdev_service_server::BdevServiceServer<Services> as tonic::server::NamedService>::NAME,
        <pb::stats_service_server::StatsServiceServer<Services> as tonic::server::NamedService>::NAME,
        <pb::engine_service_server::EngineServiceServer<Services> as tonic::server::NamedService>::NAME,
        <pb::perf_service_server::PerfServiceServer<Services> as tonic::server::NamedService>::NAME,
        <pb::export_service_server::ExportServiceServer<Services> as tonic::server::NamedService>::NAME,
        <pb::accel_service_server::AccelServiceServer<Services> as tonic::server::NamedService>::NAME,
    ] {
        health.set_service_status(name, ServingStatus::Serving).await;
    }
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let (drain_tx, drain_rx) = tokio::sync::oneshot::channel::<()>();
    let draining = async move {
        shutdown.await;
        health
            .set_service_status("", ServingStatus::NotServing)
            .await;
        let _ = drain_tx.send(());
    };
    let server = Server::builder()
        .add_service(health_service)
        .add_service(reflection)
        .add_service(pb::bdev_service_server::BdevServiceServer::new(
            services.clone(),
        ))
        .add_service(pb::stats_service_server::StatsServiceServer::new(
            services.clone(),
        ))
        .add_service(pb::engine_service_server::EngineServiceServer::new(
            services.clone(),
        ))
        .add_service(pb::perf_service_server::PerfServiceServer::new(
            services.clone(),
        ))
        .add_service(pb::export_service_server::ExportServiceServer::new(
            services.clone(),
        ))
        .add_service(pb::accel_service_server::AccelServiceServer::new(services))
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), draining);
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

/// How long requests in progress may take once shutdown starts.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
