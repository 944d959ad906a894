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
//! - the seams the driver sees a device through, which env provides and
//!   the DSA module shares: [`Registers`](crate::env::vfio::Registers)
//!   (volatile 8/16/32/64-bit accesses at BAR0 offsets),
//!   [`PciConfig`](crate::env::vfio::PciConfig) (its PCI configuration
//!   space) and [`DmaMemory`](crate::env::dma::DmaMemory) (memory the
//!   device may access, and the IOVA of any buffer, as
//!   [`Window`](crate::env::dma::Window)s). The VFIO backend (mapped BAR0,
//!   IOMMU mappings) and the device model (a register file, its own
//!   address space) implement both, with
//!   [`MappedMemory`](crate::env::dma::MappedMemory) over an
//!   [`IovaMap`](crate::env::dma::IovaMap). Memory the device reads or
//!   writes is touched only through atomic accessors
//!   ([`DmaBuffer`](crate::env::dma::DmaBuffer)), never through
//!   `&`/`&mut` references;
//! - [`driver`]: the channel driver (bring-up, ring, submission,
//!   completion, recovery);
//! - [`vfio`]: the VFIO backend: which functions are I/OAT's, and each
//!   one's channel brought up from its mapped BAR0; the VFIO plumbing it
//!   stands on (sysfs discovery, container, group, device, BAR mapping,
//!   IOMMU mappings of every DMA region) is env's (`env::vfio`), shared
//!   with the DSA module's VFIO backend;
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
mod devices;
#[cfg(any(test, feature = "ioat-model"))]
mod identity_mapper;
mod module;
mod options;
mod totals;

#[cfg(test)]
mod tests;

pub use args::IoatArgs;
pub use devices::IoatDevices;
#[cfg(any(test, feature = "ioat-model"))]
pub use devices::{MODEL_TIMEOUT, model_hardware};
#[cfg(any(test, feature = "ioat-model"))]
pub use identity_mapper::IdentityMapper;
pub use module::{Ioat, NAME};
pub use options::IoatOptions;
pub use totals::Totals;
