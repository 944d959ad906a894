//! The state a model DSA device shares between its work queues' handles,
//! its device thread and its tests: the WQs' queues and occupancy, the
//! address space, counters, violations and software errors (the device
//! thread's loop is [`Device`](super::device::Device)'s).
//!
//! Thread: shared by all (`Arc`); the queues are behind locks, the rest is
//! atomic.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::Thread;

use super::config::ModelConfig;
use super::counters::{Counters, Violation};
use super::faults::Faults;
use crate::accel::dsa::portal::WqInfo;
use crate::accel::dsa::spec::{Descriptor, flags, opcode, status};
use crate::env::dma::{IovaMap, MappedMemory};

/// A descriptor the device took, with (for a batch) its list as read at
/// submission.
pub(super) struct Queued {
    pub(super) desc: Descriptor,
    pub(super) list: Option<Vec<Descriptor>>,
}

impl Queued {
    /// The completion records this descriptor owns from its submission to
    /// its status: its own (with an address), and those of a batch's
    /// descriptors that request one.
    pub(super) fn records(&self) -> impl Iterator<Item = u64> + '_ {
        let own = (self.desc.flags() & flags::CRAV != 0).then_some(self.desc.completion);
        let inner = self.list.iter().flatten().filter_map(|d| {
            (d.flags() & (flags::CRAV | flags::RCR) == flags::CRAV | flags::RCR)
                .then_some(d.completion)
        });
        own.into_iter().chain(inner)
    }
}

/// One work queue's state.
pub(super) struct WqState {
    pub(super) info: WqInfo,
    pub(super) queue: Mutex<VecDeque<Queued>>,
    /// Descriptors taken and not yet completed.
    pub(super) occupancy: AtomicU32,
}

/// The device.
pub(super) struct Shared {
    pub(super) id: usize,
    pub(super) cfg: ModelConfig,
    pub(super) map: Arc<IovaMap>,
    pub(super) memory: MappedMemory,
    pub(super) wqs: Vec<WqState>,
    pub(super) faults: Faults,
    pub(super) counters: Counters,
    violations: Mutex<Vec<Violation>>,
    /// Completion records owned by descriptors in flight.
    records: Mutex<HashSet<u64>>,
    software_errors: Mutex<VecDeque<String>>,
    /// Descriptors queued in all WQs.
    pub(super) queued: AtomicU64,
    /// The WQ the next step looks at first.
    next_wq: AtomicUsize,
    pub(super) sleeping: AtomicBool,
    pub(super) stop: AtomicBool,
    /// Set until the device thread has left its loop.
    pub(super) running: AtomicBool,
    pub(super) thread: OnceLock<Thread>,
}

impl Shared {
    pub(super) fn new(id: usize, mut cfg: ModelConfig, map: Arc<IovaMap>) -> Shared {
        // Windows start on pages; an offset of whole pages keeps every
        // IOVA's alignment that of its virtual address.
        cfg.iova_offset &= !0xfff;
        if cfg.wqs.is_empty() {
            cfg.wqs.push(Default::default());
        }
        let wqs = cfg
            .wqs
            .iter()
            .enumerate()
            .map(|(n, w)| WqState {
                info: WqInfo {
                    name: format!("dsa-model-{id}/wq{n}"),
                    mode: w.mode,
                    size: w.size.max(1),
                    max_transfer: w.max_transfer.clamp(1, 1 << 31),
                    max_batch: w.max_batch,
                    opcap: cfg.opcap,
                    block_on_fault: w.block_on_fault,
                },
                queue: Mutex::new(VecDeque::new()),
                occupancy: AtomicU32::new(0),
            })
            .collect();
        Shared {
            id,
            memory: MappedMemory::new(map.clone()),
            map,
            wqs,
            cfg,
            faults: Faults::default(),
            counters: Counters::default(),
            violations: Mutex::new(Vec::new()),
            records: Mutex::new(HashSet::new()),
            software_errors: Mutex::new(VecDeque::new()),
            queued: AtomicU64::new(0),
            next_wq: AtomicUsize::new(0),
            sleeping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            running: AtomicBool::new(true),
            thread: OnceLock::new(),
        }
    }

    /// Queues `q` on WQ `wq` (its entry already counted) and wakes the
    /// device.
    pub(super) fn push(&self, wq: usize, q: Queued) {
        if let Some(w) = self.wqs.get(wq) {
            w.queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back(q);
            self.queued.fetch_add(1, Ordering::AcqRel);
            self.wake();
        }
    }

    pub(super) fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed)
            && let Some(t) = self.thread.get()
        {
            t.unpark();
        }
    }

    /// Records a violation.
    pub(super) fn violate(&self, v: Violation) {
        self.counters.violations.fetch_add(1, Ordering::Relaxed);
        self.violations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(v);
    }

    /// `q`'s records pass to the device: one already owned by a descriptor
    /// in flight is a violation.
    pub(super) fn own_records(&self, wq: usize, q: &Queued) {
        let mut owned = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        for addr in q.records() {
            if !owned.insert(addr) {
                drop(owned);
                self.violate(Violation::RecordInUse { wq, addr });
                owned = self.records.lock().unwrap_or_else(PoisonError::into_inner);
            }
        }
    }

    /// The record at `addr` goes back to the driver (just before its
    /// status is written).
    pub(super) fn release_record(&self, addr: u64) {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&addr);
    }

    pub(super) fn violations(&self) -> Vec<Violation> {
        self.violations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn take_violations(&self) -> Vec<Violation> {
        std::mem::take(
            &mut *self
                .violations
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Records a software error (SWERR): `code` is a status code, for the
    /// descriptor with `op` on WQ `wq`, about `addr`.
    pub(super) fn software_error(&self, wq: usize, op: u8, code: u8, addr: u64) {
        self.software_error_text(format!(
            "{}: software error on wq{wq}: {} ({} descriptor, address {addr:#x})",
            self.name(),
            status::name(code),
            opcode::name(op)
        ));
    }

    pub(super) fn software_error_text(&self, text: String) {
        self.counters
            .software_errors
            .fetch_add(1, Ordering::Relaxed);
        self.software_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(text);
    }

    /// The oldest software error not yet taken.
    pub(super) fn take_software_error(&self) -> Option<String> {
        self.software_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
    }

    pub(super) fn name(&self) -> String {
        format!("dsa-model-{}", self.id)
    }

    /// Takes the next queued descriptor, WQs in turn.
    pub(super) fn pop(&self) -> Option<(usize, Queued)> {
        if self.queued.load(Ordering::Acquire) == 0 {
            return None;
        }
        let n = self.wqs.len();
        let first = self.next_wq.load(Ordering::Relaxed);
        for k in 0..n {
            let wq = (first + k) % n;
            let q = self.wqs[wq]
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop_front();
            if let Some(q) = q {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                self.next_wq.store((wq + 1) % n, Ordering::Relaxed);
                return Some((wq, q));
            }
        }
        None
    }
}
