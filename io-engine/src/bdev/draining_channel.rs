//! [`DrainingChannel`]: a device channel whose bdev channel went away with
//! IO still in the device, kept (with the device open) until the device has
//! finished every IO, so that no buffer goes back to its pool while an
//! engine (the I/OAT model's thread, the hardware) may still write it.
//!
//! Thread: the reactor the channel lived on. It polls from a poller of its
//! own there (the reactor goes on serving its other pollers meanwhile), or,
//! when it is dropped before it is done (the reactor stopping), waits in
//! its `Drop`, bounded by [`OFFLOAD_DRAIN_TIMEOUT`].
//!
//! The IOs it completes are dropped, their handlers not called: a handler
//! that has just panicked may panic again, a drop may run while the
//! reactor tears down, and whoever dropped the channel gave up its
//! completions. Their IO objects go back to the pool only once the device
//! reported them.

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_utils::CachePadded;

use super::desc::BdevDesc;
use super::device_channel::DeviceChannel;
use super::io::{BdevIo, IoDone};
use super::stats::CoreCounters;
use crate::accel::{OFFLOAD_DRAIN_TIMEOUT, poll_until};
use crate::env::tsc;
use crate::reactor::{self, Poll, PollerHandle};

/// A device channel left with IO in flight, until the device finishes it.
pub(super) struct DrainingChannel {
    /// `None` once leaked (`Drop`).
    dev: Option<Box<dyn DeviceChannel>>,
    /// IOs handed to the device and not yet reported by it.
    in_flight: u64,
    /// Past it, what is still in flight is leaked (`Drop`).
    deadline: Instant,
    /// The device's completions; dropped as they come.
    done: Vec<BdevIo>,
    /// This core's entry of the device's counters: the IOs drained are
    /// counted as completed, so the device's in-flight count falls to 0.
    counters: Arc<CachePadded<CoreCounters>>,
    /// Holds the device open until its IO is done.
    desc: Option<BdevDesc>,
}

impl DrainingChannel {
    /// Keeps `dev`, which holds `in_flight` IOs, and `desc`, until the
    /// device has finished them or `deadline` passes (then leaks them):
    /// from a poller on the calling reactor, or at once when there is none.
    pub(super) fn start(
        dev: Box<dyn DeviceChannel>,
        in_flight: u64,
        counters: Arc<CachePadded<CoreCounters>>,
        desc: Option<BdevDesc>,
        deadline: Instant,
    ) {
        let mut me = DrainingChannel {
            dev: Some(dev),
            in_flight,
            deadline,
            done: Vec::new(),
            counters,
            desc,
        };
        if me.step() || reactor::current_core().is_none() {
            // Done, or no reactor to poll from: `Drop` waits.
            return;
        }
        let handle: Rc<RefCell<Option<PollerHandle>>> = Rc::default();
        let own = handle.clone();
        let poller = reactor::register_poller("bdev-drain", move || {
            if me.step() || Instant::now() >= me.deadline {
                // Unregistered: the poller, and `me` with it, is dropped
                // next round (`Drop` leaks what is still in flight).
                drop(own.borrow_mut().take());
                Poll::Idle
            } else {
                Poll::Busy
            }
        });
        *handle.borrow_mut() = Some(poller);
    }

    /// Polls the device once, dropping what it finished; returns whether
    /// nothing is in flight any more.
    fn step(&mut self) -> bool {
        if self.in_flight > 0
            && let Some(dev) = self.dev.as_mut()
            && dev.poll(&mut self.done) > 0
        {
            let now = tsc::now();
            self.in_flight -= self.done.len() as u64;
            for io in self.done.drain(..) {
                self.counters.completed(
                    io.op(),
                    io.len(),
                    io.status().is_ok(),
                    now.wrapping_sub(io.submit_tsc()),
                );
                // As a completed IO: its buffer goes back to its own pool.
                drop(IoDone { slot: io.slot });
            }
        }
        self.in_flight == 0
    }
}

impl Drop for DrainingChannel {
    /// Waits until the device finished every IO, or the deadline passes.
    /// What is still in flight then, or when the device's poll panics, the
    /// device may still write: the device channel (with its IOs, their
    /// buffers and whatever memory it holds) and the descriptor are leaked,
    /// never freed nor returned to a pool, and the device stays open.
    fn drop(&mut self) {
        let mut panicked = false;
        poll_until(self.deadline, || {
            std::panic::catch_unwind(AssertUnwindSafe(|| self.step())).unwrap_or_else(|_| {
                panicked = true;
                true
            })
        });
        if self.in_flight == 0 && !panicked {
            return;
        }
        let device = self
            .desc
            .as_ref()
            .map_or_else(String::new, |d| d.bdev().name().to_string());
        tracing::error!(
            device,
            "bdev channel closed with {} IOs the device did not finish within {OFFLOAD_DRAIN_TIMEOUT:?}{}; \
             leaking its device channel (its IOs and their buffers), which the device may still \
             write, and keeping the device open",
            self.in_flight,
            if panicked { " (its poll panicked)" } else { "" }
        );
        std::mem::forget(self.dev.take());
        std::mem::forget(self.desc.take());
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::bdev::io::{IoCompletion, IoSlot};
    use crate::bdev::stats::DeviceStats;
    use crate::pool::{ObjectPool, PoolConfig};

    /// A device that finishes one IO per poll once `after` polls have
    /// passed (never when `after` is `None`), and says when it is dropped.
    struct Slow {
        ios: Vec<BdevIo>,
        after: Option<usize>,
        polls: usize,
        dropped: Rc<Cell<bool>>,
    }

    impl DeviceChannel for Slow {
        fn submit(&mut self, io: BdevIo) {
            self.ios.push(io);
        }
        fn poll(&mut self, done: &mut Vec<BdevIo>) -> usize {
            self.polls += 1;
            match (self.after, self.ios.pop()) {
                (Some(after), Some(io)) if self.polls > after => {
                    done.push(io);
                    1
                }
                (_, Some(io)) => {
                    self.ios.push(io);
                    0
                }
                _ => 0,
            }
        }
    }

    impl Drop for Slow {
        fn drop(&mut self) {
            self.dropped.set(true);
        }
    }

    /// Counts its calls.
    struct Calls(Cell<usize>);

    impl IoCompletion for Calls {
        fn complete(self: Rc<Self>, _io: IoDone) {
            self.0.set(self.0.get() + 1);
        }
    }

    /// `n` IOs in a [`Slow`] device finishing after `after` polls, handed
    /// to a draining channel (off a reactor: its drop waits) with
    /// `deadline`. Returns whether the device was dropped, the handler's
    /// calls, the IO objects still out and the IOs still counted in flight.
    fn drain(n: usize, after: Option<usize>, deadline: Instant) -> (bool, usize, u64, u64) {
        let config = PoolConfig::new("drain-test", 8, 1).cache_size(0);
        // Leaked, not dropped: a drain that gives up keeps its IO objects.
        let pool = Box::leak(Box::new(
            ObjectPool::new(config, |_| IoSlot::default()).unwrap(),
        ));
        let cb = Rc::new(Calls(Cell::new(0)));
        let dropped = Rc::new(Cell::new(false));
        let mut dev = Slow {
            ios: Vec::new(),
            after,
            polls: 0,
            dropped: dropped.clone(),
        };
        let stats = DeviceStats::new();
        let counters = stats.core(None);
        for _ in 0..n {
            counters.submitted();
            dev.submit(BdevIo {
                slot: pool.get().unwrap(),
                cb: cb.clone(),
            });
        }
        DrainingChannel::start(Box::new(dev), n as u64, counters, None, deadline);
        let in_flight = stats.snapshot().in_flight;
        (dropped.get(), cb.0.get(), pool.in_use(), in_flight)
    }

    #[test]
    fn a_drain_off_a_reactor_waits_for_every_io_and_calls_no_handler() {
        let far = Instant::now() + OFFLOAD_DRAIN_TIMEOUT;
        assert_eq!(drain(3, Some(5), far), (true, 0, 0, 0));
    }

    #[test]
    fn ios_the_device_never_finishes_are_leaked_with_it_past_the_deadline() {
        // Neither the device channel nor the IO objects it holds are
        // dropped: the device may still write their buffers.
        assert_eq!(drain(2, None, Instant::now()), (false, 0, 2, 2));
    }
}
