//! `io_engine.v1.ExportService`: share a device over NBD, unshare it, list
//! the shares.
//!
//! Thread: the control-plane runtime's workers.

use std::sync::Arc;

use io_engine_api::v1 as pb;
use tonic::{Request, Response, Status};

use super::status;
use crate::engine::Engine;
use crate::nbd::ShareInfo;

/// The export service over the engine.
#[derive(Clone)]
pub struct ExportService {
    engine: Arc<Engine>,
}

impl ExportService {
    /// The service over `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        ExportService { engine }
    }

    fn message(&self, s: ShareInfo) -> pb::Export {
        pb::Export {
            uri: self.engine.nbd_uri(&s.name),
            bdev: s.name,
            protocol: "nbd".into(),
            read_only: s.read_only,
            connections: s.connections as u32,
        }
    }
}

#[tonic::async_trait]
impl pb::export_service_server::ExportService for ExportService {
    async fn share(&self, req: Request<pb::ShareRequest>) -> Result<Response<pb::Export>, Status> {
        let r = req.into_inner();
        if !(r.protocol.is_empty() || r.protocol.eq_ignore_ascii_case("nbd")) {
            return Err(status::invalid(format!(
                "unknown protocol {:?}: this engine exports over nbd",
                r.protocol
            )));
        }
        let share = self
            .engine
            .exports()
            .share(self.engine.registry(), &r.bdev, r.read_only)
            .map_err(status::export)?;
        Ok(Response::new(self.message(share)))
    }

    async fn unshare(
        &self,
        req: Request<pb::UnshareRequest>,
    ) -> Result<Response<pb::UnshareResponse>, Status> {
        self.engine
            .exports()
            .unshare(&req.into_inner().bdev)
            .map_err(status::export)?;
        Ok(Response::new(pb::UnshareResponse {}))
    }

    async fn list(
        &self,
        _req: Request<pb::ListExportsRequest>,
    ) -> Result<Response<pb::ListExportsResponse>, Status> {
        let exports = self
            .engine
            .exports()
            .list()
            .into_iter()
            .map(|s| self.message(s))
            .collect();
        Ok(Response::new(pb::ListExportsResponse { exports }))
    }
}
