//! DMA memory: regions a DMA engine may read and write ([`DmaRegion`]),
//! slices of them ([`DmaSlice`]), the hugepages they come from, and [`check_memory`],
//! which refuses a region that cannot be had before anything is mapped.
//!
//! Every live region is known to a process-wide list. An offload engine
//! that needs its memory mapped (the VFIO container's IOMMU mappings,
//! `env::vfio`; a device model's address space) implements [`DmaMapper`],
//! and whoever creates that engine registers it ([`register_mapper`]): it
//! is then told of every region that exists and of each one made or
//! dropped later, so malloc devices and IO buffers are device-visible
//! whenever they were made.
//!
//! The device's side of that memory, which the accel drivers (I/OAT, DSA)
//! see through one seam: [`Window`]s (memory contiguous in virtual and IOVA
//! space), the [`IovaMap`] a mapper fills with them (read under an
//! [`IovaGuard`]), [`DmaMemory`] (memory the device may access and the IOVA
//! of any buffer), [`MappedMemory`] (`DmaMemory` over an `IovaMap`) and
//! [`DmaBuffer`] (device-visible memory a driver owns, reached only through
//! atomic accessors).
//!
//! Thread: any. Nothing here keeps per-core state.

mod dma_buffer;
mod dma_memory;
mod error;
mod hugepage_info;
mod hugepage_policy;
mod iova_guard;
mod iova_map;
mod iova_windows;
mod mapped_memory;
mod mapper;
mod memory_check;
mod region;
mod registration;
mod slice;
mod window;
mod window_cache;

#[cfg(test)]
mod tests;

pub use dma_buffer::DmaBuffer;
pub use dma_memory::DmaMemory;
pub use error::DmaError;
pub use hugepage_info::{HugepageInfo, hugepage_info};
pub use hugepage_policy::HugepagePolicy;
pub use iova_guard::IovaGuard;
pub use iova_map::IovaMap;
pub use mapped_memory::MappedMemory;
pub use mapper::DmaMapper;
pub use memory_check::{MEMORY_RESERVE, check_memory};
pub use region::{DmaRegion, HUGEPAGE_SIZE};
pub use registration::{MapperRegistration, live_regions, register_mapper};
pub use slice::DmaSlice;
pub use window::Window;
pub use window_cache::WindowCache;
