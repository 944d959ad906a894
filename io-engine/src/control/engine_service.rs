//! `io_engine.v1.EngineService`: what this engine is (build, cores and why
//! those, poll mode, uptime, hugepages, IO pool shape, accel modules and
//! their notes).
//!
//! Thread: the control-plane runtime's workers (`GetInfo` reads
//! `/proc/meminfo` there).

use std::sync::Arc;

use io_engine_api::v1 as pb;
use tonic::{Request, Response, Status};

use crate::engine::{BUILD, Engine};

/// The engine-info service.
#[derive(Clone)]
pub struct EngineService {
    engine: Arc<Engine>,
}

impl EngineService {
    /// The service over `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        EngineService { engine }
    }
}

#[tonic::async_trait]
impl pb::engine_service_server::EngineService for EngineService {
    async fn get_info(
        &self,
        _req: Request<pb::GetInfoRequest>,
    ) -> Result<Response<pb::EngineInfo>, Status> {
        let e = &self.engine;
        let hugepages = crate::env::dma::hugepage_info()
            .ok()
            .map(|h| pb::Hugepages {
                page_size_bytes: h.page_size_bytes,
                total: h.total,
                free: h.free,
            });
        let accel = e.accel();
        Ok(Response::new(pb::EngineInfo {
            version: BUILD.version.into(),
            git_revision: BUILD.revision.into(),
            cores: e.config().cores.cpus().to_vec(),
            core_source: e.config().core_sizing.source.name().into(),
            allowed_cpus: e.config().core_sizing.allowed.cpus().to_vec(),
            cpu_quota: e.config().core_sizing.quota.map_or(0.0, |q| q.cpus()),
            poll_mode: e.config().poll_mode.name().into(),
            uptime_ns: e.uptime().as_nanos() as u64,
            hugepages,
            accel_modules: accel
                .modules()
                .into_iter()
                .map(|m| m.name.to_string())
                .collect(),
            io_pool_size: e.config().io_pool_size as u64,
            io_pool_cache: e.config().io_pool_cache as u64,
            accel_notes: {
                let mut notes = accel.module_notes();
                notes.extend(accel.notes());
                notes
            },
        }))
    }
}
