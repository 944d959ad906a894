//! A software DSA device: work queues behind the same [`WorkQueue`] seam
//! as the real portals, executing descriptors against the memory it was
//! told is mapped (its [`IovaMap`], at IOVAs that are not the virtual
//! addresses unless configured so) and writing completion records as the
//! DSA specification says. No public DSA model exists; this one is built
//! from the specification's descriptor, completion record and operation
//! sections (see [`spec`](super::spec)) and is strict where a driver could
//! be wrong without noticing on hardware that happens to be kind.
//!
//! Thread: the driver's threads submit through [`ModelWq`] (a dedicated
//! WQ from one reactor, a shared WQ from any); the model's device thread
//! (`dsa-model-N`) takes queued descriptors, executes them and writes
//! their completion records; in manual mode ([`Faults::manual`]) nothing
//! runs until a test calls [`ModelHandle::step`], which executes one
//! descriptor on the caller's thread. Tests arm faults and read counters
//! and violations from any thread.
//!
//! What it does (DSA spec section names in quotes):
//!
//! - Work queues ([`WqConfig`]): dedicated (a submission beyond the WQ's
//!   size is dropped and reported, as a posted MOVDIR64B write to a full
//!   WQ is) or shared (a submission beyond the size is refused: `Retry`,
//!   ENQCMD's ZF); a batch takes one entry. An entry is freed before the
//!   status byte of its completion record is written, so a driver that
//!   frees its own count on completion never overflows the WQ.
//! - Submission is one 64-byte unit (`WorkQueue::submit`, a
//!   [`Descriptor`] value). [`ModelWq::write_portal`] is the raw-store
//!   path: anything but a 64-byte, 64-byte-aligned write inside the portal
//!   page (a torn write), or a plain write to a shared WQ, is dropped and
//!   recorded as a [`Violation`] and a software error.
//! - Operations: no-op, drain, batch, memory move, fill, compare, compare
//!   pattern, dualcast, CRC generation and copy with CRC (CRC-32C, the
//!   software module's `crc32c_update`, so the same values; the rev 2.0
//!   flags that bypass the CRC's inversion or reflection are not
//!   implemented and are invalid flags, as on a rev 1.0 device). Checks, each
//!   with the spec's status: an opcode outside OPCAP or unimplemented
//!   (unsupported opcode), flags the WQ or the operation does not allow
//!   (invalid flags, the bits in the record), non-zero reserved fields, a
//!   transfer size of 0 or above the WQ's maximum (transfer size out of
//!   range; 0 is the model's reading), overlapping buffers (memory move,
//!   dualcast, copy with CRC: the model reports no overlap support in
//!   GENCAP), dualcast destinations whose bits 11:0 differ, a CRC seed
//!   address that is not 4-byte aligned.
//! - Compare and compare pattern: result 0 (equal) or 1, with the offset of
//!   the first difference in Bytes Completed; with Check Result, a result
//!   other than the Expected Result is "success with false predicate".
//! - Batch ("Batch"): a count from 2 to the WQ's maximum batch size (else
//!   descriptor count out of range), a 64-byte aligned list (else
//!   descriptor list misaligned); the list is read descriptor by
//!   descriptor at execution, and one it cannot read ends the batch with
//!   "batch page fault" at that address; a batch or drain inside a batch is
//!   an unsupported opcode; a fenced descriptor after a failure abandons
//!   the rest. Each descriptor writes its own record (on success only with
//!   Request Completion Record); the batch's record is success when every
//!   descriptor succeeded, else "batch failed", with the descriptors
//!   processed in its Bytes Completed. The list is also read at submission
//!   and a descriptor that differs at execution is a [`Violation`]: the
//!   driver changed a list the device owned.
//! - Completion records ("Completion Record"): written when Completion
//!   Record Address Valid is set and either Request Completion Record is
//!   or the operation did not succeed; every field but the status first,
//!   then the status byte with release ordering. With
//!   [`Faults::slow_completion`] the record's other bytes are first
//!   overwritten with garbage (status 0), and the real fields and then the
//!   status each come a set time later: a driver that reads a field before
//!   it has seen the status non-zero reads garbage. A record that is not
//!   32-byte aligned or not mapped cannot be written: a software error
//!   (SWERR, [`WorkQueue::device_error`]), as is a failure of a descriptor
//!   without a record address (Request Completion Record without Completion
//!   Record Address Valid is itself invalid flags). A record whose status is not 0
//!   when its descriptor is submitted or starts is a [`Violation`] (a
//!   driver that did not clear it would take the old status for the new);
//!   so is a record submitted while a descriptor in flight owns it (its
//!   own record, or a batch descriptor's that requests one), from its
//!   submission until just before its status is written.
//! - Page faults ("Page Fault Handling", "Block on Fault"): an address not
//!   mapped (or a fault injected with [`Faults::page_fault`]) ends the
//!   operation with a partial completion: status "page fault" (bit 7 set
//!   when it was a write), Bytes Completed the bytes done (the data before
//!   it moved, the CRC so far in the CRC field), Fault Address the address.
//!   With Block on Fault (allowed only on a WQ configured for it) an
//!   injected fault is resolved and the operation goes on, as after the OS
//!   pages the memory in; an unmapped address cannot be resolved: "page
//!   fault, not resolved" with the same partial completion.
//! - Tell-tales ([`ModelCounters`]): portal writes (every submission
//!   attempt, what a doorbell costs on hardware), accepted, refused
//!   (retry), dropped, descriptors executed, batches, records written,
//!   page faults, software errors, violations.
//! - Not modelled: interrupts (RCI is accepted, no interrupt is sent),
//!   delta records, DIF, cache flush, translation fetch, PASIDs and
//!   privilege, traffic classes and steering tags (accepted, ignored),
//!   timing beyond the injected delays, the BAR0 register file (the VFIO
//!   backend's bring-up is not exercised by the model).

mod config;
mod counters;
mod device;
mod engine;
mod faults;
mod mapper;
mod shared;
mod wq;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

pub use config::{IOVA_OFFSET, ModelConfig, WqConfig};
pub use counters::{ModelCounters, Violation};
pub use faults::Faults;
pub use wq::ModelWq;

use super::portal::WorkQueue;
use crate::env::dma::{DmaMapper, IovaMap};
use device::Device;
use mapper::ModelMapper;
use shared::Shared;

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A model DSA device and its device thread. Dropping it stops the thread
/// (descriptors still queued are not executed).
pub struct DsaModel {
    handle: ModelHandle,
    thread: Option<JoinHandle<()>>,
}

impl DsaModel {
    /// A device with an address space of its own, empty until its
    /// [`mapper`](DsaModel::mapper) is registered
    /// ([`register_mapper`](crate::env::dma::register_mapper)): from then on
    /// it sees every DMA region of the process, at IOVA = virtual address
    /// + [`ModelConfig::iova_offset`], and nothing else.
    pub fn new(cfg: ModelConfig) -> DsaModel {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed) as usize;
        let shared = Arc::new(Shared::new(id, cfg, Arc::new(IovaMap::new())));
        let device = Arc::new(Device::new(shared.clone()));
        let d = device.clone();
        let thread = std::thread::Builder::new()
            .name(format!("dsa-model-{id}"))
            .spawn(move || d.run())
            .expect("spawn the DSA model's device thread");
        let _ = shared.thread.set(thread.thread().clone());
        DsaModel {
            handle: ModelHandle { shared, device },
            thread: Some(thread),
        }
    }

    /// What makes DMA memory visible to this device: it maps every region
    /// it is told of into the device's address space. Whoever creates the
    /// device registers it.
    pub fn mapper(&self) -> Arc<dyn DmaMapper> {
        Arc::new(ModelMapper {
            map: self.handle.shared.map.clone(),
            offset: self.handle.shared.cfg.iova_offset,
        })
    }

    /// Work queue `n` (in [`ModelConfig::wqs`] order).
    pub fn wq(&self, n: usize) -> Option<ModelWq> {
        (n < self.handle.shared.wqs.len()).then(|| ModelWq::new(self.handle.shared.clone(), n))
    }

    /// Every work queue, as the driver's seam.
    pub fn work_queues(&self) -> Vec<Arc<dyn WorkQueue>> {
        (0..self.handle.shared.wqs.len())
            .map(|n| Arc::new(ModelWq::new(self.handle.shared.clone(), n)) as Arc<dyn WorkQueue>)
            .collect()
    }

    /// A handle on the device's counters, faults and violations, usable
    /// after the work queues were handed to a driver.
    pub fn handle(&self) -> ModelHandle {
        self.handle.clone()
    }
}

impl std::ops::Deref for DsaModel {
    type Target = ModelHandle;
    fn deref(&self) -> &ModelHandle {
        &self.handle
    }
}

impl Drop for DsaModel {
    fn drop(&mut self) {
        self.handle.shared.stop.store(true, Ordering::Release);
        self.handle.shared.wake();
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Counters, faults and violations of a model device.
#[derive(Clone)]
pub struct ModelHandle {
    shared: Arc<Shared>,
    device: Arc<Device>,
}

impl ModelHandle {
    /// A name for messages: `dsa-model-N`.
    pub fn name(&self) -> String {
        format!("dsa-model-{}", self.shared.id)
    }

    /// Its address space.
    pub fn map(&self) -> &Arc<IovaMap> {
        &self.shared.map
    }

    /// Fault injection.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// The counters now.
    pub fn counters(&self) -> ModelCounters {
        self.shared.counters.snapshot()
    }

    /// The violations recorded so far (cleared by [`ModelHandle::take_violations`]).
    pub fn violations(&self) -> Vec<Violation> {
        self.shared.violations()
    }

    /// The violations recorded so far, and forgets them.
    pub fn take_violations(&self) -> Vec<Violation> {
        self.shared.take_violations()
    }

    /// Descriptors queued in WQ `n` and not yet completed (its occupancy).
    pub fn occupancy(&self, n: usize) -> u32 {
        self.shared
            .wqs
            .get(n)
            .map_or(0, |w| w.occupancy.load(Ordering::Acquire))
    }

    /// With [`Faults::manual`] on: executes one queued descriptor (a batch
    /// whole) on the caller's thread, WQs taken in turn. Returns whether
    /// there was one.
    pub fn step(&self) -> bool {
        self.device.step()
    }

    /// Waits (at most `timeout`) until every WQ is empty; returns whether
    /// they are.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let end = std::time::Instant::now() + timeout;
        loop {
            let busy = self
                .shared
                .wqs
                .iter()
                .any(|w| w.occupancy.load(Ordering::Acquire) != 0);
            if !busy {
                return true;
            }
            if std::time::Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Whether the device thread still runs.
    pub fn thread_running(&self) -> bool {
        self.shared.running.load(Ordering::Acquire)
    }
}
