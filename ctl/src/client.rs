//! The connection to the engine and one method per RPC the CLI uses, each
//! bounded by the request timeout so the CLI never hangs.
//!
//! Thread: the CLI's main thread, inside its single-threaded tokio runtime.

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use io_engine::control::TLS_ONLY;
use io_engine_api::v1::{
    Bdev, CreateBdevRequest, DestroyBdevRequest, DestroyBdevResponse, EngineInfo, Export,
    GetAccelStatsRequest, GetAccelStatsResponse, GetAssignmentsRequest, GetAssignmentsResponse,
    GetBdevRequest, GetInfoRequest, GetIoStatsRequest, GetIoStatsResponse, GetPoolStatsRequest,
    GetPoolStatsResponse, GetReactorStatsRequest, GetReactorStatsResponse, HostSecret,
    ListBdevsRequest, ListBdevsResponse, ListExportsRequest, ListExportsResponse,
    ListModulesRequest, ListModulesResponse, ResetIoStatsRequest, ResetIoStatsResponse,
    RunPerfRequest, RunPerfResponse, ShareRequest, UnshareRequest, UnshareResponse,
    accel_service_client::AccelServiceClient, bdev_service_client::BdevServiceClient,
    engine_service_client::EngineServiceClient, export_service_client::ExportServiceClient,
    perf_service_client::PerfServiceClient, stats_service_client::StatsServiceClient,
};
use tonic::transport::Channel;
use tonic::{Code, Response, Status};

use crate::cli::{CONNECT_TIMEOUT, EngineAddress};
use crate::client_tls::{ClientTls, explain_tls_failure, refused_after_handshake};
use crate::error::{CtlError, root_cause};

/// A connected client of the engine's services.
pub(crate) struct Client {
    target: Target,
    bdev: BdevServiceClient<Channel>,
    stats: StatsServiceClient<Channel>,
    engine: EngineServiceClient<Channel>,
    export: ExportServiceClient<Channel>,
    accel: AccelServiceClient<Channel>,
    perf: PerfServiceClient<Channel>,
}

/// Where requests go and how long each may take.
struct Target {
    url: String,
    timeout: Duration,
    /// Whether the connection is TLS (a refused client certificate shows
    /// only at the first request under TLS 1.3).
    https: bool,
    /// Whether a client certificate was offered.
    client_cert: bool,
    /// Whether the engine has answered a request on this connection.
    answered: Cell<bool>,
}

impl Target {
    /// Awaits an RPC for at most the request timeout. (No `grpc-timeout`
    /// header: tonic would then enforce it itself and report an anonymous
    /// `CANCELLED: Timeout expired` instead of naming the RPC.)
    async fn call<T>(
        &self,
        rpc: &'static str,
        response: impl Future<Output = Result<Response<T>, Status>>,
    ) -> Result<T, CtlError> {
        self.call_within(rpc, self.timeout, response).await
    }

    /// [`Target::call`] with a wait of `timeout` (an RPC that takes a while
    /// by design, such as a perf run).
    async fn call_within<T>(
        &self,
        rpc: &'static str,
        timeout: Duration,
        response: impl Future<Output = Result<Response<T>, Status>>,
    ) -> Result<T, CtlError> {
        match tokio::time::timeout(timeout, response).await {
            Ok(Ok(response)) => {
                self.answered.set(true);
                Ok(response.into_inner())
            }
            Ok(Err(status)) => Err(self.status_error(status)),
            Err(_) => Err(CtlError::Timeout {
                endpoint: self.url.clone(),
                rpc,
                timeout,
            }),
        }
    }
}

impl Target {
    /// The error for a failed RPC. Under TLS 1.3 an engine that refuses
    /// the client's certificate (or its absence) does so after the
    /// client's side of the handshake is done: the first request then
    /// fails in the transport, with the alert lost on the way, and that is
    /// explained as the refusal it is.
    fn status_error(&self, status: Status) -> CtlError {
        let transport =
            std::error::Error::source(&status).is_some_and(|s| s.is::<tonic::transport::Error>());
        if self.https && transport && !self.answered.get() {
            return CtlError::Tls {
                endpoint: self.url.clone(),
                message: refused_after_handshake(self.client_cert),
            };
        }
        // Plaintext to a TLS port: the engine says so (UNAVAILABLE, its
        // message starting with TLS_ONLY); an older one breaks the
        // connection.
        let said_so = status.code() == Code::Unavailable && status.message().starts_with(TLS_ONLY);
        if !self.https && !self.answered.get() && (said_so || transport) {
            return CtlError::TlsOnly {
                endpoint: self.url.clone(),
                said_so,
                message: match std::error::Error::source(&status) {
                    Some(source) if !said_so => root_cause(source),
                    _ => status.message().to_owned(),
                },
            };
        }
        CtlError::Status {
            endpoint: self.url.clone(),
            status: Box::new(status),
        }
    }
}

impl Client {
    /// Connects to the engine (over TLS with `tls` for an https endpoint),
    /// waiting at most 3 s (or `timeout` if shorter).
    pub(crate) async fn connect(
        address: &EngineAddress,
        tls: &ClientTls,
        timeout: Duration,
    ) -> Result<Self, CtlError> {
        let connect_timeout = CONNECT_TIMEOUT.min(timeout);
        let mut endpoint = address.endpoint.clone().connect_timeout(connect_timeout);
        if address.https() {
            endpoint = endpoint
                .tls_config(tls.config()?)
                .map_err(|e| CtlError::Tls {
                    endpoint: address.url.clone(),
                    message: root_cause(&e),
                })?;
        }
        let connect_error = |cause: String| match explain_tls_failure(&cause) {
            Some(message) if address.https() => CtlError::Tls {
                endpoint: address.url.clone(),
                message,
            },
            _ => CtlError::Connect {
                endpoint: address.url.clone(),
                cause,
            },
        };
        let channel = match tokio::time::timeout(connect_timeout, endpoint.connect()).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(e)) => return Err(connect_error(root_cause(&e))),
            Err(_) => {
                return Err(connect_error(format!(
                    "no connection within {} s",
                    connect_timeout.as_secs_f64()
                )));
            }
        };
        Ok(Self {
            target: Target {
                url: address.url.clone(),
                timeout,
                https: address.https(),
                client_cert: tls.cert.is_some(),
                answered: Cell::new(false),
            },
            bdev: BdevServiceClient::new(channel.clone()),
            stats: StatsServiceClient::new(channel.clone()),
            engine: EngineServiceClient::new(channel.clone()),
            export: ExportServiceClient::new(channel.clone()),
            accel: AccelServiceClient::new(channel.clone()),
            perf: PerfServiceClient::new(channel),
        })
    }

    /// `AccelService.ListModules`.
    pub(crate) async fn accel_modules(&mut self) -> Result<ListModulesResponse, CtlError> {
        self.target
            .call(
                "AccelService.ListModules",
                self.accel.list_modules(ListModulesRequest {}),
            )
            .await
    }

    /// `AccelService.GetAssignments`.
    pub(crate) async fn accel_assignments(&mut self) -> Result<GetAssignmentsResponse, CtlError> {
        self.target
            .call(
                "AccelService.GetAssignments",
                self.accel.get_assignments(GetAssignmentsRequest {}),
            )
            .await
    }

    /// `AccelService.GetStats`.
    pub(crate) async fn accel_stats(&mut self) -> Result<GetAccelStatsResponse, CtlError> {
        self.target
            .call(
                "AccelService.GetStats",
                self.accel.get_stats(GetAccelStatsRequest {}),
            )
            .await
    }

    /// `ExportService.Share`.
    pub(crate) async fn share(
        &mut self,
        bdev: &str,
        protocol: &str,
        read_only: bool,
        allowed_hosts: &[String],
        host_secrets: Vec<HostSecret>,
        nqn: Option<&str>,
    ) -> Result<Export, CtlError> {
        let request = ShareRequest {
            bdev: bdev.to_owned(),
            protocol: protocol.to_owned(),
            allowed_hosts: allowed_hosts.to_vec(),
            host_secrets,
            read_only,
            nqn: nqn.unwrap_or_default().to_owned(),
        };
        self.target
            .call("ExportService.Share", self.export.share(request))
            .await
    }

    /// `ExportService.Unshare`.
    pub(crate) async fn unshare(&mut self, bdev: &str) -> Result<UnshareResponse, CtlError> {
        let request = UnshareRequest {
            bdev: bdev.to_owned(),
        };
        self.target
            .call("ExportService.Unshare", self.export.unshare(request))
            .await
    }

    /// `ExportService.List`.
    pub(crate) async fn list_exports(&mut self) -> Result<ListExportsResponse, CtlError> {
        self.target
            .call(
                "ExportService.List",
                self.export.list(ListExportsRequest {}),
            )
            .await
    }

    /// `BdevService.Create`.
    pub(crate) async fn create_bdev(&mut self, uri: &str) -> Result<Bdev, CtlError> {
        let request = CreateBdevRequest {
            uri: uri.to_owned(),
        };
        self.target
            .call("BdevService.Create", self.bdev.create(request))
            .await
    }

    /// `BdevService.Destroy`.
    pub(crate) async fn destroy_bdev(
        &mut self,
        name: &str,
    ) -> Result<DestroyBdevResponse, CtlError> {
        let request = DestroyBdevRequest {
            name: name.to_owned(),
        };
        self.target
            .call("BdevService.Destroy", self.bdev.destroy(request))
            .await
    }

    /// `BdevService.Get`.
    pub(crate) async fn get_bdev(&mut self, name: &str) -> Result<Bdev, CtlError> {
        let request = GetBdevRequest {
            name: name.to_owned(),
        };
        self.target
            .call("BdevService.Get", self.bdev.get(request))
            .await
    }

    /// `BdevService.List`.
    pub(crate) async fn list_bdevs(&mut self) -> Result<ListBdevsResponse, CtlError> {
        let request = ListBdevsRequest {};
        self.target
            .call("BdevService.List", self.bdev.list(request))
            .await
    }

    /// `StatsService.GetIoStats`: one device, or every device for `None`.
    pub(crate) async fn io_stats(
        &mut self,
        name: Option<&str>,
    ) -> Result<GetIoStatsResponse, CtlError> {
        let request = GetIoStatsRequest {
            name: name.map(str::to_owned),
        };
        self.target
            .call("StatsService.GetIoStats", self.stats.get_io_stats(request))
            .await
    }

    /// `StatsService.ResetIoStats`: one device, or every device for `None`.
    pub(crate) async fn reset_io_stats(
        &mut self,
        name: Option<&str>,
    ) -> Result<ResetIoStatsResponse, CtlError> {
        let request = ResetIoStatsRequest {
            name: name.map(str::to_owned),
        };
        self.target
            .call(
                "StatsService.ResetIoStats",
                self.stats.reset_io_stats(request),
            )
            .await
    }

    /// `StatsService.GetReactorStats`.
    pub(crate) async fn reactor_stats(&mut self) -> Result<GetReactorStatsResponse, CtlError> {
        let request = GetReactorStatsRequest {};
        self.target
            .call(
                "StatsService.GetReactorStats",
                self.stats.get_reactor_stats(request),
            )
            .await
    }

    /// `StatsService.GetPoolStats`.
    pub(crate) async fn pool_stats(&mut self) -> Result<GetPoolStatsResponse, CtlError> {
        let request = GetPoolStatsRequest {};
        self.target
            .call(
                "StatsService.GetPoolStats",
                self.stats.get_pool_stats(request),
            )
            .await
    }

    /// `PerfService.Run`: waits for the run's time plus the request timeout.
    pub(crate) async fn run_perf(
        &mut self,
        request: RunPerfRequest,
    ) -> Result<RunPerfResponse, CtlError> {
        let timeout = self.target.timeout + Duration::from_secs_f64(request.seconds);
        self.target
            .call_within("PerfService.Run", timeout, self.perf.run(request))
            .await
    }

    /// `EngineService.GetInfo`.
    pub(crate) async fn engine_info(&mut self) -> Result<EngineInfo, CtlError> {
        let request = GetInfoRequest {};
        self.target
            .call("EngineService.GetInfo", self.engine.get_info(request))
            .await
    }
}
