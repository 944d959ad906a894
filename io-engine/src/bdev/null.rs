//! The null device: no data movement. Writes are discarded and reads leave
//! the buffer untouched, as SPDK's null bdev does, and complete saying the
//! range reads as zeroes ([`IoSlot::reads_zeroes`](super::io::IoSlot::reads_zeroes));
//! every IO completes on the next poll. It measures the engine's own
//! per-IO cost.
//!
//! Thread: the device is shared; each channel lives on one reactor.

use super::device::Bdev;
use super::device_channel::DeviceChannel;
use super::identity::Identity;
use super::io::{BdevIo, IoType};
use super::uri::BdevSpec;

/// A null device.
pub struct Null {
    id: Identity,
}

impl Null {
    /// A null device as `spec` describes.
    pub fn new(spec: BdevSpec) -> Self {
        Null {
            id: Identity::new(spec),
        }
    }
}

impl Bdev for Null {
    fn identity(&self) -> &Identity {
        &self.id
    }
    fn product(&self) -> &'static str {
        "null"
    }
    fn supports(&self, _op: IoType) -> bool {
        true
    }
    fn stores_data(&self) -> bool {
        false
    }
    fn create_channel(&self) -> Box<dyn DeviceChannel> {
        Box::new(NullChannel {
            pending: Vec::with_capacity(256),
        })
    }
}

struct NullChannel {
    pending: Vec<BdevIo>,
}

impl DeviceChannel for NullChannel {
    #[inline]
    fn submit(&mut self, mut io: BdevIo) {
        if io.op() == IoType::Read {
            io.set_reads_zeroes();
        }
        self.pending.push(io);
    }

    #[inline]
    fn poll(&mut self, done: &mut Vec<BdevIo>) -> usize {
        let n = self.pending.len();
        if n > 0 {
            done.append(&mut self.pending);
        }
        n
    }
}
