//! Core slots: a small, process-wide unique number per data-path thread.
//!
//! Thread: any. A reactor claims a slot when it starts and holds it until it
//! stops; per-core structures (pool caches, per-core stats) are arrays indexed
//! by slot, and a slot's entry is touched only by the thread holding the
//! slot. Claims go through one atomic per slot, so two threads never hold the
//! same slot: that uniqueness is the invariant the per-core caches rely on.
//!
//! Threads without a slot (the control plane, tests) still work; per-core
//! structures send them down their shared path.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

/// Number of slots; the most reactors one process can run.
pub const MAX_SLOTS: usize = 128;

const NONE: u32 = u32::MAX;

static CLAIMED: [AtomicBool; MAX_SLOTS] = [const { AtomicBool::new(false) }; MAX_SLOTS];

thread_local! {
    static CURRENT: Cell<u32> = const { Cell::new(NONE) };
}

/// Errors from claiming a slot.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SlotError {
    /// Every slot is held by a live thread.
    #[error("all {MAX_SLOTS} core slots are in use: too many reactors in one process")]
    Exhausted,
    /// The calling thread already holds a slot.
    #[error("this thread already holds core slot {0}")]
    AlreadyHeld(u32),
}

/// Proof that the current thread holds a slot; dropping it releases the slot.
///
/// `!Send`: the claim belongs to the thread that made it.
#[derive(Debug)]
pub struct SlotClaim {
    slot: u32,
    _not_send: PhantomData<*const ()>,
}

impl SlotClaim {
    /// The claimed slot.
    pub fn slot(&self) -> u32 {
        self.slot
    }
}

impl Drop for SlotClaim {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(NONE));
        CLAIMED[self.slot as usize].store(false, Ordering::Release);
    }
}

/// Claims the lowest free slot for the calling thread.
pub fn claim() -> Result<SlotClaim, SlotError> {
    if let Some(held) = current() {
        return Err(SlotError::AlreadyHeld(held));
    }
    for (i, flag) in CLAIMED.iter().enumerate() {
        if flag
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            CURRENT.with(|c| c.set(i as u32));
            return Ok(SlotClaim {
                slot: i as u32,
                _not_send: PhantomData,
            });
        }
    }
    Err(SlotError::Exhausted)
}

/// The slot the calling thread holds, if any.
#[inline(always)]
pub fn current() -> Option<u32> {
    let s = CURRENT.with(|c| c.get());
    (s != NONE).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_unique_and_released_on_drop() {
        let a = claim().unwrap();
        assert_eq!(current(), Some(a.slot()));
        assert_eq!(claim().unwrap_err(), SlotError::AlreadyHeld(a.slot()));
        let other = std::thread::spawn(|| {
            let b = claim().unwrap();
            b.slot()
        })
        .join()
        .unwrap();
        assert_ne!(other, a.slot());
        drop(a);
        assert_eq!(current(), None);
    }
}
