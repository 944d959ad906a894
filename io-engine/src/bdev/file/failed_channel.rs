//! [`FailedChannel`]: the channel of a device that cannot do IO on this
//! core (its kernel interface could not be set up here): every IO fails
//! with EIO, counted, at the next poll.
//!
//! Thread: the reactor that made it.

use crate::bdev::device_channel::DeviceChannel;
use crate::bdev::io::{BdevIo, IoError};

/// Fails every IO.
#[derive(Default)]
pub(super) struct FailedChannel {
    ios: Vec<BdevIo>,
}

impl DeviceChannel for FailedChannel {
    fn submit(&mut self, mut io: BdevIo) {
        io.set_status(Err(IoError::Device(libc::EIO)));
        self.ios.push(io);
    }

    fn poll(&mut self, done: &mut Vec<BdevIo>) -> usize {
        let n = self.ios.len();
        done.append(&mut self.ios);
        n
    }
}
