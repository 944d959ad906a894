//! [`DsaArgs`]: the DSA flags the daemon and accel-perf share, and the
//! module they ask for.
//!
//! Thread: the thread that builds the engine (the binaries' main thread).

use std::sync::Arc;

use super::driver::{DriverConfig, Hardware};
use super::idxd;
use super::module::Dsa;
use crate::accel::Module;
use crate::accel::ioat::vfio::SysfsRoot;
use crate::env::dma::{DmaMapper, MapperRegistration};

/// The DSA flags the daemon and accel-perf share.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DsaArgs {
    /// Run accel operations on the Intel DSA work queues the kernel's idxd
    /// driver exposes (`/dev/dsa/wqD.Q`, user work queues configured with
    /// accel-config; see docs/dsa.md). Without a usable one the engine runs
    /// on software and says why (in the log and in GetInfo's accel notes).
    #[arg(long = "dsa", env = "IO_ENGINE_DSA")]
    pub dsa: bool,

    /// With --dsa: only these work queues, e.g. dsa0/wq0.1 (comma
    /// separated).
    #[arg(
        long = "dsa-wqs",
        value_name = "WQ",
        env = "IO_ENGINE_DSA_WQS",
        value_delimiter = ',',
        requires = "dsa"
    )]
    pub dsa_wqs: Vec<String>,
}

impl DsaArgs {
    /// Whether any DSA flag asked for the module.
    pub fn wanted(&self) -> bool {
        self.dsa
    }

    /// The module these flags ask for, as the offload list of an
    /// [`Accel`](crate::accel::Accel) (empty without DSA flags). The model's
    /// memory is made visible to it through a mapper the caller registers
    /// with `register` (the binaries pass
    /// [`register_mapper`](crate::env::dma::register_mapper)); work queues
    /// of the kernel's idxd driver need none (shared virtual addressing).
    pub fn modules(
        &self,
        _register: impl FnOnce(Arc<dyn DmaMapper>) -> MapperRegistration,
    ) -> Vec<Arc<dyn Module>> {
        if !self.wanted() {
            return Vec::new();
        }
        let cfg = DriverConfig::default();
        let mut hardware: Vec<Hardware> = Vec::new();
        let mut notes = Vec::new();
        if self.dsa {
            let found = idxd::discover(&SysfsRoot::system(), &self.dsa_wqs);
            let (hw, n) = idxd::open_all(found, &idxd::SystemIdxd);
            hardware.extend(hw);
            notes.extend(n);
        }
        let dsa = Dsa::start(hardware, &cfg, notes);
        dsa.log();
        vec![Arc::new(dsa) as Arc<dyn Module>]
    }
}
