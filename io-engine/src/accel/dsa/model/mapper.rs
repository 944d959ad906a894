//! [`ModelMapper`]: the model DSA device's "IOMMU", a [`DmaMapper`] that
//! makes every DMA region visible at IOVA = virtual address + an offset.
//!
//! Thread: called from whichever thread makes or drops a DMA region.

use std::sync::Arc;

use crate::env::dma::{DmaMapper, IovaMap, Window};

/// Maps every DMA region into an [`IovaMap`] at IOVA = virtual address +
/// `offset`.
#[derive(Debug)]
pub(super) struct ModelMapper {
    pub(super) map: Arc<IovaMap>,
    pub(super) offset: u64,
}

impl DmaMapper for ModelMapper {
    unsafe fn map(&self, addr: usize, len: usize) {
        // SAFETY: `map`'s contract: a live DMA region (reached only through
        // raw pointers, DmaRegion's rule), unmapped before it goes; the
        // model reaches it at this IOVA through this map and nothing else.
        unsafe {
            self.map.insert(Window {
                va: addr,
                len,
                iova: addr as u64 + self.offset,
            })
        };
    }

    fn unmap(&self, addr: usize, len: usize) {
        self.map.remove(addr, len);
    }
}
