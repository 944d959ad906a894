//! [`IdentityMapper`]: the device model's "IOMMU", a
//! [`DmaMapper`] that makes every DMA region visible at IOVA = virtual
//! address. Whoever creates a model device registers it
//! ([`register_mapper`](crate::env::dma::register_mapper)).
//!
//! Thread: called from whichever thread makes or drops a DMA region.

use std::sync::Arc;

use crate::env::dma::{DmaMapper, IovaMap, Window};

/// Maps every DMA region into an [`IovaMap`] at IOVA = virtual address:
/// the device model's "IOMMU" (a real one is the VFIO backend's). Made
/// inside the crate only: its map is what a model device may write.
#[derive(Debug)]
pub struct IdentityMapper(pub(crate) Arc<IovaMap>);

impl DmaMapper for IdentityMapper {
    unsafe fn map(&self, addr: usize, len: usize) {
        // SAFETY: `map`'s contract: a live DMA region (reached only through
        // raw pointers, DmaRegion's rule), unmapped before it goes; the
        // model reaches it at IOVA = VA through this map and nothing else.
        unsafe {
            self.0.insert(Window {
                va: addr,
                len,
                iova: addr as u64,
            })
        };
    }
    fn unmap(&self, addr: usize, len: usize) {
        self.0.remove(addr, len);
    }
}
