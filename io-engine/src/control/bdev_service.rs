//! `io_engine.v1.BdevService`: create, destroy, get and list devices.
//!
//! Thread: the control-plane runtime. `Create` and `Destroy` run their
//! registry call on the blocking pool (mapping or unmapping a malloc
//! device's memory takes time); `Get` and `List` run on the worker.

use std::sync::Arc;

use io_engine_api::v1 as pb;
use tonic::{Request, Response, Status};

use super::blocking::blocking;
use super::status;
use crate::bdev::{BdevError, BdevInfo};
use crate::engine::Engine;

/// The device service over the engine.
#[derive(Clone)]
pub struct BdevService {
    engine: Arc<Engine>,
}

impl BdevService {
    /// The service over `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        BdevService { engine }
    }

    /// The message for device `info`, with its share if it has one.
    fn message(&self, info: BdevInfo) -> pb::Bdev {
        let share = self.engine.share_view(&info.name);
        pb::Bdev {
            shared: share.is_some(),
            share_uri: share.map(|s| s.uri).unwrap_or_default(),
            name: info.name,
            uuid: info.uuid.to_string(),
            uri: info.uri,
            product: info.product,
            backing_path: info.backing_path.unwrap_or_default(),
            backing_kind: info.backing_kind.unwrap_or_default(),
            volatile_write_cache: info.volatile_write_cache,
            block_size: info.block_size,
            num_blocks: info.num_blocks,
            size_bytes: info.size_bytes,
            claimed: info.open > 0,
            open_count: info.open as u32,
        }
    }
}

#[tonic::async_trait]
impl pb::bdev_service_server::BdevService for BdevService {
    async fn create(
        &self,
        req: Request<pb::CreateBdevRequest>,
    ) -> Result<Response<pb::Bdev>, Status> {
        let uri = req.into_inner().uri;
        let registry = self.engine.registry().clone();
        let info = blocking(move || registry.create(&uri))
            .await?
            .map_err(status::bdev)?;
        Ok(Response::new(self.message(info)))
    }

    async fn destroy(
        &self,
        req: Request<pb::DestroyBdevRequest>,
    ) -> Result<Response<pb::DestroyBdevResponse>, Status> {
        let name = req.into_inner().name;
        let engine = self.engine.clone();
        blocking(move || engine.destroy_bdev(&name))
            .await?
            .map_err(status::destroy)?;
        Ok(Response::new(pb::DestroyBdevResponse {}))
    }

    async fn get(&self, req: Request<pb::GetBdevRequest>) -> Result<Response<pb::Bdev>, Status> {
        let name = req.into_inner().name;
        self.engine
            .registry()
            .get(&name)
            .map(|i| Response::new(self.message(i)))
            .ok_or_else(|| status::bdev(BdevError::NotFound(name)))
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
            .map(|i| self.message(i))
            .collect();
        Ok(Response::new(pb::ListBdevsResponse { bdevs }))
    }
}
