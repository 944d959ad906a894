//! [`FakeContainer`]: the container of [`FakeVfio`]: opens its functions
//! as [`FakeDevice`]s, and maps and unmaps as vfio_iommu_type1 does
//! (refusing what it refuses), into the fake IOMMU the functions see.
//!
//! Thread: the test's, and whichever thread makes or drops a DMA region.

use std::sync::atomic::Ordering;

use super::fake_device::FakeDevice;
use super::fake_vfio::{FakeVfio, MSI_WINDOW};
use crate::env::dma::Window;
use crate::env::vfio::{IommuInfo, PciFunction, VfioContainerOps, VfioDeviceOps, VfioFailure};

/// A container of the fake VFIO, with its settings.
pub struct FakeContainer(pub FakeVfio);

fn einval(call: &'static str) -> VfioFailure {
    VfioFailure::Iommu(call, std::io::Error::from_raw_os_error(libc::EINVAL))
}

impl VfioContainerOps for FakeContainer {
    fn open_device(&self, f: &PciFunction) -> Result<Box<dyn VfioDeviceOps>, VfioFailure> {
        let vfio = &self.0;
        if let Some(fail) = vfio.device.get(f.bdf.as_str()) {
            return Err(fail());
        }
        vfio.state.opened.lock().unwrap().push(f.bdf.clone());
        vfio.state
            .command
            .lock()
            .unwrap()
            .entry(f.bdf.clone())
            .or_insert(0x0002);
        Ok(Box::new(FakeDevice {
            bdf: f.bdf.clone(),
            function: (vfio.function)(f, &vfio.state.iommu),
            vfio: vfio.clone(),
        }))
    }

    /// As vfio_iommu_type1's `vfio_dma_do_map`: EINVAL outside the
    /// IOVA ranges (`vfio_iommu_iova_dma_valid`), EEXIST on overlap.
    unsafe fn dma_map(&self, iova: u64, len: usize, va: *mut u8) -> Result<(), VfioFailure> {
        let state = &self.0.state;
        let last = iova + len as u64 - 1;
        if last >> self.0.iova_bits != 0
            || (iova <= *MSI_WINDOW.end() && *MSI_WINDOW.start() <= last)
        {
            return Err(einval("VFIO_IOMMU_MAP_DMA"));
        }
        let mut mapped = state.mapped.lock().unwrap();
        if mapped
            .iter()
            .any(|(&i, &(_, l))| i <= last && iova < i + l as u64)
        {
            return Err(VfioFailure::Iommu(
                "VFIO_IOMMU_MAP_DMA",
                std::io::Error::from_raw_os_error(libc::EEXIST),
            ));
        }
        mapped.insert(iova, (va as usize, len));
        state.maps.fetch_add(1, Ordering::Relaxed);
        state.iovas.lock().unwrap().push(iova);
        // SAFETY: dma_map's contract (the memory stays mapped and is
        // reached through raw pointers until unmapped) is insert's.
        unsafe {
            state.iommu.insert(Window {
                va: va as usize,
                len,
                iova,
            })
        };
        Ok(())
    }

    fn dma_unmap(&self, iova: u64, len: usize) -> Result<(), VfioFailure> {
        let state = &self.0.state;
        let Some((va, l)) = state.mapped.lock().unwrap().remove(&iova) else {
            return Err(einval("VFIO_IOMMU_UNMAP_DMA"));
        };
        assert_eq!(l, len, "an unmap of another size than the map");
        state.unmaps.fetch_add(1, Ordering::Relaxed);
        state.iommu.remove(va, len);
        Ok(())
    }

    fn iommu_info(&self) -> Result<IommuInfo, VfioFailure> {
        let bits = self.0.iova_bits;
        Ok(IommuInfo {
            page_sizes: 0x4020_1000,
            iova_ranges: self.0.report_iovas.then(|| {
                vec![
                    0..=MSI_WINDOW.start() - 1,
                    MSI_WINDOW.end() + 1..=(1 << bits) - 1,
                ]
            }),
        })
    }
}
