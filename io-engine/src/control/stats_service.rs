//! `io_engine.v1.StatsService`: device IO counters (and their reset),
//! reactor and pool counters, all read from one [`Snapshot`] of the engine,
//! the same reading a Prometheus scrape reports.
//!
//! Thread: the control-plane runtime's workers; `ResetIoStats` awaits a
//! message to each reactor.

use std::sync::Arc;

use io_engine_api::v1 as pb;
use tonic::{Request, Response, Status};

use super::status;
use crate::bdev::{BdevError, IoStats, IoType, OpStats};
use crate::engine::{Engine, Snapshot};
use crate::pool::PoolStats;
use crate::reactor::ReactorStats;

/// The statistics service over the engine.
#[derive(Clone)]
pub struct StatsService {
    engine: Arc<Engine>,
}

impl StatsService {
    /// The service over `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        StatsService { engine }
    }
}

impl From<&OpStats> for pb::OpStats {
    fn from(o: &OpStats) -> Self {
        pb::OpStats {
            ops: o.ops,
            bytes: o.bytes,
            errors: o.errors,
            latency_total_ns: o.latency_total_ns,
            latency_min_ns: o.latency_min_ns.unwrap_or(0),
            latency_max_ns: o.latency_max_ns,
        }
    }
}

fn io_stats_msg(name: String, s: &IoStats) -> pb::BdevIoStats {
    let op = |t: IoType| Some(s.op(t).into());
    pb::BdevIoStats {
        name,
        read: op(IoType::Read),
        write: op(IoType::Write),
        unmap: op(IoType::Unmap),
        flush: op(IoType::Flush),
        write_zeroes: op(IoType::WriteZeroes),
        copy: op(IoType::Copy),
        in_flight: s.in_flight,
    }
}

impl From<ReactorStats> for pb::ReactorStats {
    fn from(r: ReactorStats) -> Self {
        pb::ReactorStats {
            core: r.index as u32,
            cpu: r.cpu,
            poll_mode: r.poll_mode.to_string(),
            iterations: r.iterations,
            busy_ns: r.busy_ns,
            idle_ns: r.idle_ns,
            messages: r.messages,
        }
    }
}

/// A pool's message; per-core counters by reactor index, unset for slots
/// no reactor holds and for the threads without one.
fn pool_msg(snapshot: &Snapshot, p: PoolStats) -> pb::PoolStats {
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
                    .and_then(|s| snapshot.core_of_slot(s))
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

/// An optional name: unset and empty both mean "every device".
fn name_filter(name: Option<String>) -> Option<String> {
    name.filter(|n| !n.is_empty())
}

#[tonic::async_trait]
impl pb::stats_service_server::StatsService for StatsService {
    async fn get_io_stats(
        &self,
        req: Request<pb::GetIoStatsRequest>,
    ) -> Result<Response<pb::GetIoStatsResponse>, Status> {
        let snapshot = self.engine.snapshot();
        let uptime_ns = snapshot.uptime.unwrap_or_default().as_nanos() as u64;
        let mut devices = status::snapshot_part(snapshot.devices, "device counters")?;
        if let Some(name) = name_filter(req.into_inner().name) {
            devices.retain(|d| d.info.name == name);
            if devices.is_empty() {
                return Err(status::bdev(BdevError::NotFound(name)));
            }
        }
        let stats = devices
            .into_iter()
            .map(|d| io_stats_msg(d.info.name, &d.stats))
            .collect();
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
        let reactors = status::snapshot_part(self.engine.snapshot().reactors, "reactor counters")?
            .into_iter()
            .map(Into::into)
            .collect();
        Ok(Response::new(pb::GetReactorStatsResponse { reactors }))
    }

    async fn get_pool_stats(
        &self,
        _req: Request<pb::GetPoolStatsRequest>,
    ) -> Result<Response<pb::GetPoolStatsResponse>, Status> {
        let mut snapshot = self.engine.snapshot();
        let pools = status::snapshot_part(snapshot.pools.take(), "pool counters")?
            .into_iter()
            .map(|p| pool_msg(&snapshot, p))
            .collect();
        Ok(Response::new(pb::GetPoolStatsResponse { pools }))
    }
}
