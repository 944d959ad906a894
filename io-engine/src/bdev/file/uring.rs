//! [`Uring`]: a device on a file or block device, its IO through the
//! reactor's io_uring ([`Ring`](super::ring::Ring)).
//!
//! Thread: the device is shared by every core; each of its channels
//! ([`UringChannel`](super::uring_channel::UringChannel)) lives on one
//! reactor.

use super::backing::Backing;
use super::backing_error::BackingError;
use super::file_device::FileDevice;
use super::ring::{Ring, RingKind};
use super::uring_channel::UringChannel;
use crate::bdev::device::Bdev;
use crate::bdev::device_channel::DeviceChannel;
use crate::bdev::identity::Identity;
use crate::bdev::io::IoType;
use crate::bdev::uri::BdevSpec;

/// A `uring://` device.
pub struct Uring {
    dev: FileDevice,
}

impl Uring {
    /// Opens `spec`'s backing, after checking that io_uring can be had.
    pub fn new(spec: &BdevSpec) -> Result<Uring, BackingError> {
        Ring::probe(RingKind::Interrupt)?;
        let (backing, resolved) = Backing::open(spec)?;
        if backing.iopoll {
            Ring::probe(RingKind::Polled)?;
        }
        Ok(Uring {
            dev: FileDevice::new(resolved, backing),
        })
    }
}

#[cfg(test)]
impl Uring {
    /// A device on `dev` as it is, past `new`'s checks (tests of the
    /// polled ring on a block device that does not poll).
    pub(super) fn from_device(dev: FileDevice) -> Uring {
        Uring { dev }
    }
}

impl Bdev for Uring {
    fn identity(&self) -> &Identity {
        &self.dev.id
    }
    fn product(&self) -> &'static str {
        "uring"
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
        let polled = if self.dev.backing.iopoll {
            Ring::current(RingKind::Polled).map(Some)
        } else {
            Ok(None)
        };
        match Ring::current(RingKind::Interrupt).and_then(|r| Ok((r, polled?))) {
            Ok((ring, polled)) => Box::new(UringChannel::new(ring, polled, &self.dev)),
            Err(e) => {
                tracing::error!(device = self.name(), "{e}; its IOs on this core fail");
                Box::new(super::failed_channel::FailedChannel::default())
            }
        }
    }
}
