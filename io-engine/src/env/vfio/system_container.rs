//! [`SystemContainer`]: a VFIO container through the kernel
//! (`vfio-ioctls`), with the one ioctl `vfio-ioctls` does not issue
//! (`VFIO_IOMMU_GET_INFO`).
//!
//! Thread: the thread that opens the devices; the mapping calls then come
//! from whichever thread makes or drops a DMA region.

use std::sync::Arc;

use super::iommu_info::{INFO_SIZE, IommuInfo};
use super::pci_function::PciFunction;
use super::system_device::SystemDevice;
use super::vfio_container_ops::VfioContainerOps;
use super::vfio_device_ops::VfioDeviceOps;
use super::vfio_failure::VfioFailure;

/// A VFIO container through the kernel.
pub(super) struct SystemContainer(pub(super) Arc<vfio_ioctls::VfioContainer>);

impl VfioContainerOps for SystemContainer {
    fn open_device(&self, f: &PciFunction) -> Result<Box<dyn VfioDeviceOps>, VfioFailure> {
        let ops: Arc<dyn vfio_ioctls::VfioOps> = self.0.clone();
        match vfio_ioctls::VfioDevice::new(&f.path, ops, false) {
            Ok(d) => Ok(Box::new(SystemDevice(Arc::new(d)))),
            Err(vfio_ioctls::VfioError::GroupViable) => {
                Err(VfioFailure::NotViable(f.iommu_group.unwrap_or(0)))
            }
            Err(vfio_ioctls::VfioError::OpenGroup(e, _)) => {
                Err(VfioFailure::GroupOpen(f.iommu_group.unwrap_or(0), e))
            }
            Err(e) => Err(VfioFailure::Other(format!("opening the device: {e}"))),
        }
    }

    unsafe fn dma_map(&self, iova: u64, len: usize, va: *mut u8) -> Result<(), VfioFailure> {
        // SAFETY: the caller's contract is vfio_dma_map's.
        unsafe { self.0.vfio_dma_map(iova, len, va) }.map_err(|e| match e {
            vfio_ioctls::VfioError::IommuDmaMap(errno) => VfioFailure::Iommu(
                "VFIO_IOMMU_MAP_DMA",
                std::io::Error::from_raw_os_error(errno.errno()),
            ),
            e => VfioFailure::Other(format!("VFIO_IOMMU_MAP_DMA: {e}")),
        })
    }

    fn dma_unmap(&self, iova: u64, len: usize) -> Result<(), VfioFailure> {
        self.0
            .vfio_dma_unmap(iova, len)
            .map_err(|e| VfioFailure::Other(format!("VFIO_IOMMU_UNMAP_DMA: {e}")))
    }

    fn iommu_info(&self) -> Result<IommuInfo, VfioFailure> {
        use std::os::fd::AsRawFd;
        use vfio_bindings::bindings::vfio::{VFIO_BASE, VFIO_TYPE};
        // VFIO_IOMMU_GET_INFO = _IO(VFIO_TYPE, VFIO_BASE + 12), issued on
        // the container's fd here because vfio-ioctls (0.10) does not issue
        // it, and no crate parses its capability chain; QEMU's
        // `vfio_get_iommu_info` and DPDK's `vfio_get_iommu_info` do the same:
        // ask with the base size, then again with the size the kernel wants.
        const GET_INFO: u32 = (VFIO_TYPE as u32) << 8 | (VFIO_BASE + 12);
        let fd = self.0.as_raw_fd();
        let mut argsz = INFO_SIZE;
        for _ in 0..2 {
            // u64 words: the structure's alignment.
            let mut buf = vec![0u64; argsz.div_ceil(8)];
            let bytes = buf.len() * 8;
            // argsz, then flags (0): the first two u32s.
            let mut head = [0u8; 8];
            head[..4].copy_from_slice(&(bytes as u32).to_ne_bytes());
            buf[0] = u64::from_ne_bytes(head);
            // SAFETY: the container's fd is open (`self.0`); the kernel
            // writes at most `argsz` bytes into `buf`, which holds them.
            let rc = unsafe { libc::ioctl(fd, GET_INFO as _, buf.as_mut_ptr()) };
            if rc != 0 {
                return Err(VfioFailure::Iommu(
                    "VFIO_IOMMU_GET_INFO",
                    std::io::Error::last_os_error(),
                ));
            }
            // SAFETY: `bytes` bytes of `buf`, initialised u64s, viewed as
            // bytes (no padding, any value valid).
            let raw = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), bytes) };
            let wanted = u32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
            if wanted <= bytes {
                return IommuInfo::parse(raw).ok_or_else(|| {
                    VfioFailure::Other("VFIO_IOMMU_GET_INFO: a malformed answer".into())
                });
            }
            argsz = wanted;
        }
        Err(VfioFailure::Other(
            "VFIO_IOMMU_GET_INFO: the kernel keeps asking for a larger buffer".into(),
        ))
    }
}
