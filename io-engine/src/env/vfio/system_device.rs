//! [`SystemDevice`]: a VFIO device through the kernel (`vfio-ioctls`):
//! configuration space accesses, what VFIO says of each BAR, and any
//! BAR's window mmapped (as [`Registers`] or as [`BarMemory`]).
//!
//! Thread: the thread that opens the device, then the thread holding what
//! it mapped (configuration space accesses, the reset on drop).

use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;

use super::bar_memory::BarMemory;
use super::mmio::Mmio;
use super::region_info::RegionInfo;
use super::registers::Registers;
use super::vfio_device_ops::VfioDeviceOps;
use super::vfio_failure::VfioFailure;

/// A VFIO device through the kernel.
pub(super) struct SystemDevice(pub(super) Arc<vfio_ioctls::VfioDevice>);

impl SystemDevice {
    /// `window` of BAR `index` mmapped from the device fd.
    fn mmap(&self, index: u32, window: Range<u64>) -> Result<Mmio, VfioFailure> {
        use std::os::fd::{AsRawFd, BorrowedFd};
        use vfio_bindings::bindings::vfio::VFIO_PCI_BAR0_REGION_INDEX;
        if index > 5 {
            return Err(VfioFailure::Other(format!("no BAR{index}")));
        }
        let offset = self.0.get_region_offset(VFIO_PCI_BAR0_REGION_INDEX + index) + window.start;
        let len = (window.end - window.start) as usize;
        // SAFETY: the device fd stays open as long as `self.0`, which the
        // mapping keeps (`Mmio::_dev`).
        let fd = unsafe { BorrowedFd::borrow_raw(self.0.as_raw_fd()) };
        // SAFETY: a new shared mapping of `window` of the device's BAR at
        // an address the kernel picks; it overlaps nothing in use.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
                fd,
                offset,
            )
        }
        .map_err(|e| VfioFailure::Other(format!("mmap of BAR{index}: {e}")))?;
        let ptr = NonNull::new(ptr.cast())
            .ok_or_else(|| VfioFailure::Other(format!("mmap of BAR{index}: a null mapping")))?;
        Ok(Mmio {
            ptr,
            bar: index,
            start: window.start as usize,
            len,
            _dev: self.0.clone(),
        })
    }

    /// `N` bytes of configuration space at `off` (one access).
    fn config_read<const N: usize>(&self, off: u64) -> [u8; N] {
        let mut b = [0u8; N];
        self.0.region_read(
            vfio_bindings::bindings::vfio::VFIO_PCI_CONFIG_REGION_INDEX,
            &mut b,
            off,
        );
        b
    }

    /// `b` written to configuration space at `off` (one access).
    fn config_write(&self, off: u64, b: &[u8]) {
        self.0.region_write(
            vfio_bindings::bindings::vfio::VFIO_PCI_CONFIG_REGION_INDEX,
            b,
            off,
        );
    }
}

impl VfioDeviceOps for SystemDevice {
    fn config_read16(&self, off: u64) -> u16 {
        u16::from_le_bytes(self.config_read(off))
    }

    fn config_write16(&self, off: u64, v: u16) {
        self.config_write(off, &v.to_le_bytes());
    }

    fn config_read32(&self, off: u64) -> u32 {
        u32::from_le_bytes(self.config_read(off))
    }

    fn config_write32(&self, off: u64, v: u32) {
        self.config_write(off, &v.to_le_bytes());
    }

    fn bar_info(&self, index: u32) -> RegionInfo {
        use vfio_bindings::bindings::vfio::{
            VFIO_PCI_BAR0_REGION_INDEX, VFIO_REGION_INFO_FLAG_MMAP,
        };
        use vfio_ioctls::VfioRegionInfoCap;
        let idx = VFIO_PCI_BAR0_REGION_INDEX + index;
        let mut info = RegionInfo {
            size: self.0.get_region_size(idx),
            mmap: self.0.get_region_flags(idx) & VFIO_REGION_INFO_FLAG_MMAP != 0,
            sparse: None,
            msix_mappable: false,
        };
        for cap in self.0.get_region_caps(idx) {
            match cap {
                VfioRegionInfoCap::SparseMmap(s) => {
                    info.sparse = Some(
                        s.areas
                            .iter()
                            .map(|a| a.offset..a.offset + a.size)
                            .collect(),
                    )
                }
                VfioRegionInfoCap::MsixMappable => info.msix_mappable = true,
                _ => {}
            }
        }
        info
    }

    fn map_bar(&self, index: u32, window: Range<u64>) -> Result<Box<dyn Registers>, VfioFailure> {
        Ok(Box::new(self.mmap(index, window)?))
    }

    fn map_bar_memory(
        &self,
        index: u32,
        window: Range<u64>,
    ) -> Result<Box<dyn BarMemory>, VfioFailure> {
        Ok(Box::new(self.mmap(index, window)?))
    }

    fn reset(&self) {
        self.0.reset();
    }
}
