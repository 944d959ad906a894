//! [`Aio`]: a device on a file or block device, its IO through Linux
//! native AIO (for kernels where io_uring is disabled). Each channel has
//! its own AIO context ([`AioChannel`](super::aio_channel::AioChannel)).
//!
//! Thread: the device is shared by every core; each channel lives on one
//! reactor.

use super::aio_channel::AioChannel;
use super::aio_context::AioContext;
use super::backing::Backing;
use super::backing_error::BackingError;
use super::failed_channel::FailedChannel;
use super::file_device::FileDevice;
use crate::bdev::device::Bdev;
use crate::bdev::device_channel::DeviceChannel;
use crate::bdev::identity::Identity;
use crate::bdev::io::IoType;
use crate::bdev::uri::BdevSpec;

/// A `aio://` device.
pub struct Aio {
    dev: FileDevice,
}

impl Aio {
    /// Opens `spec`'s backing, after checking that AIO contexts can be had.
    pub fn new(spec: &BdevSpec) -> Result<Aio, BackingError> {
        AioContext::new(1, None).map_err(|source| BackingError::Unavailable {
            what: "Linux AIO",
            source,
            hint: " (check /proc/sys/fs/aio-max-nr against /proc/sys/fs/aio-nr)",
        })?;
        let (backing, resolved) = Backing::open(spec)?;
        Ok(Aio {
            dev: FileDevice::new(resolved, backing),
        })
    }
}

impl Bdev for Aio {
    fn identity(&self) -> &Identity {
        &self.dev.id
    }
    fn product(&self) -> &'static str {
        "aio"
    }
    fn supports(&self, op: IoType) -> bool {
        self.dev.supports(op)
    }
    fn stores_data(&self) -> bool {
        true
    }
    fn volatile_write_cache(&self) -> bool {
        self.dev.backing.write_cache
    }
    fn backing(&self) -> Option<(&std::path::Path, &'static str)> {
        Some((&self.dev.backing.path, self.dev.backing.kind.as_str()))
    }
    fn create_channel(&self) -> Box<dyn DeviceChannel> {
        match AioChannel::new(&self.dev) {
            Ok(ch) => Box::new(ch),
            Err(e) => {
                tracing::error!(
                    device = self.name(),
                    "no AIO context on this core ({e}; see /proc/sys/fs/aio-max-nr); \
                     its IOs on this core fail"
                );
                Box::new(FailedChannel::default())
            }
        }
    }
}
