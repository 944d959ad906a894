//! Devices with a backing: `uring://` and `aio://` on a regular file or a
//! block device.
//!
//! - `uring`: the IO of every `uring` channel on a reactor goes through
//!   that reactor's one io_uring (`ring.rs`), submitted and reaped in its
//!   poll loop; no thread per device, no blocking call on a reactor. IO
//!   buffers in the engine's DMA memory are the rings' fixed buffers
//!   (`fixed_buffers.rs`).
//! - `aio`: Linux native AIO, one context per channel, completions reaped
//!   from the kernel's mapped ring; for kernels where io_uring is disabled.
//! - What neither kernel interface can do asynchronously (copies, and
//!   AIO's zeroing and deallocation) runs on two engine-wide blocking
//!   threads (`blocking.rs`).
//! - A reactor that may sleep is woken by an eventfd the kernel signals
//!   (`wake_fd.rs`); a busy one polls.
//!
//! Files, lowest first: `backing_error.rs`, `backing.rs` (opening, size,
//! block size, uuid), `error_log.rs`, `in_flight.rs`, `wake_fd.rs`,
//! `blocking.rs`, `failed_channel.rs`, `fixed_buffers.rs` (DMA memory
//! registered with the rings), `ring.rs`, `uring_channel.rs`,
//! `aio_context.rs`, `aio_channel.rs`, `file_device.rs` (the device, both
//! kinds).
//!
//! Thread: devices are shared by every core and built on the control path;
//! channels live on one reactor each.

mod aio_channel;
mod aio_context;
mod backing;
mod backing_error;
mod blocking;
mod error_log;
mod failed_channel;
mod file_device;
mod fixed_buffers;
mod in_flight;
mod ring;
mod uring_channel;
mod wake_fd;

#[cfg(test)]
mod tests;

pub use backing::{BACKING_UUID_NAMESPACE, BackingKind, path_uuid};
pub use backing_error::BackingError;
pub use file_device::FileDevice;
