//! The I/OAT accel module: copy and fill on Intel I/OAT DMA channels,
//! driven from userspace.
//!
//! Thread: [`Ioat`] is shared (`Arc`, `Send + Sync`); its devices are
//! opened ([`IoatDevices`]) and every channel brought up on the thread that
//! starts the engine, and it hands one started channel to each thread that
//! asks (`create_channel`, called on the reactor that will use it) while
//! any is left, through the accel framework's
//! [`HardwarePool`](crate::accel::HardwarePool). That reactor's
//! [`PooledChannel`](crate::accel::PooledChannel) is used only by it; when
//! it is dropped its channel goes back to the pool for the next thread.
//!
//! The parts, each behind a seam so the driver runs unchanged on real
//! hardware and on the model:
//!
//! - [`spec`]: registers, descriptor layout, opcodes, PCI ids;
//! - the seams the driver sees a device through: [`Registers`]
//!   (volatile 8/16/32/64-bit accesses at BAR0 offsets), [`PciConfig`]
//!   (its PCI configuration space) and [`DmaMemory`]
//!   (memory the device may access, and the IOVA of any buffer, as
//!   [`Window`]s). The VFIO backend (mapped BAR0, IOMMU mappings) and the
//!   device model (a register file, its own address space) implement both,
//!   with [`MappedMemory`] over an [`IovaMap`]. Memory the device reads or
//!   writes is touched only through atomic accessors ([`DmaBuffer`]),
//!   never through `&`/`&mut` references;
//! - [`driver`]: the channel driver (bring-up, ring, submission,
//!   completion, recovery);
//! - [`vfio`]: the VFIO backend (sysfs discovery, container, group,
//!   device, BAR mapping, bus mastering, IOMMU mappings of every DMA
//!   region); its generic part ([`vfio::scan_ids`],
//!   [`vfio::open_functions`], [`VfioDeviceOps`](vfio::VfioDeviceOps)'
//!   `map_bar` and `map_bar_memory`, [`BarMemory`]) also serves the DSA
//!   module's VFIO backend;
//! - `model`: a software I/OAT device for tests and demos, built only with
//!   the `ioat-model` cargo feature (and in the unit tests);
//! - [`IoatDevices`]: devices opened and not yet started, and the
//!   [`DmaMapper`](crate::env::dma::DmaMapper) their creator registers with
//!   env so that every DMA region is visible to them (`IdentityMapper`
//!   for the model, the VFIO container's IOMMU mapper for hardware);
//! - [`Ioat`] (the module, its channels in a
//!   [`HardwarePool`](crate::accel::HardwarePool): the driver's channel is
//!   a [`HardwareChannel`](crate::accel::HardwareChannel)),
//!   [`IoatOptions`] and [`IoatArgs`] (what to look for), [`Totals`].
//!
//! One channel per reactor while channels last: SPDK gives each thread
//! its own I/OAT channel too (one PCI function is one channel). A reactor
//! that finds none left runs copy and fill on software, and the framework
//! records a note saying so.

pub mod driver;
#[cfg(any(test, feature = "ioat-model"))]
pub mod model;
pub mod spec;
pub mod vfio;

mod args;
mod bar_memory;
mod devices;
mod dma_buffer;
mod dma_memory;
#[cfg(any(test, feature = "ioat-model"))]
mod identity_mapper;
mod iommu_info;
mod iova_allocator;
mod iova_guard;
mod iova_map;
mod iova_windows;
mod mapped_memory;
mod module;
mod msix_table;
mod options;
mod pci_config;
mod region_info;
mod registers;
mod totals;
mod vfio_config;
mod vfio_device_ops;
mod vfio_failure;
mod window;

#[cfg(test)]
mod tests;

pub use args::IoatArgs;
pub use bar_memory::BarMemory;
pub use devices::IoatDevices;
#[cfg(any(test, feature = "ioat-model"))]
pub use devices::{MODEL_TIMEOUT, model_hardware};
pub use dma_buffer::DmaBuffer;
pub use dma_memory::DmaMemory;
#[cfg(any(test, feature = "ioat-model"))]
pub use identity_mapper::IdentityMapper;
pub use iommu_info::IommuInfo;
pub use iova_allocator::IovaAllocator;
pub use iova_guard::IovaGuard;
pub use iova_map::IovaMap;
pub use mapped_memory::MappedMemory;
pub use module::{Ioat, NAME};
pub use msix_table::MsixTable;
pub use options::IoatOptions;
pub use pci_config::{PciConfig, find_capability};
pub use region_info::RegionInfo;
pub use registers::Registers;
pub use totals::Totals;
pub use vfio_config::VfioConfig;
pub use window::Window;
