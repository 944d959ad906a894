//! [`VfioContainerOps`]: a VFIO container (an IOMMU domain) as the
//! backends use it: its devices, its IOMMU mappings, what its IOMMU can
//! address.
//!
//! Thread: the thread that opens the devices; the mapping calls then come
//! from whichever thread makes or drops a DMA region (see
//! [`DmaMapper`](crate::env::dma::DmaMapper)).

use super::iommu_info::IommuInfo;
use super::pci_function::PciFunction;
use super::vfio_device_ops::VfioDeviceOps;
use super::vfio_failure::VfioFailure;

/// A VFIO container: an IOMMU domain shared by its devices.
pub trait VfioContainerOps: Send + Sync {
    /// Opens the function at `sysfs` (its group joins the container).
    fn open_device(&self, f: &PciFunction) -> Result<Box<dyn VfioDeviceOps>, VfioFailure>;

    /// Maps `len` bytes at `va` at `iova` for every device of the
    /// container.
    ///
    /// # Safety
    ///
    /// Until unmapped, the devices may read and write the memory at any
    /// time: it must stay mapped in the process and only be reached
    /// through raw pointers (volatile, atomic, or handed to a device), as
    /// `vfio-ioctls`' `vfio_dma_map` says.
    unsafe fn dma_map(&self, iova: u64, len: usize, va: *mut u8) -> Result<(), VfioFailure>;

    /// Removes the mapping at `iova`.
    fn dma_unmap(&self, iova: u64, len: usize) -> Result<(), VfioFailure>;

    /// The IOMMU's page sizes and IOVA ranges (`VFIO_IOMMU_GET_INFO`;
    /// valid once a device is open).
    fn iommu_info(&self) -> Result<IommuInfo, VfioFailure>;
}
