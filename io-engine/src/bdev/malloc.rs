//! The malloc device: RAM-backed, in DMA memory (2 MiB hugepages when the host
//! has them reserved, normal pages otherwise). Reads and writes copy data;
//! write_zeroes and unmap zero the range; flush has nothing to do.
//!
//! Thread: the device (its memory) is shared by every core; each channel
//! lives on one reactor, copies on that core, and completes on its next poll.

use std::sync::Arc;

use uuid::Uuid;

use super::io::{BdevIo, IoType};
use super::uri::BdevSpec;
use super::{Bdev, DeviceChannel};
use crate::env::dma::{DmaError, DmaRegion};

/// A malloc device.
pub struct Malloc {
    spec: BdevSpec,
    uuid: Uuid,
    mem: Arc<DmaRegion>,
}

impl Malloc {
    /// Allocates the device's memory (zeroed).
    pub fn new(spec: BdevSpec) -> Result<Self, DmaError> {
        let mem = Arc::new(DmaRegion::alloc(spec.size_bytes() as usize)?);
        let uuid = spec.uuid.unwrap_or_else(Uuid::new_v4);
        Ok(Malloc { spec, uuid, mem })
    }
}

impl Bdev for Malloc {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn uuid(&self) -> Uuid {
        self.uuid
    }
    fn product(&self) -> &'static str {
        "malloc"
    }
    fn block_size(&self) -> u32 {
        self.spec.block_size
    }
    fn num_blocks(&self) -> u64 {
        self.spec.num_blocks
    }
    fn supports(&self, _op: IoType) -> bool {
        true
    }
    fn stores_data(&self) -> bool {
        true
    }
    fn uri(&self) -> String {
        self.spec.uri.clone()
    }
    fn create_channel(&self) -> Box<dyn DeviceChannel> {
        Box::new(MallocChannel {
            mem: self.mem.clone(),
            pending: Vec::with_capacity(256),
        })
    }
}

struct MallocChannel {
    mem: Arc<DmaRegion>,
    pending: Vec<BdevIo>,
}

impl DeviceChannel for MallocChannel {
    #[inline]
    fn submit(&mut self, mut io: BdevIo) {
        // The channel validated the range: offset + len <= device size <=
        // region length, and data IOs carry a buffer of at least len bytes.
        let (offset, len) = (io.offset() as usize, io.len() as usize);
        let base = self.mem.as_ptr();
        match io.op() {
            IoType::Read => {
                let buf = io.buf_mut().expect("validated: read has a buffer");
                // SAFETY: source and destination ranges are inside their live
                // mappings (validated above) and distinct (the buffer is not
                // device memory). The device memory is reached only through
                // raw pointers; concurrent IOs to the same blocks race on
                // content only, as on any block device.
                unsafe { std::ptr::copy_nonoverlapping(base.add(offset), buf.as_ptr(), len) };
            }
            IoType::Write => {
                let buf = io.buf().expect("validated: write has a buffer");
                // SAFETY: as for reads, in the other direction.
                unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), base.add(offset), len) };
            }
            IoType::WriteZeroes | IoType::Unmap => {
                // SAFETY: the range is inside the mapping (validated).
                unsafe { std::ptr::write_bytes(base.add(offset), 0, len) };
            }
            IoType::Flush => {}
        }
        io.set_status(Ok(()));
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
