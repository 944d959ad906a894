//! VFIO: PCI functions driven from userspace through the kernel's VFIO
//! interface, the plumbing the I/OAT and DSA modules share.
//!
//! - finding functions: [`SysfsRoot`] (where sysfs and /dev are),
//!   [`PciFunction`] and [`scan_ids`] (the scan of `bus/pci/devices` by
//!   vendor and device id), [`bind_commands`] (how to bind one to
//!   vfio-pci);
//! - opening them: [`open_functions()`], the checks (IOMMU, hugepages,
//!   container), one container for all and its IOMMU mapper (a
//!   [`DmaMapper`](crate::env::dma::DmaMapper) that maps every DMA region
//!   into the IOMMU at IOVAs from the ranges it reports: [`IommuInfo`],
//!   [`IovaAllocator`]; [`mapping_failure`] says why a mapping failed),
//!   each note naming the module through [`Kind`];
//! - the seams every ioctl sits behind, so that all of it is tested
//!   without hardware: [`VfioOps`], [`VfioContainerOps`],
//!   [`VfioDeviceOps`] (the kernel through `vfio-ioctls` in
//!   [`SystemVfio`], a fake in the tests), failures as [`VfioFailure`];
//! - a device's BARs and configuration space: [`RegionInfo`] (what VFIO
//!   says of a BAR, and which part of it to map for the registers, never
//!   the MSI-X table: [`MsixTable`]), any BAR's window mapped as
//!   [`Registers`] (volatile accesses at BAR offsets) or as [`BarMemory`]
//!   (a DSA portal), [`PciConfig`] (configuration space; [`VfioConfig`]
//!   over a VFIO device).
//!
//! The tests' fakes (`fake`, built for the tests only), shared by the
//! modules' tests: a sysfs tree, VFIO as a current or an older kernel with
//! any failure and an IOMMU that refuses what the kernel's refuses, and a
//! device model or a fake register file behind each device.
//!
//! What a module makes of an opened function (I/OAT's channel, DSA's work
//! queue) is the module's: `accel::ioat::vfio`, `accel::dsa::vfio`.
//!
//! Thread: the thread that builds the engine (the daemon's, accel-perf's
//! or bdev-perf's main thread) finds and opens the functions; the IOMMU
//! mapper is then called from whichever thread makes or drops a DMA
//! region; the mapped registers are used by the thread holding them.

mod bar_memory;
mod container_mapper;
#[cfg(test)]
pub mod fake;
mod iommu_info;
mod iova_allocator;
mod kind;
mod mmio;
mod msix_table;
mod open_functions;
mod pci_config;
mod pci_function;
mod region_info;
mod registers;
mod sysfs_root;
mod system_container;
mod system_device;
mod system_vfio;
mod vfio_config;
mod vfio_container_ops;
mod vfio_device_ops;
mod vfio_failure;
mod vfio_ops;

#[cfg(test)]
mod tests;

pub use bar_memory::BarMemory;
pub use container_mapper::mapping_failure;
pub use iommu_info::IommuInfo;
pub use iova_allocator::IovaAllocator;
pub use kind::Kind;
pub use msix_table::MsixTable;
pub use open_functions::open_functions;
pub use pci_config::{
    PCI_CAPABILITY_LIST, PCI_COMMAND, PCI_COMMAND_BUS_MASTER, PCI_DEVICE_ID, PCI_STATUS,
    PCI_STATUS_CAP_LIST, PciConfig, find_capability,
};
pub use pci_function::{PciFunction, bind_commands, scan_ids};
pub use region_info::RegionInfo;
pub use registers::Registers;
pub use sysfs_root::SysfsRoot;
pub use system_vfio::SystemVfio;
pub use vfio_config::VfioConfig;
pub use vfio_container_ops::VfioContainerOps;
pub use vfio_device_ops::VfioDeviceOps;
pub use vfio_failure::VfioFailure;
pub use vfio_ops::VfioOps;
