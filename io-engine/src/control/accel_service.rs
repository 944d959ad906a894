//! `io_engine.v1.AccelService`: the accel modules, which module runs each
//! opcode (and the fallbacks taken), and the accel counters, read from the
//! engine's [`Snapshot`](crate::engine::Snapshot) as a scrape reads them.
//!
//! Thread: the control-plane runtime's workers.

use std::sync::Arc;

use io_engine_api::v1 as pb;
use tonic::{Request, Response, Status};

use super::status;
use crate::accel::{ModuleInfo, ModuleStats, OpStats};
use crate::engine::Engine;

/// The accel service over the engine.
#[derive(Clone)]
pub struct AccelService {
    engine: Arc<Engine>,
}

impl AccelService {
    /// The service over `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        AccelService { engine }
    }
}

impl From<ModuleInfo> for pb::AccelModule {
    fn from(m: ModuleInfo) -> Self {
        pb::AccelModule {
            name: m.name.into(),
            opcodes: m.opcodes.iter().map(|o| o.name().into()).collect(),
            max_batch: m.max_batch as u64,
            max_transfer: m.max_transfer as u64,
            implementation: m.implementation,
        }
    }
}

impl From<OpStats> for pb::AccelOpStats {
    fn from(s: OpStats) -> Self {
        pb::AccelOpStats {
            opcode: s.opcode.name().into(),
            module: s.module.into(),
            executed: s.executed,
            failed: s.failed,
            miscompares: s.miscompares,
            bytes: s.bytes,
        }
    }
}

impl From<ModuleStats> for pb::AccelModuleStats {
    fn from(m: ModuleStats) -> Self {
        pb::AccelModuleStats {
            module: m.module.into(),
            batches: m.batches,
        }
    }
}

#[tonic::async_trait]
impl pb::accel_service_server::AccelService for AccelService {
    async fn list_modules(
        &self,
        _req: Request<pb::ListModulesRequest>,
    ) -> Result<Response<pb::ListModulesResponse>, Status> {
        let modules = self
            .engine
            .accel()
            .modules()
            .into_iter()
            .map(Into::into)
            .collect();
        Ok(Response::new(pb::ListModulesResponse { modules }))
    }

    async fn get_assignments(
        &self,
        _req: Request<pb::GetAssignmentsRequest>,
    ) -> Result<Response<pb::GetAssignmentsResponse>, Status> {
        let accel = self.engine.accel();
        let assignments = accel
            .assignments()
            .into_iter()
            .map(|(op, m)| pb::AccelAssignment {
                opcode: op.name().into(),
                module: m.into(),
            })
            .collect();
        Ok(Response::new(pb::GetAssignmentsResponse {
            assignments,
            fallbacks: accel.notes(),
        }))
    }

    async fn get_stats(
        &self,
        _req: Request<pb::GetAccelStatsRequest>,
    ) -> Result<Response<pb::GetAccelStatsResponse>, Status> {
        let (ops, modules) = status::snapshot_part(self.engine.snapshot().accel, "accel counters")?;
        Ok(Response::new(pb::GetAccelStatsResponse {
            ops: ops.into_iter().map(Into::into).collect(),
            modules: modules.into_iter().map(Into::into).collect(),
        }))
    }
}
