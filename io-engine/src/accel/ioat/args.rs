//! [`IoatArgs`]: the I/OAT flags the daemon, accel-perf and bdev-perf
//! share, and the module they ask for.
//!
//! Thread: the thread that builds the engine (the binaries' main thread).

use std::sync::Arc;

use super::devices::{IoatDevices, MODEL_NOT_BUILT};
use super::options::IoatOptions;
use crate::accel::{Module, model_count};
use crate::env::dma::{DmaMapper, MapperRegistration};

/// The I/OAT flags the daemon, accel-perf and bdev-perf share.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct IoatArgs {
    /// Run copy and fill on the Intel I/OAT DMA functions bound to
    /// vfio-pci (see docs/ioat.md). Without a usable one the engine runs on
    /// software and says why (in the log and in GetInfo's accel notes).
    #[arg(long = "ioat", env = "IO_ENGINE_IOAT", conflicts_with = "ioat_model")]
    pub ioat: bool,

    /// With --ioat: only these PCI functions, e.g. 0000:00:04.0 (comma
    /// separated).
    #[arg(
        long = "ioat-devices",
        value_name = "BDF",
        env = "IO_ENGINE_IOAT_DEVICES",
        value_delimiter = ',',
        requires = "ioat"
    )]
    pub ioat_devices: Vec<String>,

    /// Run copy and fill on N channels of the I/OAT device model: a
    /// software I/OAT device (a thread per channel) behind the same driver,
    /// for demos and tests; it measures the driver, not hardware. Only in
    /// binaries built with the `ioat-model` cargo feature.
    #[arg(
        long = "ioat-model",
        value_name = "N",
        env = "IO_ENGINE_IOAT_MODEL",
        default_value_t = 0,
        value_parser = |s: &str| model_count(s, MODEL_BUILT_IN, MODEL_NOT_BUILT)
    )]
    pub ioat_model: usize,
}

/// Whether this build has the device model (the `ioat-model` feature;
/// the unit tests always have it).
const MODEL_BUILT_IN: bool = cfg!(any(test, feature = "ioat-model"));

impl IoatArgs {
    /// The options these flags ask for.
    pub fn options(&self) -> IoatOptions {
        IoatOptions {
            hardware: self.ioat,
            devices: self.ioat_devices.clone(),
            model_channels: self.ioat_model,
            ..IoatOptions::default()
        }
    }

    /// The module these flags ask for, as the offload list of an
    /// [`Accel`](crate::accel::Accel) (empty without I/OAT flags).
    ///
    /// The devices reach DMA memory through their mapper, which the caller
    /// registers with `register` before any channel starts: the binaries
    /// pass [`register_mapper`](crate::env::dma::register_mapper), so env
    /// tells the devices of every DMA region, made before or after.
    pub fn modules(
        &self,
        register: impl FnOnce(Arc<dyn DmaMapper>) -> MapperRegistration,
    ) -> Vec<Arc<dyn Module>> {
        IoatDevices::open(&self.options())
            .map(|devices| {
                let mapping = register(devices.mapper());
                Arc::new(devices.start(mapping)) as Arc<dyn Module>
            })
            .into_iter()
            .collect()
    }
}
