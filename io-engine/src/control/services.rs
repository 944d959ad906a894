//! The gRPC services of `io_engine.v1`: devices, statistics, engine info and
//! perf runs, each a thin mapping from messages onto the [`Engine`].
//!
//! Thread: the control-plane runtime (tokio, off the reactor cores). Work on
//! the data plane goes through `Reactors::run_on` / `spawn_on`; blocking work
//! (mapping a malloc device's memory) runs on the runtime's blocking pool.

use std::sync::Arc;

use clap::ValueEnum;
use io_engine_api::v1 as pb;
use tonic::{Request, Response, Status};

use super::status;
use crate::bdev::{BdevInfo, IoStats, IoType, OpStats};
use crate::engine::{BUILD, Engine};
use crate::export::Protocol;
use crate::perf::{self, JobRow, PerfSpec, Workload};
use crate::pool::PoolStats;

/// The engine, shared by every service.
#[derive(Clone)]
pub struct Services {
    engine: Arc<Engine>,
}

impl Services {
    /// Services over `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        Services { engine }
    }
}

fn bdev_msg(engine: &Engine, i: BdevInfo) -> pb::Bdev {
    let share = engine.exports().get(&i.name);
    pb::Bdev {
        shared: share.is_some(),
        share_uri: share.map(|_| engine.nbd_uri(&i.name)).unwrap_or_default(),
        name: i.name,
        uuid: i.uuid.to_string(),
        uri: i.uri,
        product: i.product,
        block_size: i.block_size,
        num_blocks: i.num_blocks,
        size_bytes: i.size_bytes,
        claimed: i.open > 0,
        open_count: i.open as u32,
    }
}

/// Runs blocking registry work off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("control task failed: {e}")))
}

#[tonic::async_trait]
impl pb::bdev_service_server::BdevService for Services {
    async fn create(
        &self,
        req: Request<pb::CreateBdevRequest>,
    ) -> Result<Response<pb::Bdev>, Status> {
        let uri = req.into_inner().uri;
        let registry = self.engine.registry().clone();
        let info = blocking(move || registry.create(&uri))
            .await?
            .map_err(status::bdev)?;
        Ok(Response::new(bdev_msg(&self.engine, info)))
    }

    async fn destroy(
        &self,
        req: Request<pb::DestroyBdevRequest>,
    ) -> Result<Response<pb::DestroyBdevResponse>, Status> {
        let name = req.into_inner().name;
        self.engine.ensure_unshared(&name).map_err(status::export)?;
        let registry = self.engine.registry().clone();
        // Unmapping a large malloc device takes time: off the async workers.
        blocking(move || registry.destroy(&name))
            .await?
            .map_err(status::bdev)?;
        Ok(Response::new(pb::DestroyBdevResponse {}))
    }

    async fn get(&self, req: Request<pb::GetBdevRequest>) -> Result<Response<pb::Bdev>, Status> {
        let name = req.into_inner().name;
        self.engine
            .registry()
            .get(&name)
            .map(|i| Response::new(bdev_msg(&self.engine, i)))
            .ok_or_else(|| status::bdev(crate::bdev::BdevError::NotFound(name)))
    }

    async fn list(
        &self,
        _req: Request<pb::ListBdevsRequest>,
    ) -> Result<Response<pb::ListBdevsResponse>, Status> {
        let bdevs = self
            .engine
            .registry()
            .list()
            .into_iter()
            .map(|i| bdev_msg(&self.engine, i))
            .collect();
        Ok(Response::new(pb::ListBdevsResponse { bdevs }))
    }
}

fn op_msg(o: &OpStats) -> pb::OpStats {
    pb::OpStats {
        ops: o.ops,
        bytes: o.bytes,
        errors: o.errors,
        latency_total_ns: o.latency_total_ns,
        latency_min_ns: o.latency_min_ns.unwrap_or(0),
        latency_max_ns: o.latency_max_ns,
    }
}

fn io_stats_msg(name: String, s: &IoStats) -> pb::BdevIoStats {
    let op = |t: IoType| Some(op_msg(s.op(t)));
    pb::BdevIoStats {
        name,
        read: op(IoType::Read),
        write: op(IoType::Write),
        unmap: op(IoType::Unmap),
        flush: op(IoType::Flush),
        write_zeroes: op(IoType::WriteZeroes),
        in_flight: s.in_flight,
    }
}

/// An optional name: unset and empty both mean "every device".
fn name_filter(name: Option<String>) -> Option<String> {
    name.filter(|n| !n.is_empty())
}

#[tonic::async_trait]
impl pb::stats_service_server::StatsService for Services {
    async fn get_io_stats(
        &self,
        req: Request<pb::GetIoStatsRequest>,
    ) -> Result<Response<pb::GetIoStatsResponse>, Status> {
        let registry = self.engine.registry();
        let uptime_ns = self.engine.uptime().as_nanos() as u64;
        let names = match name_filter(req.into_inner().name) {
            Some(n) => vec![n],
            None => registry.list().into_iter().map(|i| i.name).collect(),
        };
        let mut stats = Vec::new();
        for name in names {
            let s = registry
                .io_stats(&name)
                .ok_or_else(|| status::bdev(crate::bdev::BdevError::NotFound(name.clone())))?;
            stats.push(io_stats_msg(name, &s));
        }
        Ok(Response::new(pb::GetIoStatsResponse { stats, uptime_ns }))
    }

    async fn reset_io_stats(
        &self,
        req: Request<pb::ResetIoStatsRequest>,
    ) -> Result<Response<pb::ResetIoStatsResponse>, Status> {
        self.engine
            .reset_io_stats(name_filter(req.into_inner().name))
            .await
            .map_err(status::bdev)?;
        Ok(Response::new(pb::ResetIoStatsResponse {}))
    }

    async fn get_reactor_stats(
        &self,
        _req: Request<pb::GetReactorStatsRequest>,
    ) -> Result<Response<pb::GetReactorStatsResponse>, Status> {
        let reactors = self
            .engine
            .reactors()
            .stats()
            .into_iter()
            .map(|r| pb::ReactorStats {
                core: r.index as u32,
                cpu: r.cpu,
                poll_mode: r.poll_mode.to_string(),
                iterations: r.iterations,
                busy_ns: r.busy_ns,
                idle_ns: r.idle_ns,
                messages: r.messages,
            })
            .collect();
        Ok(Response::new(pb::GetReactorStatsResponse { reactors }))
    }

    async fn get_pool_stats(
        &self,
        _req: Request<pb::GetPoolStatsRequest>,
    ) -> Result<Response<pb::GetPoolStatsResponse>, Status> {
        let pools = vec![pool_msg(
            &self.engine,
            self.engine.registry().io_pool_stats(),
        )];
        Ok(Response::new(pb::GetPoolStatsResponse { pools }))
    }
}

fn pool_msg(engine: &Engine, p: PoolStats) -> pb::PoolStats {
    let total = p.total();
    pb::PoolStats {
        name: p.name,
        capacity: p.capacity,
        cache_size: p.cache_size,
        available: p.available,
        in_use: p.in_use,
        exhausted: total.exhausted,
        cores: p
            .per_core
            .iter()
            .map(|c| pb::PoolCoreStats {
                core: c
                    .slot
                    .and_then(|s| engine.reactors().index_of_slot(s))
                    .map(|i| i as u32),
                gets: c.gets,
                puts: c.puts,
                cache_hits: c.cache_hits,
                cache_misses: c.cache_misses,
                exhausted: c.exhausted,
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl pb::engine_service_server::EngineService for Services {
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
        Ok(Response::new(pb::EngineInfo {
            version: BUILD.version.into(),
            git_revision: BUILD.revision.into(),
            cores: e.config().cores.cpus().to_vec(),
            poll_mode: e.config().poll_mode.name().into(),
            uptime_ns: e.uptime().as_nanos() as u64,
            hugepages,
            accel_modules: self
                .engine
                .accel()
                .modules()
                .into_iter()
                .map(|m| m.name.to_string())
                .collect(),
            io_pool_size: e.config().io_pool_size as u64,
            io_pool_cache: e.config().io_pool_cache as u64,
            accel_notes: {
                let accel = e.accel();
                let mut notes = accel.module_notes();
                notes.extend(accel.notes());
                notes
            },
        }))
    }
}

fn job_msg(r: &JobRow) -> pb::PerfJob {
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

#[tonic::async_trait]
impl pb::perf_service_server::PerfService for Services {
    async fn run(
        &self,
        req: Request<pb::RunPerfRequest>,
    ) -> Result<Response<pb::RunPerfResponse>, Status> {
        let r = req.into_inner();
        let workload = Workload::from_str(&r.workload, true).map_err(|_| {
            status::invalid(format!(
                "unknown workload {:?}: expected read, write, randread, randwrite or randrw",
                r.workload
            ))
        })?;
        let spec = PerfSpec {
            bdevs: r.bdevs,
            cores: r.cores.into_iter().map(|c| c as usize).collect(),
            workload,
            io_size: if r.io_size == 0 { 4096 } else { r.io_size },
            queue_depth: if r.queue_depth == 0 {
                32
            } else {
                r.queue_depth
            },
            read_percent: r.read_percent.unwrap_or(50),
            verify: r.verify,
            seconds: r.seconds,
        };
        let engine = self.engine.clone();
        // Buffers are mapped on this call: off the async workers.
        let running = blocking(move || perf::start(engine.reactors(), engine.registry(), &spec))
            .await?
            .map_err(status::perf)?;
        let rows = running.finish().await.map_err(status::perf)?;
        let total = JobRow::total(&rows);
        Ok(Response::new(pb::RunPerfResponse {
            jobs: rows.iter().map(job_msg).collect(),
            total: Some(job_msg(&total)),
        }))
    }
}

fn export_msg(engine: &Engine, s: crate::export::ShareInfo) -> pb::Export {
    pb::Export {
        uri: engine.nbd_uri(&s.name),
        bdev: s.name,
        protocol: s.protocol.as_str().into(),
        read_only: s.read_only,
        connections: s.connections as u32,
    }
}

#[tonic::async_trait]
impl pb::export_service_server::ExportService for Services {
    async fn share(&self, req: Request<pb::ShareRequest>) -> Result<Response<pb::Export>, Status> {
        let r = req.into_inner();
        let Some(protocol) = Protocol::from_name(&r.protocol) else {
            return Err(status::invalid(format!(
                "unknown protocol {:?}: this engine exports over nbd",
                r.protocol
            )));
        };
        let share = self
            .engine
            .share(&r.bdev, protocol, r.read_only)
            .map_err(status::export)?;
        Ok(Response::new(export_msg(&self.engine, share)))
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
            .exports()
            .list()
            .into_iter()
            .map(|s| export_msg(&self.engine, s))
            .collect();
        Ok(Response::new(pb::ListExportsResponse { exports }))
    }
}

#[tonic::async_trait]
impl pb::accel_service_server::AccelService for Services {
    async fn list_modules(
        &self,
        _req: Request<pb::ListModulesRequest>,
    ) -> Result<Response<pb::ListModulesResponse>, Status> {
        let modules = self
            .engine
            .accel()
            .modules()
            .into_iter()
            .map(|m| pb::AccelModule {
                name: m.name.into(),
                opcodes: m.opcodes.iter().map(|o| o.name().into()).collect(),
                max_batch: m.max_batch as u64,
                max_transfer: m.max_transfer as u64,
                implementation: m.implementation,
            })
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
        let (ops, mods) = self.engine.accel().stats();
        Ok(Response::new(pb::GetAccelStatsResponse {
            ops: ops
                .into_iter()
                .map(|s| pb::AccelOpStats {
                    opcode: s.opcode.name().into(),
                    module: s.module.into(),
                    executed: s.executed,
                    failed: s.failed,
                    miscompares: s.miscompares,
                    bytes: s.bytes,
                })
                .collect(),
            modules: mods
                .into_iter()
                .map(|m| pb::AccelModuleStats {
                    module: m.module.into(),
                    batches: m.batches,
                })
                .collect(),
        }))
    }
}
