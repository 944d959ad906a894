//! [`MappedMemory`]: [`DmaMemory`] over an [`IovaMap`] that a registered
//! mapper keeps in step with the process's DMA regions.
//!
//! Thread: shared by the reactor that owns the channel and a model's
//! device thread; allocations happen on the reactor (ring bring-up).

use std::sync::Arc;

use super::dma_buffer::DmaBuffer;
use super::dma_memory::DmaMemory;
use super::iova_map::IovaMap;
use super::region::DmaRegion;
use super::window::Window;

/// [`DmaMemory`] over an [`IovaMap`] that a mapper keeps in step with the
/// process's DMA regions: allocations are [`DmaRegion`]s (which the mapper
/// makes visible as they are made), translations are map lookups. The
/// VFIO backends and the device models use it.
#[derive(Debug, Clone)]
pub struct MappedMemory {
    map: Arc<IovaMap>,
}

impl MappedMemory {
    /// Memory translated through `map`.
    pub fn new(map: Arc<IovaMap>) -> MappedMemory {
        MappedMemory { map }
    }

    /// The map.
    pub fn map(&self) -> &Arc<IovaMap> {
        &self.map
    }
}

// SAFETY: every window of the map was put there by a mapper under its
// `DmaMapper::map` contract (a live region, mapped for the device at the
// window's IOVA until the region goes, when the window is removed and the
// generation changes); `alloc` hands out a region only when its whole
// range lies in one such window.
unsafe impl DmaMemory for MappedMemory {
    fn alloc(&self, len: usize) -> Result<DmaBuffer, String> {
        let region = DmaRegion::alloc(len).map_err(|e| e.to_string())?;
        let addr = region.as_ptr().addr();
        let w = self.map.by_va(addr).ok_or_else(|| {
            format!("a new {len}-byte DMA region at {addr:#x} was not mapped for the device")
        })?;
        if w.len - (addr - w.va) < region.len() {
            return Err(format!(
                "a new DMA region at {addr:#x} is only partly mapped for the device"
            ));
        }
        let iova = w.iova + (addr - w.va) as u64;
        // SAFETY: the map's window holds the whole region (checked above)
        // at `iova`: the mapper put it there when the region was made
        // (its `map` contract) and takes it out only when the region is
        // dropped, which the buffer prevents while it lives.
        Ok(unsafe { DmaBuffer::new(Arc::new(region), iova) })
    }

    #[inline]
    fn window(&self, addr: usize) -> Option<Window> {
        self.map.by_va(addr)
    }

    #[inline]
    fn generation(&self) -> u64 {
        self.map.generation()
    }
}
