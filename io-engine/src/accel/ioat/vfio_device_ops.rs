//! [`VfioDeviceOps`]: an opened VFIO device (one PCI function) as the
//! backend and [`VfioConfig`](super::vfio_config::VfioConfig) use it: the
//! seam behind which the kernel (or the tests' fake) sits.
//!
//! Thread: the thread that opens the device, then the reactor holding its
//! channel (configuration space accesses).

use std::ops::Range;

use super::region_info::RegionInfo;
use super::registers::Registers;
use super::vfio_failure::VfioFailure;

/// An opened VFIO device (one PCI function).
pub trait VfioDeviceOps: Send + Sync {
    /// 16-bit read of PCI configuration space.
    fn config_read16(&self, off: u64) -> u16;
    /// 16-bit write of PCI configuration space.
    fn config_write16(&self, off: u64, v: u16);
    /// 32-bit read of PCI configuration space.
    fn config_read32(&self, off: u64) -> u32;
    /// 32-bit write of PCI configuration space.
    fn config_write32(&self, off: u64, v: u32);
    /// What VFIO says of BAR0 (`VFIO_DEVICE_GET_REGION_INFO`).
    fn bar0_info(&self) -> RegionInfo;
    /// `window` of BAR0 mapped; its accesses are bounded to it.
    fn map_bar0(&self, window: Range<u64>) -> Result<Box<dyn Registers>, VfioFailure>;
    /// Function-level reset, where the device has one.
    fn reset(&self);
}
