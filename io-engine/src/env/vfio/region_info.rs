//! [`RegionInfo`]: what VFIO says of a device region (a BAR), and the pure
//! decision of which part of BAR0 to map for the registers.
//!
//! Thread: the thread that opens the devices (the engine's main thread).

use std::ops::Range;

/// The page size of the mappings (I/OAT and DSA exist on x86-64 only:
/// 4 KiB).
pub const PAGE: u64 = 4096;

/// A device region as `VFIO_DEVICE_GET_REGION_INFO` describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionInfo {
    /// Its size in bytes.
    pub size: u64,
    /// `VFIO_REGION_INFO_FLAG_MMAP`: the region may be mmapped.
    pub mmap: bool,
    /// `VFIO_REGION_INFO_CAP_SPARSE_MMAP`: only these parts may be
    /// mmapped (vfio-pci before Linux 4.16 leaves the MSI-X table's pages
    /// out of them); `None` without the capability.
    pub sparse: Option<Vec<Range<u64>>>,
    /// `VFIO_REGION_INFO_CAP_MSIX_MAPPABLE` (Linux 4.16 and later): the
    /// MSI-X table's pages may be mmapped too.
    pub msix_mappable: bool,
}

impl RegionInfo {
    /// The part of the region to mmap so that the registers `0..needed`
    /// are reachable: their pages only (never the whole BAR), which must
    /// lie in a mappable part (a sparse area when the capability is there)
    /// and, unless the kernel says the MSI-X table is mappable, must not
    /// overlap the pages of `msix` (the table's bytes in this region):
    /// vfio-pci without MSIX_MAPPABLE refuses such an mmap (Linux
    /// `vfio_pci_mmap`, which rounds the table out to pages; DPDK's
    /// `pci_vfio_mmap_bar` maps around it).
    pub fn register_window(
        &self,
        needed: u64,
        msix: Option<&Range<u64>>,
    ) -> Result<Range<u64>, String> {
        if !self.mmap {
            return Err("BAR0 cannot be mmapped".into());
        }
        if self.size < needed {
            return Err(format!("BAR0 is only {} bytes", self.size));
        }
        // The register pages (a BAR smaller than a page: all of it).
        let want = 0..(needed.div_ceil(PAGE) * PAGE).min(self.size);
        if let Some(areas) = &self.sparse
            && !areas
                .iter()
                .any(|a| a.start <= want.start && want.end <= a.end)
        {
            return Err(format!(
                "no mmappable part of BAR0 holds the registers ({:#x}..{:#x}); the \
                 mmappable parts are {}",
                want.start,
                want.end,
                areas
                    .iter()
                    .map(|a| format!("{:#x}..{:#x}", a.start, a.end))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(t) = msix.filter(|_| !self.msix_mappable) {
            let pages = t.start / PAGE * PAGE..t.end.div_ceil(PAGE) * PAGE;
            if pages.start < want.end && want.start < pages.end {
                return Err(format!(
                    "the registers ({:#x}..{:#x}) share pages with the MSI-X table \
                     ({:#x}..{:#x}), which this vfio-pci does not let be mmapped",
                    want.start, want.end, t.start, t.end
                ));
            }
        }
        Ok(want)
    }
}
