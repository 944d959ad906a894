//! [`DmaMapper`]: the seam through which env tells an offload engine of
//! DMA memory. Env defines it; an engine that needs its memory mapped
//! implements it (the I/OAT VFIO backend's IOMMU mappings, the I/OAT device
//! model's address space); whoever creates that engine registers it
//! ([`register_mapper`](super::register_mapper)), so a reader of the
//! engine's setup sees env call upward through it.
//!
//! Thread: the calls come from whichever thread makes or drops a region
//! (or registers the mapper).

/// Something that makes DMA regions visible to a device: an IOMMU mapping,
/// the address space of a device model.
///
/// Its calls come from whichever thread makes or drops a region (or
/// registers the mapper), one at a time: they are made under the list's
/// lock, so a mapper must not make or drop regions itself.
///
/// `map` is `unsafe`: a mapper makes the memory it is given reachable by a
/// device, so only env, which knows the memory is a live region, calls it.
pub trait DmaMapper: Send + Sync {
    /// `len` bytes at `addr` (a live region) may now be handed to the
    /// device. A mapper reports its own failures.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` is one whole live [`DmaRegion`](super::DmaRegion)
    /// (mapped, reached only through raw pointers), and `unmap` is called
    /// with the same range before that memory is unmapped: the device may
    /// read and write it until then.
    unsafe fn map(&self, addr: usize, len: usize);
    /// The region at `addr` goes away: the device must no longer use it.
    fn unmap(&self, addr: usize, len: usize);
}
