//! [`Factory`]: the one place that builds a device of each kind from its
//! spec, so that whoever keeps devices (the registry) imports no device
//! kind.
//!
//! Thread: the thread creating the device (the control path); a malloc
//! device checks and maps its memory here, a `uring` or `aio` device opens
//! its backing.

use std::sync::Arc;

use super::device::Bdev;
use super::error::BdevError;
use super::file::FileDevice;
use super::malloc::Malloc;
use super::null::Null;
use super::uri::{BdevKind, BdevSpec};
use crate::accel::Accel;

/// Builds devices from specs; holds what devices need from the engine.
pub(super) struct Factory {
    /// The accel framework that moves the data of devices that move data.
    accel: Arc<Accel>,
}

impl Factory {
    /// A factory whose devices move data through `accel`.
    pub(super) fn new(accel: Arc<Accel>) -> Self {
        Factory { accel }
    }

    /// The device `spec` describes.
    pub(super) fn build(&self, spec: BdevSpec) -> Result<Arc<dyn Bdev>, BdevError> {
        Ok(match spec.kind {
            BdevKind::Null => Arc::new(Null::new(spec)),
            BdevKind::Malloc => {
                let name = spec.name.clone();
                Arc::new(
                    Malloc::new(spec, self.accel.clone())
                        .map_err(|source| BdevError::NoMemory { name, source })?,
                )
            }
            BdevKind::Uring | BdevKind::Aio => Arc::new(FileDevice::open(&spec).map_err(
                |source| BdevError::Backing {
                    name: spec.name.clone(),
                    source,
                },
            )?),
        })
    }
}
