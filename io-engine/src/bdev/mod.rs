//! Block devices: the [`Bdev`] trait, IO objects, per-core channels, the
//! registry, URIs, and the null and malloc devices.
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
//! the submitter's [`IoCompletion`].

mod channel;
mod io;
mod malloc;
mod null;
mod registry;
mod stats;
pub mod uri;

pub use channel::IoChannel;
pub use io::{BdevIo, IoCompletion, IoDone, IoError, IoRequest, IoSlot, IoType, SubmitError};
pub use registry::{BdevDesc, BdevError, BdevInfo, BdevRegistry, IoPoolConfig, StatsReset};
pub use stats::{IoStats, LATENCY_BUCKETS, OpStats, latency_bucket_bounds_ns};
pub use uri::{BdevKind, BdevSpec, UriError};

use uuid::Uuid;

/// A block device.
///
/// Thread: any for the accessors; [`Bdev::create_channel`] is called on the
/// reactor that will own the channel.
pub trait Bdev: Send + Sync + 'static {
    /// Name, geometry, identity and URI.
    fn identity(&self) -> &Identity;
    /// `null` or `malloc`.
    fn product(&self) -> &'static str;
    /// Whether the device serves `op`.
    fn supports(&self, op: IoType) -> bool;
    /// Whether written data can be read back (malloc yes, null no).
    fn stores_data(&self) -> bool;
    /// Opens the device's side of a channel on the calling core.
    fn create_channel(&self) -> Box<dyn DeviceChannel>;

    /// Unique name.
    fn name(&self) -> &str {
        &self.identity().spec.name
    }
    /// Identity, stable for the device's life.
    fn uuid(&self) -> Uuid {
        self.identity().uuid
    }
    /// Bytes per block.
    fn block_size(&self) -> u32 {
        self.identity().spec.block_size
    }
    /// Number of blocks.
    fn num_blocks(&self) -> u64 {
        self.identity().spec.num_blocks
    }
    /// The canonical URI the device was created from.
    fn uri(&self) -> String {
        self.identity().spec.uri.clone()
    }
    /// Size in bytes.
    fn size_bytes(&self) -> u64 {
        self.block_size() as u64 * self.num_blocks()
    }
}

/// What every device is: the spec it was created from and its uuid.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Name, kind, geometry and canonical URI.
    pub spec: BdevSpec,
    /// The URI's `uuid=`, or a random one.
    pub uuid: Uuid,
}

impl Identity {
    /// The identity of a device created from `spec`.
    pub fn new(spec: BdevSpec) -> Self {
        let uuid = spec.uuid.unwrap_or_else(Uuid::new_v4);
        Identity { spec, uuid }
    }
}

/// A device's per-core channel: receives validated IOs and reports them
/// complete.
///
/// Thread: the reactor that created it.
pub trait DeviceChannel {
    /// Starts an IO. Must not complete it inline: completions are reported
    /// by [`DeviceChannel::poll`], so a callback never runs inside a submit.
    fn submit(&mut self, io: BdevIo);
    /// Moves finished IOs (status set) into `done`; returns how many.
    fn poll(&mut self, done: &mut Vec<BdevIo>) -> usize;
}

#[cfg(test)]
mod conformance;
