//! A test device without a native copy: another device with its copy
//! hidden, so that the channel emulates it; its reads may be made to fail
//! from an offset on, to see how an emulated copy fails.
//!
//! Thread: as the device it wraps.

use std::sync::Arc;

use super::device::Bdev;
use super::device_channel::DeviceChannel;
use super::identity::Identity;
use super::io::{BdevIo, IoError, IoType};

/// The errno the failing reads report (EIO).
pub(super) const EIO: i32 = 5;

/// `inner`, serving every operation it serves but copy; reads at or past
/// `fail_reads_from` fail with [`EIO`].
pub(super) struct NoCopy {
    pub(super) inner: Arc<dyn Bdev>,
    pub(super) fail_reads_from: u64,
}

impl Bdev for NoCopy {
    fn identity(&self) -> &Identity {
        self.inner.identity()
    }
    fn product(&self) -> &'static str {
        self.inner.product()
    }
    fn supports(&self, op: IoType) -> bool {
        op != IoType::Copy && self.inner.supports(op)
    }
    fn stores_data(&self) -> bool {
        self.inner.stores_data()
    }
    fn create_channel(&self) -> Box<dyn DeviceChannel> {
        Box::new(FailingReads {
            dev: self.inner.create_channel(),
            from: self.fail_reads_from,
        })
    }
}

/// The inner device's channel, its reads past `from` failed.
struct FailingReads {
    dev: Box<dyn DeviceChannel>,
    from: u64,
}

impl DeviceChannel for FailingReads {
    fn submit(&mut self, io: BdevIo) {
        self.dev.submit(io);
    }

    fn poll(&mut self, done: &mut Vec<BdevIo>) -> usize {
        let before = done.len();
        let n = self.dev.poll(done);
        for io in &mut done[before..] {
            if io.op() == IoType::Read && io.offset() >= self.from {
                io.set_status(Err(IoError::Device(EIO)));
            }
        }
        n
    }
}
