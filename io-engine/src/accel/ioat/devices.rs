//! [`IoatDevices`]: I/OAT devices found and opened (VFIO functions, model
//! devices) whose channels are not started yet, and the [`DmaMapper`] that
//! makes DMA memory visible to them.
//!
//! A channel's bring-up allocates its descriptor ring in DMA memory the
//! device must reach, so the mapper is registered with env
//! ([`register_mapper`](crate::env::dma::register_mapper)) between opening
//! and starting, by whoever creates the module: [`IoatDevices::start`] takes
//! that registration and keeps it as long as any of the devices. The ioat
//! code never registers a mapper itself; env's calls into it go through the
//! registration its creator made.
//!
//! Thread: the thread that builds the engine (the binaries' main thread, a
//! test).

use std::sync::Arc;

use super::driver::{DriverConfig, Hardware};
#[cfg(any(test, feature = "ioat-model"))]
use super::identity_mapper::IdentityMapper;
#[cfg(any(test, feature = "ioat-model"))]
use super::model::{IoatModel, ModelConfig};
use super::module::Ioat;
use super::options::IoatOptions;
use super::vfio;
#[cfg(any(test, feature = "ioat-model"))]
use crate::env::dma::IovaMap;
use crate::env::dma::{DmaMapper, MapperRegistration};
use crate::env::vfio::{SysfsRoot, SystemVfio};

/// Why `--ioat-model` is refused by a build without the model.
pub(super) const MODEL_NOT_BUILT: &str = "--ioat-model needs the I/OAT device model, which \
     this binary was built without: build it with the `ioat-model` cargo feature (`cargo build \
     --release -p io-engine --features ioat-model`)";

#[cfg(any(test, feature = "ioat-model"))]
/// The least progress timeout of a model channel made from flags.
pub const MODEL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// I/OAT devices opened, channels not started: see the module doc.
pub struct IoatDevices {
    hardware: Vec<(Hardware, DriverConfig)>,
    notes: Vec<String>,
    mapper: Arc<dyn DmaMapper>,
}

impl IoatDevices {
    /// The devices the options ask for, opened, with what was found said
    /// in the notes. `None` when no I/OAT flag was given.
    pub fn open(opts: &IoatOptions) -> Option<IoatDevices> {
        if !opts.wanted() {
            return None;
        }
        let mut hardware = Vec::new();
        let mut notes = Vec::new();
        let mut mappers = Vec::new();
        if opts.hardware {
            let found = vfio::open_all(&SysfsRoot::system(), &SystemVfio, &opts.devices);
            hardware.extend(found.hardware.into_iter().map(|h| (h, opts.driver.clone())));
            notes.extend(found.notes);
            mappers.extend(found.mapper);
        }
        #[cfg(not(any(test, feature = "ioat-model")))]
        if opts.model_channels > 0 {
            notes.push(MODEL_NOT_BUILT.into());
        }
        #[cfg(any(test, feature = "ioat-model"))]
        if opts.model_channels > 0 {
            // The model's device thread shares the CPUs with everything
            // else (on a 2-CPU test machine, with the reactors and other
            // tests): a stall of a second there is the machine, not the
            // model. Real hardware keeps the configured timeout.
            let model_driver = DriverConfig {
                timeout: opts.driver.timeout.max(MODEL_TIMEOUT),
                ..opts.driver.clone()
            };
            let models = IoatDevices::models(opts.model_channels, &opts.model, &model_driver);
            hardware.extend(models.hardware);
            mappers.push(models.mapper);
        }
        let mapper = match <[_; 1]>::try_from(mappers) {
            Ok([one]) => one,
            Err(many) => Arc::new(Mappers(many)),
        };
        Some(IoatDevices {
            hardware,
            notes,
            mapper,
        })
    }

    /// `n` model devices sharing one address space (tests, demos).
    #[cfg(any(test, feature = "ioat-model"))]
    pub fn models(n: usize, model: &ModelConfig, driver: &DriverConfig) -> IoatDevices {
        let map = Arc::new(IovaMap::new());
        let hardware = (0..n)
            .map(|_| {
                let m = IoatModel::with_map(model.clone(), map.clone());
                (model_hardware(m), driver.clone())
            })
            .collect();
        IoatDevices {
            hardware,
            notes: Vec::new(),
            mapper: Arc::new(IdentityMapper(map)),
        }
    }

    /// Devices opened elsewhere (by [`vfio::open_all`], in a test), each
    /// run with `cfg`, all reaching DMA memory through `mapper`.
    pub fn new(
        hardware: Vec<Hardware>,
        cfg: &DriverConfig,
        mapper: Arc<dyn DmaMapper>,
        notes: Vec<String>,
    ) -> IoatDevices {
        IoatDevices {
            hardware: hardware.into_iter().map(|h| (h, cfg.clone())).collect(),
            notes,
            mapper,
        }
    }

    /// The mapper to register before [`IoatDevices::start`].
    pub fn mapper(&self) -> Arc<dyn DmaMapper> {
        self.mapper.clone()
    }

    /// Starts a channel on each device (those that fail are left out, with
    /// a note saying why) and logs the notes. `mapping` is the registration
    /// of [`IoatDevices::mapper`]; each device keeps it, so the memory
    /// stays mapped until the last device is reset.
    ///
    /// # Panics
    ///
    /// If `mapping` registers another mapper.
    pub fn start(self, mapping: MapperRegistration) -> Ioat {
        assert!(
            std::ptr::addr_eq(Arc::as_ptr(mapping.mapper()), Arc::as_ptr(&self.mapper)),
            "the I/OAT devices were started with another mapper's registration"
        );
        let mapping = Arc::new(mapping);
        let hardware = self
            .hardware
            .into_iter()
            .map(|(mut hw, cfg)| {
                // The device first (dropping it resets a VFIO function or
                // stops a model), then the registration (dropping the last
                // one unmaps the memory).
                hw.keep_also(mapping.clone());
                (hw, cfg)
            })
            .collect();
        let ioat = Ioat::start_each(hardware, self.notes);
        ioat.log();
        ioat
    }
}

/// Several devices' mappers as one (VFIO functions and model devices in
/// one module).
struct Mappers(Vec<Arc<dyn DmaMapper>>);

impl DmaMapper for Mappers {
    unsafe fn map(&self, addr: usize, len: usize) {
        for m in &self.0 {
            // SAFETY: the caller's contract, passed on unchanged.
            unsafe { m.map(addr, len) };
        }
    }
    fn unmap(&self, addr: usize, len: usize) {
        for m in &self.0 {
            m.unmap(addr, len);
        }
    }
}

#[cfg(any(test, feature = "ioat-model"))]
/// A model device as hardware for a channel (the channel keeps it alive).
pub fn model_hardware(m: IoatModel) -> Hardware {
    // SAFETY: the model's registers and configuration space, and its own
    // memory (its IOVA map, which its device thread resolves every address
    // through): the device reaches exactly what `memory()` says.
    unsafe {
        Hardware::new(
            m.name(),
            Box::new(m.registers()),
            Box::new(m.pci_config()),
            Arc::new(m.memory()),
            Some(Box::new(m)),
        )
    }
}
