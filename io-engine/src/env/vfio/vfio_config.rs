//! [`VfioConfig`]: a VFIO device's PCI configuration space as the driver's
//! [`PciConfig`] seam, through the config region accessors of
//! [`VfioDeviceOps`].
//!
//! Thread: the thread that holds the channel (the one that starts it, then
//! the reactor that uses it).

use std::sync::Arc;

use super::pci_config::PciConfig;
use super::vfio_device_ops::VfioDeviceOps;

/// The configuration space of an opened VFIO device.
pub struct VfioConfig(pub Arc<dyn VfioDeviceOps>);

impl PciConfig for VfioConfig {
    fn read16(&self, off: u64) -> u16 {
        self.0.config_read16(off)
    }
    fn read32(&self, off: u64) -> u32 {
        self.0.config_read32(off)
    }
    fn write16(&self, off: u64, v: u16) {
        self.0.config_write16(off, v)
    }
    fn write32(&self, off: u64, v: u32) {
        self.0.config_write32(off, v)
    }

    /// Asks for the reset (`VFIO_DEVICE_RESET`) but cannot confirm it:
    /// `vfio-ioctls` reports no result, and vfio-pci restores the command
    /// register (bus mastering included) after the reset. So it answers
    /// false, and the driver turns bus mastering off and reads it back.
    fn function_reset(&self) -> bool {
        self.0.reset();
        false
    }
}
