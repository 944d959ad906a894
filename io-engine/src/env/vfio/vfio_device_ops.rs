//! [`VfioDeviceOps`]: an opened VFIO device (one PCI function) as the
//! backend and [`VfioConfig`](super::vfio_config::VfioConfig) use it: the
//! seam behind which the kernel (or the tests' fake) sits.
//!
//! Thread: the thread that opens the device, then the reactor holding its
//! channel (configuration space accesses).

use std::ops::Range;

use super::bar_memory::BarMemory;
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
    /// What VFIO says of BAR `index` (0 to 5; `VFIO_DEVICE_GET_REGION_INFO`).
    fn bar_info(&self, index: u32) -> RegionInfo;
    /// `window` of BAR `index` mapped as registers; their accesses are
    /// bounded to it, at offsets in the BAR.
    fn map_bar(&self, index: u32, window: Range<u64>) -> Result<Box<dyn Registers>, VfioFailure>;
    /// `window` of BAR `index` mapped as memory (a DSA portal page).
    fn map_bar_memory(
        &self,
        index: u32,
        window: Range<u64>,
    ) -> Result<Box<dyn BarMemory>, VfioFailure>;
    /// Function-level reset, where the device has one.
    fn reset(&self);
}
