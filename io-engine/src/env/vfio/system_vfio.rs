//! [`SystemVfio`]: VFIO through the kernel (`vfio-ioctls`), the
//! [`VfioOps`] the binaries use.
//!
//! Thread: the thread that opens the devices (the engine's main thread).

use std::sync::Arc;

use super::system_container::SystemContainer;
use super::vfio_container_ops::VfioContainerOps;
use super::vfio_failure::VfioFailure;
use super::vfio_ops::VfioOps;

/// VFIO through the kernel (`vfio-ioctls`).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemVfio;

impl VfioOps for SystemVfio {
    fn open_container(&self) -> Result<Arc<dyn VfioContainerOps>, VfioFailure> {
        match vfio_ioctls::VfioContainer::new(None) {
            Ok(c) => Ok(Arc::new(SystemContainer(Arc::new(c)))),
            Err(vfio_ioctls::VfioError::OpenContainer(e)) => Err(VfioFailure::Container(e)),
            Err(vfio_ioctls::VfioError::VfioExtension) => Err(VfioFailure::NoType1),
            Err(e) => Err(VfioFailure::Other(format!("the VFIO container: {e}"))),
        }
    }

    fn hugepages(&self) -> u64 {
        crate::env::dma::hugepage_info().map_or(0, |h| h.total)
    }
}
