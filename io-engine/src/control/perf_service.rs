//! `io_engine.v1.PerfService`: a bdev-perf run inside the daemon. The
//! request becomes a [`PerfRequest`] (proto3's 0 for an unset IO size or
//! queue depth is `None`), whose defaults and checks are the engine's.
//!
//! Thread: the control-plane runtime. `perf::start` maps the run's buffers,
//! so it runs on the blocking pool; the jobs run on their reactors and are
//! awaited on the worker.

use std::sync::Arc;

use io_engine_api::v1 as pb;
use tonic::{Request, Response, Status};

use super::blocking::blocking;
use super::status;
use crate::engine::{Engine, PerfRequest};
use crate::perf::{self, JobRow};

/// The perf service over the engine.
#[derive(Clone)]
pub struct PerfService {
    engine: Arc<Engine>,
}

impl PerfService {
    /// The service over `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        PerfService { engine }
    }
}

impl From<pb::RunPerfRequest> for PerfRequest {
    fn from(r: pb::RunPerfRequest) -> Self {
        PerfRequest {
            bdevs: r.bdevs,
            cores: r.cores.into_iter().map(|c| c as usize).collect(),
            workload: r.workload,
            io_size: (r.io_size != 0).then_some(r.io_size),
            queue_depth: (r.queue_depth != 0).then_some(r.queue_depth),
            read_percent: r.read_percent,
            verify: r.verify,
            seconds: r.seconds,
        }
    }
}

impl From<&JobRow> for pb::PerfJob {
    fn from(r: &JobRow) -> Self {
        pb::PerfJob {
            core: r.core.map(|c| c as u32),
            bdev: r.bdev.clone().unwrap_or_default(),
            ios: r.ios,
            seconds: r.seconds,
            iops: r.iops,
            mib_s: r.mib_s,
            avg_lat_us: r.avg_lat_us,
            min_lat_us: r.min_lat_us,
            max_lat_us: r.max_lat_us,
            failed: r.failed,
            miscompares: r.miscompares,
        }
    }
}

#[tonic::async_trait]
impl pb::perf_service_server::PerfService for PerfService {
    async fn run(
        &self,
        req: Request<pb::RunPerfRequest>,
    ) -> Result<Response<pb::RunPerfResponse>, Status> {
        let spec = PerfRequest::from(req.into_inner())
            .spec()
            .map_err(status::perf)?;
        let engine = self.engine.clone();
        let running = blocking(move || perf::start(engine.reactors(), engine.registry(), &spec))
            .await?
            .map_err(status::perf)?;
        let rows = running.finish().await.map_err(status::perf)?;
        Ok(Response::new(pb::RunPerfResponse {
            jobs: rows.iter().map(Into::into).collect(),
            total: Some((&JobRow::total(&rows)).into()),
        }))
    }
}
