//! File-descriptor readiness on a reactor: one epoll set per reactor, asked
//! without blocking once per round while any fd is registered, and slept on
//! (with the reactor's wake-up eventfd) in adaptive mode, so a reactor wakes
//! on a message, on I/O readiness or at the end of its sleep interval.
//!
//! Thread: a reactor thread only; the set is `!Send`, owned by the
//! reactor's local state and by the [`FdRegistration`]s made on it.
//!
//! [`FdRegistration`]: super::FdRegistration

use std::cell::{Cell, RefCell};
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Weak;
use std::time::Duration;

use rustix::event::Timespec;
use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};

use super::fd_handler::FdHandler;
use super::interest::Interest;
use super::readiness::Readiness;

const WAKE_TOKEN: u64 = u64::MAX;
const EVENTS_PER_WAIT: usize = 64;

/// A reactor's epoll set and its registered handlers.
pub(super) struct Fds {
    epoll: OwnedFd,
    handlers: RefCell<Vec<Option<Weak<dyn FdHandler>>>>,
    free: RefCell<Vec<usize>>,
    live: Cell<usize>,
    events: RefCell<Vec<Event>>,
}

impl Fds {
    /// An epoll set watching the reactor's wake-up eventfd.
    pub(super) fn new(wake: &OwnedFd) -> std::io::Result<Fds> {
        let ep = epoll::create(CreateFlags::CLOEXEC)?;
        epoll::add(&ep, wake, EventData::new_u64(WAKE_TOKEN), EventFlags::IN)?;
        Ok(Fds {
            epoll: ep,
            handlers: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            live: Cell::new(0),
            events: RefCell::new(Vec::with_capacity(EVENTS_PER_WAIT)),
        })
    }

    /// Waits up to `timeout` (zero: just asks) and runs the handlers of the
    /// fds that are ready. Returns whether any was; drains the wake-up fd.
    pub(super) fn poll(&self, timeout: Duration, wake: &OwnedFd) -> bool {
        let ts = Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: timeout.subsec_nanos() as i64,
        };
        // Copied out of the event buffer (on the stack: no allocation per
        // wait) so that handlers may register or drop fds while they run.
        let mut ready = [(0u64, EventFlags::empty()); EVENTS_PER_WAIT];
        let n = {
            let mut events = self.events.borrow_mut();
            events.clear();
            match epoll::wait(
                &self.epoll,
                rustix::buffer::spare_capacity(&mut *events),
                Some(&ts),
            ) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => return false,
                Err(e) => {
                    tracing::error!("epoll_wait: {e}");
                    return false;
                }
            }
            for (slot, e) in ready.iter_mut().zip(events.iter()) {
                *slot = (e.data.u64(), e.flags);
            }
            // `events` was made with exactly this capacity and never grows.
            debug_assert!(events.len() <= EVENTS_PER_WAIT);
            events.len().min(EVENTS_PER_WAIT)
        };
        let mut any = false;
        for &(token, flags) in &ready[..n] {
            if token == WAKE_TOKEN {
                let mut b = [0u8; 8];
                let _ = rustix::io::read(wake, &mut b);
                continue;
            }
            let handler = self
                .handlers
                .borrow()
                .get(token as usize)
                .and_then(|h| h.as_ref().and_then(Weak::upgrade));
            if let Some(h) = handler {
                any = true;
                let ready = Readiness {
                    readable: flags
                        .intersects(EventFlags::IN | EventFlags::RDHUP | EventFlags::HUP),
                    writable: flags.contains(EventFlags::OUT),
                    hangup: flags.intersects(EventFlags::HUP | EventFlags::ERR | EventFlags::RDHUP),
                };
                // A handler that panics is logged and told nothing more
                // (its fd stays registered until its registration drops);
                // the reactor and its other fds go on, as with pollers.
                let run = std::panic::AssertUnwindSafe(|| h.on_ready(ready));
                if let Err(panic) = std::panic::catch_unwind(run) {
                    tracing::error!(
                        "fd handler panicked and was dropped: {}",
                        super::panic::panic_message(&*panic)
                    );
                    if let Some(slot) = self.handlers.borrow_mut().get_mut(token as usize) {
                        *slot = None;
                    }
                }
            }
        }
        any
    }

    /// Whether any fd besides the wake-up fd is registered.
    pub(super) fn any(&self) -> bool {
        self.live.get() > 0
    }

    /// Watches `fd` for `interest`, telling `h`; returns the fd's token.
    pub(super) fn add(
        &self,
        fd: &dyn AsFd,
        interest: Interest,
        h: Weak<dyn FdHandler>,
    ) -> std::io::Result<usize> {
        let token = match self.free.borrow_mut().pop() {
            Some(t) => {
                self.handlers.borrow_mut()[t] = Some(h);
                t
            }
            None => {
                let mut hs = self.handlers.borrow_mut();
                hs.push(Some(h));
                hs.len() - 1
            }
        };
        if let Err(e) = epoll::add(
            &self.epoll,
            fd.as_fd(),
            EventData::new_u64(token as u64),
            interest.flags(),
        ) {
            self.release(token);
            return Err(e.into());
        }
        self.live.set(self.live.get() + 1);
        Ok(token)
    }

    /// Changes what the fd of `token` is watched for.
    pub(super) fn modify(
        &self,
        fd: &dyn AsFd,
        token: usize,
        interest: Interest,
    ) -> std::io::Result<()> {
        epoll::modify(
            &self.epoll,
            fd.as_fd(),
            EventData::new_u64(token as u64),
            interest.flags(),
        )
        .map_err(std::io::Error::from)
    }

    /// Stops watching the fd of `token`.
    pub(super) fn remove(&self, fd: &dyn AsFd, token: usize) {
        let _ = epoll::delete(&self.epoll, fd.as_fd());
        self.release(token);
        self.live.set(self.live.get() - 1);
    }

    fn release(&self, token: usize) {
        self.handlers.borrow_mut()[token] = None;
        self.free.borrow_mut().push(token);
    }
}
