//! [`FileDevice`]: a `uring` or `aio` device: its identity, its open
//! backing, which operations it serves, and the channel of its kind on
//! each core (`UringChannel` on the reactor's ring, `AioChannel` with a
//! context of its own).
//!
//! Thread: the device is shared by every core (read-only after creation)
//! and built on the control path; each channel lives on one reactor.

use super::aio_channel::AioChannel;
use super::aio_context::AioContext;
use super::backing::{Backing, BackingKind};
use super::backing_error::BackingError;
use super::failed_channel::FailedChannel;
use super::ring::{Ring, RingKind};
use super::uring_channel::UringChannel;
use crate::bdev::device::Bdev;
use crate::bdev::device_channel::DeviceChannel;
use crate::bdev::identity::Identity;
use crate::bdev::io::IoType;
use crate::bdev::uri::{BdevKind, BdevSpec};

/// A device with a backing.
pub struct FileDevice {
    pub(super) id: Identity,
    pub(super) backing: Backing,
}

impl FileDevice {
    /// Opens `spec`'s backing, after checking that the kernel interface of
    /// its kind (io_uring, AIO) can be had: a device that could do no IO is
    /// refused here, not failed IO by IO later.
    pub fn open(spec: &BdevSpec) -> Result<FileDevice, BackingError> {
        match spec.kind {
            BdevKind::Aio => {
                AioContext::new(1, None).map_err(|source| BackingError::Unavailable {
                    what: "Linux AIO",
                    source,
                    hint: " (check /proc/sys/fs/aio-max-nr against /proc/sys/fs/aio-nr)",
                })?;
            }
            _ => Ring::probe(RingKind::Interrupt)?,
        }
        let (backing, resolved) = Backing::open(spec)?;
        if backing.iopoll {
            Ring::probe(RingKind::Polled)?;
        }
        Ok(FileDevice::new(resolved, backing))
    }

    /// The device of a resolved spec on its opened backing.
    pub(super) fn new(spec: BdevSpec, backing: Backing) -> FileDevice {
        FileDevice {
            id: Identity::new(spec),
            backing,
        }
    }

    /// The device's name, for logs.
    pub(super) fn name(&self) -> &str {
        &self.id.spec.name
    }

    fn uring_channel(&self) -> Result<UringChannel, BackingError> {
        let ring = Ring::current(RingKind::Interrupt)?;
        let polled = if self.backing.iopoll {
            Some(Ring::current(RingKind::Polled)?)
        } else {
            None
        };
        Ok(UringChannel::new(
            ring,
            polled,
            &self.backing.file,
            self.name(),
        ))
    }
}

impl Bdev for FileDevice {
    fn identity(&self) -> &Identity {
        &self.id
    }
    fn product(&self) -> &'static str {
        self.id.spec.kind.as_str()
    }
    /// Which operations the backing serves: a read-only one only reads (and
    /// flushes, which change nothing); unmap needs a backing that
    /// deallocates; copy is `copy_file_range` on a file (a block device's
    /// copy is the bdev layer's emulation).
    fn supports(&self, op: IoType) -> bool {
        let writable = !self.backing.readonly;
        match op {
            IoType::Read | IoType::Flush => true,
            IoType::Write | IoType::WriteZeroes => writable,
            IoType::Unmap => writable && self.backing.discard,
            IoType::Copy => writable && self.backing.kind == BackingKind::File,
        }
    }
    fn stores_data(&self) -> bool {
        true
    }
    fn volatile_write_cache(&self) -> bool {
        self.backing.write_cache
    }
    fn backing(&self) -> Option<(&std::path::Path, &'static str)> {
        Some((&self.backing.path, self.backing.kind.as_str()))
    }
    fn create_channel(&self) -> Box<dyn DeviceChannel> {
        let channel: Result<Box<dyn DeviceChannel>, String> = match self.id.spec.kind {
            BdevKind::Aio => AioChannel::new(&self.backing.file, self.name())
                .map(|c| Box::new(c) as Box<dyn DeviceChannel>)
                .map_err(|e| format!("no AIO context ({e}; see /proc/sys/fs/aio-max-nr)")),
            _ => self
                .uring_channel()
                .map(|c| Box::new(c) as Box<dyn DeviceChannel>)
                .map_err(|e| e.to_string()),
        };
        channel.unwrap_or_else(|e| {
            tracing::error!(device = self.name(), "{e}; its IOs on this core fail");
            Box::new(FailedChannel::default())
        })
    }
}
