//! Block devices: the [`Bdev`] trait, IO objects, per-core channels, the
//! registry and its factory, URIs, the null and malloc devices, and the
//! devices with a backing file or block device (`uring`, `aio`: `file/`).
//!
//! Thread: the registry ([`BdevRegistry`]) and descriptors ([`BdevDesc`]) are
//! used from any thread (the control plane creates and destroys devices).
//! Channels ([`IoChannel`]) live on one reactor: IO is submitted on that core
//! and completes by callback on the same core, so nothing on the data path
//! takes a lock shared between cores.
//!
//! An IO's journey: `IoChannel::submit` validates the request (aligned to the
//! block size, inside the device, supported), takes an IO object from the
//! per-core cache of the shared IO pool (or queues the request if the pool is
//! exhausted; the channel's poller retries the queue every round until
//! objects return), stamps the submit time,
//! and hands it to the device's [`DeviceChannel`]. The channel's poller
//! collects completions from the device, records per-core statistics and calls
//! the submitter's [`IoCompletion`]. A device without a native copy gets one
//! emulated with reads and writes between the channel and the device
//! (`copy_emulation.rs`), counted and completed as one copy.
//!
//! Files, lowest first: `quoted.rs` (client input in messages, bounded),
//! `uri.rs` (specs), `io.rs` (IO objects), `stats.rs`,
//! `identity.rs`, `device_channel.rs` and `device.rs` (the traits),
//! `null.rs` and `malloc.rs` (the devices), `file/` (`uring` and `aio`),
//! `factory.rs` (builds a device
//! from its spec), `entry.rs`, `desc.rs`, `info.rs`, `stats_reset.rs` and
//! `registry.rs` (the set of devices), `copy_progress.rs` and
//! `copy_emulation.rs` (copy made of reads and writes),
//! `draining_channel.rs` (a device channel left with IO in flight, kept
//! until the device finishes it), `retired_channel.rs` (what a drained,
//! closed channel keeps), `channel.rs` (the per-core channel).

mod channel;
mod copy_emulation;
mod copy_progress;
mod desc;
mod device;
mod device_channel;
mod draining_channel;
mod entry;
mod error;
mod factory;
mod file;
mod identity;
mod info;
mod io;
mod io_pool_config;
mod malloc;
mod null;
mod quoted;
mod registry;
mod retired_channel;
mod stats;
mod stats_reset;
pub mod uri;

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod no_copy;

pub use channel::IoChannel;
pub use desc::BdevDesc;
pub use device::Bdev;
pub use device_channel::DeviceChannel;
pub use error::BdevError;
pub use file::{BACKING_UUID_NAMESPACE, BackingError, BackingKind, path_uuid};
pub use identity::Identity;
pub use info::BdevInfo;
pub use io::{BdevIo, IoCompletion, IoDone, IoError, IoRequest, IoSlot, IoType, SubmitError};
pub use io_pool_config::IoPoolConfig;
pub use quoted::{QUOTE_CHARS, Quoted};
pub use registry::BdevRegistry;
pub use stats::{IoStats, LATENCY_BUCKETS, OpStats, latency_bucket_bounds_ns};
pub use stats_reset::StatsReset;
pub use uri::{BdevKind, BdevSpec, FileSpec, UriError};
