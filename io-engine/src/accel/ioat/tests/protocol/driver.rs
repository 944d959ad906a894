//! The model's driver: builds and flushes batches, polls for completions,
//! restarts the channel, unmaps buffers. Reporting a request done (success
//! or failure) hands its destination back to its owner, who reads it and
//! then reuses it (writes [`System::CANARY`]): loom reports the access if
//! the device may still write the buffer.
//!
//! Thread: the loom model's main thread.

use std::collections::VecDeque;

use loom::sync::Arc;
use loom::sync::atomic::Ordering;
use loom::thread;

use super::descriptor::Descriptor;
use super::rules::Rules;
use super::system::{RING, System};

/// Polls of a bounded wait (the driver's 1 s): a reset or a suspend may
/// not be seen in time, and the protocol must be safe either way.
const WAIT_POLLS: usize = 2;

/// The driver's own state.
pub(super) struct Driver {
    sys: Arc<System>,
    rules: Rules,
    /// Descriptors built (free-running).
    head: u32,
    /// First descriptor not retired.
    tail: u32,
    /// Ends of the batches flushed and not yet retired, oldest first.
    ends: VecDeque<u32>,
    /// Each slot's request in flight: its destination and the data the
    /// copy must leave there.
    slots: [Option<(usize, u32)>; RING],
    /// The completion word's value last acted on.
    last_word: u64,
}

impl Driver {
    /// A driver with an empty ring.
    pub fn new(sys: Arc<System>, rules: Rules) -> Driver {
        Driver {
            sys,
            rules,
            head: 0,
            tail: 0,
            ends: VecDeque::new(),
            slots: [None; RING],
            last_word: 0,
        }
    }

    /// Requests built and not reported.
    pub fn in_flight(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    /// Builds one batch of copies `(src, dst)`, completion update on its
    /// last descriptor, and rings the doorbell once.
    pub fn submit(&mut self, batch: &[(usize, usize)]) {
        for (i, &(src, dst)) in batch.iter().enumerate() {
            let slot = self.head as usize % RING;
            let d = Descriptor {
                src,
                dst,
                completion_update: i + 1 == batch.len(),
                null: false,
            };
            self.sys.ring[slot].with_mut(|p| {
                // SAFETY: a loom cell pointer, valid for the closure; loom
                // reports a device read not ordered with this write.
                unsafe { *p = d }
            });
            self.slots[slot] = Some((dst, System::data(src)));
            self.head += 1;
        }
        self.ends.push_back(self.head - 1);
        let order = if self.rules.relaxed_doorbell {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        self.sys.dmacount.store(self.head, order);
    }

    /// Looks for completions once; returns how many requests it reported.
    pub fn poll(&mut self) -> usize {
        let word = self.sys.word.load(Ordering::Acquire);
        if word != self.last_word {
            self.last_word = word;
            if let Some(end) = self.accept(word) {
                return self.retire_through(end);
            }
        } else if self.rules.chansts_completions {
            // Old: the word stood still past the stall check, so CHANSTS.
            let st = self.sys.chansts.load(Ordering::Acquire);
            if System::state(st) != System::HALTED
                && let Some(end) = self.in_flight_at(st)
            {
                return self.retire_through(end);
            }
        }
        0
    }

    /// The descriptor a completion word says is done: a flushed batch end
    /// at or after the tail (old: any descriptor in flight).
    fn accept(&mut self, word: u64) -> Option<u32> {
        if self.rules.chansts_completions {
            return self.in_flight_at(word);
        }
        let slot = System::slot(word)?;
        let pos = self.ends.iter().position(|&e| e as usize % RING == slot)?;
        let end = self.ends[pos];
        self.ends.drain(..=pos);
        Some(end)
    }

    /// Old rule (`retire_through` before issue 18): the descriptor in
    /// flight in the slot a status names.
    fn in_flight_at(&self, status: u64) -> Option<u32> {
        let slot = System::slot(status)? as u32;
        let delta = slot.wrapping_sub(self.tail) % RING as u32;
        (delta < self.head - self.tail).then_some(self.tail + delta)
    }

    /// Reports every request from the tail through `end` done: its owner
    /// checks the data and reuses the buffer.
    fn retire_through(&mut self, end: u32) -> usize {
        let mut n = 0;
        while self.tail != end + 1 {
            if let Some((dst, expect)) = self.slots[self.tail as usize % RING].take() {
                let got = self.sys.buffers[dst].with(|p| {
                    // SAFETY: a loom cell pointer, valid for the closure.
                    unsafe { *p }
                });
                assert_eq!(
                    got, expect,
                    "a request was reported done before its data landed"
                );
                self.hand_back(dst);
                n += 1;
            }
            self.tail += 1;
        }
        n
    }

    /// The owner of buffer `i` has it back and reuses it.
    fn hand_back(&self, i: usize) {
        self.sys.buffers[i].with_mut(|p| {
            // SAFETY: a loom cell pointer, valid for the closure; loom
            // reports a device access not ordered before this write.
            unsafe { *p = System::CANARY }
        });
    }

    /// Waits a bounded number of polls for `done`; whether it came.
    fn wait(&self, done: impl Fn(&System) -> bool) -> bool {
        for _ in 0..WAIT_POLLS {
            if done(&self.sys) {
                return true;
            }
            thread::yield_now();
        }
        done(&self.sys)
    }

    /// A restart with requests in flight (after a timeout, say): SUSPEND
    /// and a bounded wait for it (a timeout there only warns), RESET and a
    /// bounded wait for its bit to clear; only then are the ring's slots
    /// rewritten and its requests failed, their buffers handed back. A
    /// reset not confirmed leaves the channel broken: its requests are
    /// kept, never reported, and the ring is left alone. Returns whether
    /// the ring was rewritten and its requests failed.
    pub fn restart(&mut self) -> bool {
        self.sys.chancmd.store(System::SUSPEND, Ordering::Release);
        self.wait(|s| System::state(s.chansts.load(Ordering::Acquire)) == System::SUSPENDED);
        self.sys.chancmd.store(System::RESET, Ordering::Release);
        let confirmed = self.wait(|s| s.chancmd.load(Ordering::Acquire) & System::RESET == 0);
        if !confirmed && !self.rules.unconfirmed_restart {
            return false;
        }
        for cell in &self.sys.ring {
            cell.with_mut(|p| {
                // SAFETY: as in `submit`.
                unsafe { *p = Descriptor::NULL }
            });
        }
        for slot in 0..RING {
            if let Some((dst, _)) = self.slots[slot].take() {
                self.hand_back(dst);
            }
        }
        self.head = 0;
        self.tail = 0;
        self.ends.clear();
        true
    }

    /// Unmaps buffer `i` (the `DmaMapper` contract: the device no longer
    /// uses it once this returns) and hands it back to its owner.
    pub fn unmap(&mut self, i: usize) {
        self.sys.map.write().unwrap()[i] = false;
        self.hand_back(i);
    }

    /// Tells the device thread to end once idle.
    pub fn stop(&self) {
        self.sys.stop.store(true, Ordering::Release);
    }
}
