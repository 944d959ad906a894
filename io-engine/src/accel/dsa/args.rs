//! [`DsaArgs`]: the DSA flags the daemon and accel-perf share, and the
//! module they ask for.
//!
//! Thread: the thread that builds the engine (the binaries' main thread).

use std::sync::Arc;

use super::driver::{DriverConfig, Hardware};
use super::module::Dsa;
use super::{idxd, vfio};
use crate::accel::{Module, model_count};
use crate::env::dma::{DmaMapper, MapperRegistration};
use crate::env::vfio::{SysfsRoot, SystemVfio};

/// Why `--dsa-model` is refused by a build without the model.
pub(super) const MODEL_NOT_BUILT: &str = "--dsa-model needs the DSA device model, which this \
     binary was built without: build it with the `dsa-model` cargo feature (`cargo build \
     --release -p io-engine --features dsa-model`)";

/// The DSA flags the daemon and accel-perf share.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DsaArgs {
    /// Run accel operations on the Intel DSA work queues the kernel's idxd
    /// driver exposes (`/dev/dsa/wqD.Q`, user work queues configured with
    /// accel-config) and on DSA functions bound to vfio-pci (WQ 0 of each,
    /// configured by the engine); see docs/dsa.md. Without a usable one the
    /// engine runs on software and says why (in the log and in GetInfo's
    /// accel notes).
    #[arg(long = "dsa", env = "IO_ENGINE_DSA", conflicts_with = "dsa_model")]
    pub dsa: bool,

    /// With --dsa: only these work queues of the idxd driver, e.g.
    /// dsa0/wq0.1 (comma separated); functions bound to vfio-pci are all
    /// used.
    #[arg(
        long = "dsa-wqs",
        value_name = "WQ",
        env = "IO_ENGINE_DSA_WQS",
        value_delimiter = ',',
        requires = "dsa"
    )]
    pub dsa_wqs: Vec<String>,

    /// Run accel operations on N work queues of the DSA device model: a
    /// software DSA device behind the same driver, for demos and tests; it
    /// measures the driver, not hardware. Only in binaries built with the
    /// `dsa-model` cargo feature.
    #[arg(
        long = "dsa-model",
        value_name = "N",
        env = "IO_ENGINE_DSA_MODEL",
        default_value_t = 0,
        value_parser = |s: &str| model_count(s, MODEL_BUILT_IN, MODEL_NOT_BUILT)
    )]
    pub dsa_model: usize,
}

/// Whether this build has the device model.
const MODEL_BUILT_IN: bool = cfg!(any(test, feature = "dsa-model"));

impl DsaArgs {
    /// Whether any DSA flag asked for the module.
    pub fn wanted(&self) -> bool {
        self.dsa || self.dsa_model > 0
    }

    /// The module these flags ask for, as the offload list of an
    /// [`Accel`](crate::accel::Accel) (empty without DSA flags). The memory
    /// of the model, or of the VFIO functions (their container's IOMMU), is
    /// made visible to them through a mapper the caller registers with
    /// `register` (the binaries pass
    /// [`register_mapper`](crate::env::dma::register_mapper)); work queues
    /// of the kernel's idxd driver need none (shared virtual addressing).
    pub fn modules(
        &self,
        register: impl FnOnce(Arc<dyn DmaMapper>) -> MapperRegistration,
    ) -> Vec<Arc<dyn Module>> {
        if !self.wanted() {
            return Vec::new();
        }
        let cfg = DriverConfig::default();
        let mut hardware: Vec<Hardware> = Vec::new();
        let mut notes = Vec::new();
        let mut register = Some(register);
        if self.dsa {
            let root = SysfsRoot::system();
            let found = idxd::discover(&root, &self.dsa_wqs);
            let (hw, n) = idxd::open_all(found, &idxd::SystemIdxd);
            let idxd_found = !hw.is_empty();
            hardware.extend(hw);
            notes.extend(n);
            let found = vfio::open_all(&root, &SystemVfio, idxd_found);
            notes.extend(found.notes);
            if let Some(mapper) = found.mapper
                && let Some(register) = register.take()
            {
                // Every VFIO work queue keeps the registration: the IOMMU
                // maps DMA memory while one is in use.
                hardware.extend(Hardware::all_keeping(found.hardware, register(mapper)));
            }
        }
        #[cfg(any(test, feature = "dsa-model"))]
        if self.dsa_model > 0
            && let Some(register) = register.take()
        {
            let (models, mapper) = super::devices::models(self.dsa_model);
            hardware.extend(Hardware::all_keeping(models, register(mapper)));
        }
        let dsa = Dsa::start(hardware, &cfg, notes);
        dsa.log();
        vec![Arc::new(dsa) as Arc<dyn Module>]
    }
}
