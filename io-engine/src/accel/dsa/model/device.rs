//! [`Device`]: a model DSA device's execution: its engine and the device
//! thread's loop over the work queues of its [`Shared`] state.
//!
//! Thread: `run` is the device thread (`dsa-model-N`); `step` runs on
//! whichever thread calls it (the device thread, or a test stepping the
//! model by hand). The engine is behind a lock held while a descriptor is
//! taken and executed, so descriptors of a WQ complete in order whoever
//! steps them.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::engine::Engine;
use super::shared::Shared;

/// The engine of a model device and the state it executes against.
pub(super) struct Device {
    pub(super) shared: Arc<Shared>,
    engine: Mutex<Engine>,
}

impl Device {
    /// A device executing the descriptors queued in `shared`.
    pub(super) fn new(shared: Arc<Shared>) -> Device {
        Device {
            shared,
            engine: Mutex::new(Engine::new()),
        }
    }

    /// Executes one queued descriptor on the calling thread; returns
    /// whether there was one.
    pub(super) fn step(&self) -> bool {
        let mut engine = self.engine.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((wq, q)) = self.shared.pop() else {
            return false;
        };
        engine.run(&self.shared, wq, q);
        true
    }

    /// The device thread: executes descriptors while there are any (unless
    /// stepped by hand), spins `cfg.spin` idle, then parks until a
    /// submission wakes it.
    pub(super) fn run(&self) {
        let s = &self.shared;
        let mut idle_since: Option<Instant> = None;
        while !s.stop.load(Ordering::Acquire) {
            let manual = s.faults.is_manual();
            if !manual && self.step() {
                idle_since = None;
                continue;
            }
            let since = *idle_since.get_or_insert_with(Instant::now);
            if !manual && since.elapsed() < s.cfg.spin {
                std::hint::spin_loop();
                continue;
            }
            s.sleeping.store(true, Ordering::SeqCst);
            let work = !manual && s.queued.load(Ordering::SeqCst) != 0;
            if !work && !s.stop.load(Ordering::SeqCst) {
                // Manual mode wakes now and then to see it turned off.
                std::thread::park_timeout(Duration::from_millis(if manual { 10 } else { 500 }));
            }
            s.sleeping.store(false, Ordering::SeqCst);
            idle_since = None;
        }
        s.running.store(false, Ordering::Release);
    }
}
