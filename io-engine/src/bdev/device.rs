//! The [`Bdev`] trait: what every block device is and does.
//!
//! Thread: any for the accessors; [`Bdev::create_channel`] is called on the
//! reactor that will own the channel.

use uuid::Uuid;

use super::device_channel::DeviceChannel;
use super::identity::Identity;
use super::io::IoType;

/// A block device.
///
/// Thread: any for the accessors; [`Bdev::create_channel`] is called on the
/// reactor that will own the channel.
pub trait Bdev: Send + Sync + 'static {
    /// Name, geometry, identity and URI.
    fn identity(&self) -> &Identity;
    /// `null`, `malloc`, `uring` or `aio`.
    fn product(&self) -> &'static str;
    /// Whether the device serves `op`.
    fn supports(&self, op: IoType) -> bool;
    /// Whether written data can be read back (malloc yes, null no).
    fn stores_data(&self) -> bool;
    /// Opens the device's side of a channel on the calling core.
    fn create_channel(&self) -> Box<dyn DeviceChannel>;

    /// Whether completed writes may sit in a volatile cache until a flush
    /// (NVMe/TCP then reports a volatile write cache, and hosts flush).
    fn volatile_write_cache(&self) -> bool {
        false
    }
    /// The backing's path and kind (`file`, `block_device`), for devices
    /// that have one.
    fn backing(&self) -> Option<(&std::path::Path, &'static str)> {
        None
    }

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
