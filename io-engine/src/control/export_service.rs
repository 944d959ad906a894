//! `io_engine.v1.ExportService`: share a device (over NBD or NVMe/TCP),
//! unshare it, list the shares.
//!
//! Thread: the control-plane runtime's workers.

use std::sync::Arc;

use io_engine_api::v1 as pb;
use tonic::{Request, Response, Status};

use super::status;
use crate::bdev::Quoted;
use crate::engine::{Engine, ShareView};
use crate::export::Protocol;
use crate::export::nvmf::ShareOptions;
use crate::export::nvmf::auth::{DhchapKeys, HostSecrets};
use crate::export::nvmf::nqn::MAX_NQN;

/// The export service over the engine.
#[derive(Clone)]
pub struct ExportService {
    engine: Arc<Engine>,
}

/// The hosts' DH-HMAC-CHAP secrets of a share request, parsed: each of
/// an allowed host, at most once. Errors name the host, never a secret.
fn host_secrets(allowed: &[String], req: Vec<pb::HostSecret>) -> Result<HostSecrets, Status> {
    let mut hosts = Vec::with_capacity(req.len());
    for h in req {
        if !allowed.contains(&h.host_nqn) {
            return Err(status::invalid(format!(
                "host secret for {:?}: not one of allowed_hosts",
                h.host_nqn.chars().take(64).collect::<String>()
            )));
        }
        if hosts.iter().any(|(n, _)| *n == h.host_nqn) {
            return Err(status::invalid(format!(
                "host secret for {}: given twice",
                h.host_nqn
            )));
        }
        let ctrl = Some(h.dhchap_ctrl_secret.as_str()).filter(|c| !c.is_empty());
        let keys = DhchapKeys::parse(&h.dhchap_secret, ctrl)
            .map_err(|e| status::invalid(format!("host secret for {}: {e}", h.host_nqn)))?;
        hosts.push((h.host_nqn, keys));
    }
    Ok(HostSecrets::new(hosts))
}

impl ExportService {
    /// The service over `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        ExportService { engine }
    }

    fn message(&self, s: ShareView) -> pb::Export {
        let controllers = self
            .engine
            .nvmf()
            .controllers
            .all()
            .into_iter()
            .filter(|c| c.export.as_deref() == Some(s.info.name.as_str()))
            .map(|c| pb::NvmfController {
                cntlid: c.cntlid as u32,
                host_nqn: c.hostnqn.clone(),
                io_queues: c.connected_io_queues(),
            })
            .collect();
        pb::Export {
            uri: s.uri,
            nqn: s.nqn.unwrap_or_default(),
            bdev: s.info.name,
            protocol: s.info.protocol.as_str().into(),
            read_only: s.info.read_only,
            connections: s.info.connections as u32,
            allowed_hosts: s.allowed_hosts,
            dhchap_hosts: s.dhchap_hosts,
            controllers,
        }
    }
}

#[tonic::async_trait]
impl pb::export_service_server::ExportService for ExportService {
    async fn share(&self, req: Request<pb::ShareRequest>) -> Result<Response<pb::Export>, Status> {
        let r = req.into_inner();
        let Some(protocol) = Protocol::from_name(&r.protocol) else {
            return Err(status::invalid(format!(
                "unknown protocol {}: this engine exports over nbd and nvmf",
                Quoted(&r.protocol)
            )));
        };
        if !r.allowed_hosts.is_empty() && protocol != Protocol::Nvmf {
            return Err(status::invalid(
                "allowed hosts are host NQNs: NVMe-oF shares only (protocol nvmf)",
            ));
        }
        if let Some(h) = r.allowed_hosts.iter().find(|h| {
            !h.starts_with("nqn.")
                || h.len() > MAX_NQN
                || h.chars().any(|c| c.is_control() || c.is_whitespace())
        }) {
            return Err(status::invalid(format!(
                "allowed host {} is not an NQN (nqn., at most {MAX_NQN} bytes, no spaces or \
                 control characters)",
                Quoted(h)
            )));
        }
        let options = ShareOptions {
            dhchap: host_secrets(&r.allowed_hosts, r.host_secrets)?,
            nqn: Some(r.nqn).filter(|n| !n.is_empty()),
            allowed_hosts: r.allowed_hosts,
        };
        let share = self
            .engine
            .share(&r.bdev, protocol, r.read_only, Some(options))
            .map_err(status::share)?;
        Ok(Response::new(self.message(share)))
    }

    async fn unshare(
        &self,
        req: Request<pb::UnshareRequest>,
    ) -> Result<Response<pb::UnshareResponse>, Status> {
        self.engine
            .unshare(&req.into_inner().bdev)
            .await
            .map_err(status::export)?;
        Ok(Response::new(pb::UnshareResponse {}))
    }

    async fn list(
        &self,
        _req: Request<pb::ListExportsRequest>,
    ) -> Result<Response<pb::ListExportsResponse>, Status> {
        let exports = self
            .engine
            .shares()
            .into_iter()
            .map(|s| self.message(s))
            .collect();
        Ok(Response::new(pb::ListExportsResponse { exports }))
    }
}
