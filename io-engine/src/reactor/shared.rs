//! [`Shared`]: the part of a reactor that other threads reach: its message
//! queue, its wake-up eventfd, its flags and its counters.
//!
//! Thread: any; [`Shared::post`] is how every other thread talks to the
//! reactor.

use std::os::fd::OwnedFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering, fence};

use crossbeam_queue::SegQueue;

use super::message::Message;
use super::poll_mode::PollMode;
use super::stats::Counters;

/// What a reactor shares with other threads.
pub(super) struct Shared {
    pub(super) index: usize,
    pub(super) cpu: u32,
    pub(super) mode: PollMode,
    pub(super) queue: SegQueue<Message>,
    pub(super) sleeping: AtomicBool,
    pub(super) stop: AtomicBool,
    /// Written to wake the reactor from a sleep (it sleeps in epoll_wait).
    pub(super) wake: OwnedFd,
    /// The core slot the reactor holds (set before it reports ready).
    pub(super) slot: OnceLock<u32>,
    pub(super) counters: Counters,
}

impl Shared {
    /// The shared state of reactor `index`, pinned to `cpu`, woken through
    /// `wake`.
    pub(super) fn new(index: usize, cpu: u32, mode: PollMode, wake: OwnedFd) -> Shared {
        Shared {
            index,
            cpu,
            mode,
            queue: SegQueue::new(),
            sleeping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            wake,
            slot: OnceLock::new(),
            counters: Counters::default(),
        }
    }

    /// Queues `msg` for the reactor and wakes it if it sleeps.
    pub(super) fn post(&self, msg: Message) {
        self.queue.push(msg);
        // Pairs with the fence in `local::sleep`: either the reactor sees
        // the message before sleeping, or we see it asleep and wake it.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            // A full counter (never, in practice) is as good as a wake-up.
            let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
        }
    }
}
