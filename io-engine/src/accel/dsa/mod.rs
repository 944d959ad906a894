//! The DSA accel module: every accel opcode (copy, fill, compare,
//! dualcast, crc32c, copy_crc32c) on Intel Data Streaming Accelerator work
//! queues, driven from userspace.
//!
//! Thread: [`Dsa`] is shared (`Arc`, `Send + Sync`); its work queues are
//! found and opened on the thread that starts the engine, and it hands one
//! channel (one work queue) to each thread that asks (`create_channel`,
//! called on the reactor that will use it) while any is left, through the
//! accel framework's [`HardwarePool`](crate::accel::HardwarePool). That
//! reactor's [`PooledChannel`](crate::accel::PooledChannel) is used only
//! by it; when it is dropped its work queue goes back to the pool for the
//! next thread.
//!
//! The parts, each behind a seam so the driver runs unchanged on the
//! kernel's idxd driver, on VFIO and on the model:
//!
//! - [`spec`]: descriptors, completion records, opcodes, flags, status
//!   codes, registers and portals, per the DSA specification;
//! - [`portal`]: the work-queue seam ([`WorkQueue`]): one 64-byte
//!   descriptor per portal write, MOVDIR64B for a dedicated work queue,
//!   ENQCMD (which may answer "retry") for a shared one;
//! - [`driver`]: the channel driver (descriptors, batches, completion
//!   records, partial completions, retries);
//! - [`idxd`]: the kernel idxd backend (sysfs discovery, `/dev/dsa/wqD.Q`,
//!   the portal's mapping; shared virtual addressing);
//! - [`vfio`]: the VFIO backend (DSA functions bound to vfio-pci, found
//!   and opened with the VFIO plumbing of `env::vfio`, which I/OAT's
//!   backend uses too; the device
//!   configuration: capabilities, group and WQ configuration, enabling
//!   device and WQ; WQ 0's portal in BAR2, IOVAs through the container's
//!   IOMMU mapper);
//! - `model`: a software DSA device for tests and demos, built only with
//!   the `dsa-model` cargo feature (and in the unit tests);
//! - [`Dsa`] (the module, its work queues' channels in a
//!   [`HardwarePool`](crate::accel::HardwarePool): the driver's channel is
//!   a [`HardwareChannel`](crate::accel::HardwareChannel)), [`DsaArgs`]
//!   (the flags), [`Totals`] (the channels' driver counters summed).
//!
//! One work queue per reactor while they last, as SPDK's kernel-mode idxd
//! gives each thread a channel; a reactor that finds none left runs on
//! software, and the framework records a note saying so. See docs/dsa.md.

pub mod driver;
pub mod idxd;
#[cfg(any(test, feature = "dsa-model"))]
pub mod model;
pub mod portal;
pub mod spec;
pub mod vfio;

mod args;
#[cfg(any(test, feature = "dsa-model"))]
mod devices;
mod module;
mod totals;

#[cfg(test)]
mod tests;

pub use args::DsaArgs;
pub use module::{Dsa, NAME};
pub use portal::{Portal, Retry, WorkQueue, WqInfo, WqMode};
pub use totals::Totals;
