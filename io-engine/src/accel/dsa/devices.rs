//! Work queues of the DSA device model as hardware for the driver
//! (`--dsa-model N`, tests).
//!
//! Thread: the thread that builds the engine.

use std::sync::Arc;

use super::driver::Hardware;
use super::model::{DsaModel, ModelConfig, WqConfig};
use crate::env::dma::DmaMapper;

/// One model device with `n` dedicated work queues (the model's defaults:
/// 128 entries, 2 MiB transfers, batches of up to 1024), each a channel's
/// hardware, and the mapper that makes DMA memory visible to the device;
/// the caller registers it before any channel starts. Each work queue
/// keeps the device (and its thread) alive.
pub fn models(n: usize) -> (Vec<Hardware>, Arc<dyn DmaMapper>) {
    model_hardware(ModelConfig {
        wqs: vec![WqConfig::default(); n.max(1)],
        ..ModelConfig::default()
    })
}

/// Every work queue of a model device made with `cfg`, as hardware, and
/// its mapper.
pub fn model_hardware(cfg: ModelConfig) -> (Vec<Hardware>, Arc<dyn DmaMapper>) {
    let model = Arc::new(DsaModel::new(cfg));
    (hardware_of(&model), model.mapper())
}

/// Every work queue of `model` as hardware, each keeping the model (and
/// its device thread) alive.
pub fn hardware_of(model: &Arc<DsaModel>) -> Vec<Hardware> {
    model
        .work_queues()
        .into_iter()
        .map(|wq| Hardware {
            wq,
            keep: Some(Box::new(model.clone())),
        })
        .collect()
}
