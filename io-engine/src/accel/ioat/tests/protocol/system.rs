//! What the driver and the device share: the channel's registers, the
//! completion word, the ring, the data buffers and the IOVA map.
//!
//! Thread: created in a loom model's closure, shared by its driver and
//! device threads through a loom `Arc`.

use loom::cell::UnsafeCell;
use loom::sync::RwLock;
use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

use super::descriptor::Descriptor;

/// Ring slots.
pub(super) const RING: usize = 4;

/// Data buffers, numbered by their IOVA: sources 0 and 1, destinations 2
/// to 6.
pub(super) const BUFFERS: usize = 7;

/// The channel as the model sees it.
pub(super) struct System {
    /// DMACOUNT: descriptors the driver has handed over (the doorbell).
    pub dmacount: AtomicU32,
    /// CHANCMD: [`System::SUSPEND`] or [`System::RESET`] until the device
    /// has acted on it.
    pub chancmd: AtomicU32,
    /// CHANSTS: [`System::status`] of the descriptor started last.
    pub chansts: AtomicU64,
    /// The completion word: [`System::status`] of the last descriptor with
    /// completion update done.
    pub word: AtomicU64,
    /// The ring's descriptor slots.
    pub ring: [UnsafeCell<Descriptor>; RING],
    /// The data buffers.
    pub buffers: [UnsafeCell<u32>; BUFFERS],
    /// The device's IOVA map: whether each buffer is mapped.
    pub map: RwLock<[bool; BUFFERS]>,
    /// The driver is done; the device thread ends once idle.
    pub stop: AtomicBool,
}

impl System {
    /// CHANSTS state: working on a descriptor.
    pub const ACTIVE: u64 = 0;
    /// CHANSTS state: caught up with DMACOUNT.
    pub const IDLE: u64 = 1;
    /// CHANSTS state: suspended.
    pub const SUSPENDED: u64 = 2;
    /// CHANSTS state: halted on an error.
    pub const HALTED: u64 = 3;
    /// CHANCMD: suspend.
    pub const SUSPEND: u32 = 0x04;
    /// CHANCMD: reset (clears when done).
    pub const RESET: u32 = 0x20;
    /// What a buffer's new owner writes into it once it is handed back.
    pub const CANARY: u32 = 0xdead;

    /// Every buffer mapped, source `i` holding [`System::data`]`(i)`,
    /// destinations 0, the ring all null descriptors.
    pub fn new() -> System {
        System {
            dmacount: AtomicU32::new(0),
            chancmd: AtomicU32::new(0),
            chansts: AtomicU64::new(System::IDLE),
            word: AtomicU64::new(0),
            ring: std::array::from_fn(|_| UnsafeCell::new(Descriptor::NULL)),
            buffers: std::array::from_fn(|i| UnsafeCell::new(System::data(i))),
            map: RwLock::new([true; BUFFERS]),
            stop: AtomicBool::new(false),
        }
    }

    /// The initial contents of buffer `i`: data for sources, 0 for
    /// destinations.
    pub fn data(i: usize) -> u32 {
        if i < 2 { 0x100 + i as u32 } else { 0 }
    }

    /// CHANSTS format: the slot's "address" (slot + 1, 0 for none) above
    /// the state's 3 bits.
    pub fn status(slot: usize, state: u64) -> u64 {
        ((slot as u64 + 1) << 3) | state
    }

    /// The slot a status names, if any.
    pub fn slot(status: u64) -> Option<usize> {
        (status >> 3).checked_sub(1).map(|s| s as usize)
    }

    /// The state bits of a status.
    pub fn state(status: u64) -> u64 {
        status & 7
    }
}
