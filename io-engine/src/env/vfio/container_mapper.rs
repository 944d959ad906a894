//! [`ContainerMapper`]: the [`DmaMapper`] of a VFIO container, which maps
//! every DMA region of the process into the container's IOMMU at IOVAs it
//! allocates from the ranges the IOMMU reports ([`IovaAllocator`],
//! [`IommuInfo`]), and records each mapping in the [`IovaMap`] the
//! drivers translate through; [`mapping_failure`], what a failed mapping
//! means.
//!
//! Thread: called from whichever thread makes or drops a DMA region.

use std::sync::{Arc, Mutex, PoisonError};

use super::iommu_info::IommuInfo;
use super::iova_allocator::IovaAllocator;
use super::kind::Kind;
use super::region_info::PAGE;
use super::vfio_container_ops::VfioContainerOps;
use super::vfio_failure::VfioFailure;
use crate::env::dma::{DmaMapper, IovaMap, Window};

/// Why an IOMMU mapping failed and what to do, from the kernel's error
/// (vfio_iommu_type1's `vfio_dma_do_map` and `vfio_pin_pages_remote`).
pub fn mapping_failure(e: &VfioFailure, iova: u64, len: usize) -> String {
    let VfioFailure::Iommu(_, io) = e else {
        return "check `dmesg` for VFIO errors".into();
    };
    match io.raw_os_error() {
        Some(libc::ENOMEM) => "the locked-memory limit does not cover the DMA memory (VFIO \
             pins it): raise it (`ulimit -l unlimited`, or LimitMEMLOCK=infinity for a service) \
             or run as root"
            .into(),
        Some(libc::ENOSPC) => "the container has as many mappings as vfio_iommu_type1's \
             dma_entry_limit allows (65535 by default): raise it (`modprobe vfio_iommu_type1 \
             dma_entry_limit=N`)"
            .into(),
        Some(libc::EINVAL) => format!(
            "the IOMMU refuses IOVA {iova:#x} + {len:#x}: outside the ranges it can address \
             (its address width), in a reserved range, or not aligned to its page size"
        ),
        Some(libc::EEXIST) => {
            format!("IOVA {iova:#x} + {len:#x} overlaps a mapping the container already has")
        }
        Some(libc::EFAULT) => "the memory is not mapped in the process, or cannot be pinned".into(),
        Some(libc::EPERM | libc::EACCES) => {
            "not permitted: run as root, or raise the locked-memory limit".into()
        }
        _ => "check `dmesg` for VFIO errors".into(),
    }
}

/// Maps DMA regions into a container at IOVAs it allocates from the
/// ranges the IOMMU can address, and records them in the map the driver
/// translates through.
pub(super) struct ContainerMapper {
    kind: Kind,
    container: Arc<dyn VfioContainerOps>,
    map: Arc<IovaMap>,
    iovas: Mutex<IovaAllocator>,
    /// The IOMMU's smallest page.
    page: u64,
}

impl ContainerMapper {
    /// The mapper of `container` for `kind`, recording its mappings in
    /// `map`, with IOVAs from the ranges `info` reports.
    pub(super) fn new(
        kind: Kind,
        container: Arc<dyn VfioContainerOps>,
        map: Arc<IovaMap>,
        info: &IommuInfo,
    ) -> Self {
        let page = info.page().max(PAGE);
        ContainerMapper {
            kind,
            iovas: Mutex::new(IovaAllocator::new(&info.usable(), page)),
            container,
            map,
            page,
        }
    }

    fn iovas(&self) -> std::sync::MutexGuard<'_, IovaAllocator> {
        self.iovas.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl DmaMapper for ContainerMapper {
    unsafe fn map(&self, addr: usize, len: usize) {
        let size = (len as u64).next_multiple_of(self.page);
        // The IOVA keeps the address's alignment up to 1 GiB, so that the
        // IOMMU can map hugepage memory with large pages; any page will do
        // when no such space is left.
        let align = (1u64 << addr.trailing_zeros().min(30)).max(self.page);
        let Some(iova) = ({
            let mut iovas = self.iovas();
            iovas
                .alloc(size, align)
                .or_else(|| iovas.alloc(size, self.page))
        }) else {
            tracing::error!(
                "{}: cannot map {len} bytes at {addr:#x} into the IOMMU: no IOVA space of \
                 that size is left in the ranges the IOMMU can address; {} tasks on that \
                 memory fail with invalid_argument",
                self.kind.tag,
                self.kind.what
            );
            return;
        };
        // SAFETY: `addr..addr + len` is a live DmaRegion, reached only
        // through raw pointers (DmaRegion's rule); it is unmapped from the
        // IOMMU (`unmap`, called before the region's munmap) before it goes
        // (`map`'s contract).
        match unsafe { self.container.dma_map(iova, len, addr as *mut u8) } {
            // SAFETY: the IOMMU now maps the region at `iova`, until
            // `unmap`, which env calls before the region goes (as above).
            Ok(()) => unsafe {
                self.map.insert(Window {
                    va: addr,
                    len,
                    iova,
                })
            },
            Err(e) => {
                self.iovas().free(iova, size);
                tracing::error!(
                    "{}: cannot map {len} bytes at {addr:#x} into the IOMMU at IOVA {iova:#x} \
                     ({e}): {}; {} tasks on that memory fail with invalid_argument",
                    self.kind.tag,
                    mapping_failure(&e, iova, len),
                    self.kind.what
                );
            }
        }
    }

    fn unmap(&self, addr: usize, len: usize) {
        let Some(w) = self.map.by_va(addr).filter(|w| w.va == addr) else {
            return;
        };
        self.map.remove(addr, len);
        match self.container.dma_unmap(w.iova, w.len) {
            Ok(()) => self
                .iovas()
                .free(w.iova, (w.len as u64).next_multiple_of(self.page)),
            // The IOVA stays taken: the IOMMU may still map it.
            Err(e) => tracing::error!(
                "{}: cannot unmap {len} bytes at {addr:#x} (IOVA {:#x}) from the IOMMU: {e}",
                self.kind.tag,
                w.iova
            ),
        }
    }
}
