//! DMA memory: regions a DMA engine may read and write ([`DmaRegion`]),
//! slices of them ([`DmaSlice`]), the hugepages they come from, and [`check_memory`],
//! which refuses a region that cannot be had before anything is mapped.
//!
//! Every live region is known to a process-wide list. An offload engine
//! that needs its memory mapped (the I/OAT VFIO backend's IOMMU mappings,
//! the I/OAT device model's address space) implements [`DmaMapper`], and
//! whoever creates that engine registers it ([`register_mapper`]): it is
//! then told of every region that exists and of each one made or dropped
//! later, so malloc devices and IO buffers are device-visible whenever they
//! were made.
//!
//! Thread: any. Nothing here keeps per-core state.

mod error;
mod hugepage_info;
mod hugepage_policy;
mod mapper;
mod memory_check;
mod region;
mod registration;
mod slice;

#[cfg(test)]
mod tests;

pub use error::DmaError;
pub use hugepage_info::{HugepageInfo, hugepage_info};
pub use hugepage_policy::HugepagePolicy;
pub use mapper::DmaMapper;
pub use memory_check::{MEMORY_RESERVE, check_memory};
pub use region::{DmaRegion, HUGEPAGE_SIZE};
pub use registration::{MapperRegistration, live_regions, register_mapper};
pub use slice::DmaSlice;
