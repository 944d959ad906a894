//! The model's device: acts on CHANCMD between descriptors, executes the
//! descriptors DMACOUNT hands it, one at a time, in ring order.
//!
//! As the hardware does (and as issue 18 asks of `model.rs`): CHANSTS names a
//! descriptor when the device starts it, before its data is written, and
//! the data is known written only once the completion word names it (a
//! release store after the copy). SUSPEND and RESET are acted on between
//! descriptors, never inside one; RESET clears DMACOUNT and the device's
//! position, and its bit clears (release) once the device has stopped.
//!
//! Thread: its own loom thread, until [`System::stop`] and nothing left
//! to run.

use loom::sync::Arc;
use loom::sync::atomic::Ordering;
use loom::thread;

use super::rules::Rules;
use super::system::{RING, System};

/// The device's own state.
pub(super) struct Device {
    sys: Arc<System>,
    rules: Rules,
    /// Descriptors fetched since the last reset.
    count: u32,
    /// CHANSTS state.
    state: u64,
    /// The last descriptor started.
    last: usize,
    /// A completion write held back ([`Rules::late_word`]), and whether
    /// the fault has fired.
    held_word: Option<u64>,
    late_word_fired: bool,
}

impl Device {
    /// A device idle at the start of the ring.
    pub fn new(sys: Arc<System>, rules: Rules) -> Device {
        Device {
            sys,
            rules,
            count: 0,
            state: System::IDLE,
            last: 0,
            held_word: None,
            late_word_fired: false,
        }
    }

    /// Runs until the driver stops and nothing is left to do.
    pub fn run(mut self) {
        loop {
            let cmd = self.sys.chancmd.load(Ordering::Acquire);
            if cmd != 0 && self.command(cmd) {
                continue;
            }
            if self.runnable() {
                self.step();
                continue;
            }
            if self.held_word.is_some() {
                self.release_word();
                continue;
            }
            if self.sys.stop.load(Ordering::Acquire) {
                return;
            }
            thread::yield_now();
        }
    }

    fn runnable(&self) -> bool {
        matches!(self.state, System::ACTIVE | System::IDLE)
            && self.count != self.sys.dmacount.load(Ordering::Acquire)
    }

    fn publish(&self) {
        self.sys
            .chansts
            .store(System::status(self.last, self.state), Ordering::Release);
    }

    /// Acts on a command, then clears it (only that command: the driver
    /// may have written another meanwhile); false for a RESET the device
    /// ignores, whose bit stays set while the device goes on.
    fn command(&mut self, cmd: u32) -> bool {
        match cmd {
            System::RESET if self.rules.reset_ignored => return false,
            System::RESET => {
                self.count = 0;
                self.state = System::IDLE;
                self.sys.dmacount.store(0, Ordering::Release);
                self.publish();
            }
            System::SUSPEND if matches!(self.state, System::ACTIVE | System::IDLE) => {
                self.state = System::SUSPENDED;
                self.publish();
            }
            _ => {}
        }
        let _ = self
            .sys
            .chancmd
            .compare_exchange(cmd, 0, Ordering::AcqRel, Ordering::Acquire);
        true
    }

    /// Fetches and executes the next descriptor.
    fn step(&mut self) {
        let slot = self.count as usize % RING;
        self.last = slot;
        self.state = System::ACTIVE;
        if !self.rules.chansts_when_done {
            self.publish();
            self.release_word();
        }
        let d = self.sys.ring[slot].with(|p| {
            // SAFETY: a loom cell pointer, valid for the closure; loom
            // reports a write to the slot not ordered before this read.
            unsafe { *p }
        });
        self.count += 1;
        if !d.null && !self.copy(d.src, d.dst) {
            self.state = System::HALTED;
            self.publish();
            return;
        }
        if self.count == self.sys.dmacount.load(Ordering::Acquire) {
            self.state = System::IDLE;
        }
        self.publish();
        if self.rules.chansts_when_done {
            self.release_word();
        }
        if d.completion_update {
            let word = System::status(slot, self.state);
            if self.rules.late_word && !self.late_word_fired {
                self.late_word_fired = true;
                self.held_word = Some(word);
            } else {
                self.sys.word.store(word, Ordering::Release);
            }
        }
    }

    /// Writes the completion word held back, if any.
    fn release_word(&mut self) {
        if let Some(word) = self.held_word.take() {
            self.sys.word.store(word, Ordering::Release);
        }
    }

    /// Copies buffer `src` to `dst` if both are mapped; false (a halt) if
    /// not. Holds the map's read lock across the copy unless the rules
    /// say otherwise.
    fn copy(&self, src: usize, dst: usize) -> bool {
        let map = self.sys.map.read().unwrap();
        if !(map[src] && map[dst]) {
            return false;
        }
        if self.rules.copy_outside_map_lock {
            drop(map);
            self.move_data(src, dst);
        } else {
            self.move_data(src, dst);
            drop(map);
        }
        true
    }

    fn move_data(&self, src: usize, dst: usize) {
        let v = self.sys.buffers[src].with(|p| {
            // SAFETY: a loom cell pointer, valid for the closure; loom
            // checks the access.
            unsafe { *p }
        });
        self.sys.buffers[dst].with_mut(|p| {
            // SAFETY: as above.
            unsafe { *p = v }
        });
    }
}
