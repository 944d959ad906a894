//! [`ModelWq`]: one work queue of a model DSA device, as the driver sees
//! it ([`WorkQueue`]), with the raw portal-store path
//! ([`ModelWq::write_portal`]) that catches torn writes.
//!
//! Thread: a dedicated WQ's handle is used by one reactor, a shared WQ's
//! by any number of threads; the state behind it is shared with the
//! device thread.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::counters::{Counters, Violation};
use super::engine::{check_stale, read_list};
use super::shared::{Queued, Shared};
use crate::accel::dsa::portal::{Retry, WorkQueue, WqInfo, WqMode};
use crate::accel::dsa::spec::{self, Descriptor, opcode};
use crate::env::dma::{DmaMemory, MappedMemory};

/// One work queue of a model device.
#[derive(Clone)]
pub struct ModelWq {
    shared: Arc<Shared>,
    index: usize,
}

impl std::fmt::Debug for ModelWq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelWq")
            .field("name", &self.info().name)
            .finish()
    }
}

impl ModelWq {
    pub(super) fn new(shared: Arc<Shared>, index: usize) -> ModelWq {
        ModelWq { shared, index }
    }

    /// Its index in the device.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The device's memory, as its concrete type.
    pub fn mapped_memory(&self) -> &MappedMemory {
        &self.shared.memory
    }

    /// A raw store of `bytes` at `offset` in the WQ's portal page: what a
    /// driver that wrote the portal with ordinary stores would do. Only
    /// one 64-byte, 64-byte aligned store inside the page submits a
    /// descriptor (as MOVDIR64B, to a dedicated WQ); anything else is
    /// dropped, recorded as a [`Violation`] and a software error, and
    /// returned.
    ///
    /// # Safety
    ///
    /// As [`WorkQueue::submit`] for the descriptor the bytes form.
    pub unsafe fn write_portal(&self, offset: usize, bytes: &[u8]) -> Result<(), Violation> {
        let s = &self.shared;
        Counters::bump(&s.counters.portal_writes);
        let whole = bytes.len() == spec::DESC_SIZE
            && offset.is_multiple_of(spec::DESC_SIZE)
            && offset + spec::DESC_SIZE <= spec::PORTAL_SIZE;
        let v = if !whole {
            Violation::TornWrite {
                wq: self.index,
                offset,
                len: bytes.len(),
            }
        } else if self.info().mode == WqMode::Shared {
            Violation::PlainWriteToShared { wq: self.index }
        } else {
            let mut b = [0u8; spec::DESC_SIZE];
            b.copy_from_slice(bytes);
            let _ = self.enqueue(&Descriptor::from_bytes(&b));
            return Ok(());
        };
        Counters::bump(&s.counters.dropped);
        s.software_error_text(format!(
            "{}: wq{}: a portal write the device dropped: {v:?}",
            s.name(),
            self.index
        ));
        s.violate(v.clone());
        Err(v)
    }

    /// Takes `desc` into the WQ if it has room.
    fn enqueue(&self, desc: &Descriptor) -> Result<(), Retry> {
        let s = &self.shared;
        let w = &s.wqs[self.index];
        let shared = w.info.mode == WqMode::Shared;
        if shared && s.faults.take_refusal() {
            Counters::bump(&s.counters.retries);
            return Err(Retry);
        }
        let size = w.info.size;
        let room = w
            .occupancy
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
                (o < size).then_some(o + 1)
            })
            .is_ok();
        if !room {
            if shared {
                Counters::bump(&s.counters.retries);
                return Err(Retry);
            }
            // A posted write to a full dedicated WQ: lost.
            Counters::bump(&s.counters.dropped);
            s.software_error_text(format!(
                "{}: wq{}: a descriptor written to the full dedicated WQ was dropped",
                s.name(),
                self.index
            ));
            s.violate(Violation::DedicatedOverflow { wq: self.index });
            return Ok(());
        }
        Counters::bump(&s.counters.accepted);
        let list = {
            let g = s.map.read();
            check_stale(s, &g, self.index, desc);
            (desc.opcode() == opcode::BATCH).then(|| read_list(&g, desc, w.info.max_batch))
        };
        let q = Queued {
            desc: *desc,
            list: list.flatten(),
        };
        s.own_records(self.index, &q);
        s.push(self.index, q);
        Ok(())
    }
}

// SAFETY: `submit` takes the descriptor as one 64-byte value (a copy),
// after whatever the caller stored before (the queue's lock orders the
// device thread's reads after it); `Ok` means it is queued and will be
// executed and completed (unless dropped from a full dedicated WQ, which
// the seam's contract forbids the caller). `memory` is the map the device
// resolves every address through. `info` is what the device enforces.
unsafe impl WorkQueue for ModelWq {
    fn info(&self) -> &WqInfo {
        &self.shared.wqs[self.index].info
    }

    fn memory(&self) -> &dyn DmaMemory {
        &self.shared.memory
    }

    unsafe fn submit(&self, desc: &Descriptor) -> Result<(), Retry> {
        Counters::bump(&self.shared.counters.portal_writes);
        self.enqueue(desc)
    }

    fn device_error(&self) -> Option<String> {
        self.shared.take_software_error()
    }
}
