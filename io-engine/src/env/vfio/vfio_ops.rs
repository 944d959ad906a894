//! [`VfioOps`]: the kernel's VFIO interface as the backends use it, the
//! seam behind which the kernel ([`SystemVfio`](super::SystemVfio)) or
//! the tests' fake sits (as rust-vmm's `vfio_ioctls.rs` does).
//!
//! Thread: the thread that opens the devices (the engine's main thread).

use std::sync::Arc;

use super::vfio_container_ops::VfioContainerOps;
use super::vfio_failure::VfioFailure;

/// The kernel's VFIO interface, as the backend uses it.
pub trait VfioOps: Send + Sync {
    /// Opens a container (`/dev/vfio/vfio`) with the type-1 IOMMU.
    fn open_container(&self) -> Result<Arc<dyn VfioContainerOps>, VfioFailure>;
    /// 2 MiB hugepages reserved on the host.
    fn hugepages(&self) -> u64;
}
