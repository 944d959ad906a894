//! File-descriptor readiness on a reactor: one epoll set per reactor, asked
//! without blocking once per round while any fd is registered, and slept on
//! (with the reactor's wake-up eventfd) in adaptive mode, so a reactor wakes
//! on a message, on I/O readiness or at the end of its sleep interval.
//!
//! Thread: a reactor thread only; registrations are `!Send`.

use std::cell::{Cell, RefCell};
use std::os::fd::{AsFd, OwnedFd};
use std::rc::{Rc, Weak};
use std::time::Duration;

use rustix::event::Timespec;
use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};

/// What a registered fd is watched for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    /// Readable (or peer closed).
    pub read: bool,
    /// Writable.
    pub write: bool,
}

impl Interest {
    /// Readable only.
    pub const READ: Interest = Interest {
        read: true,
        write: false,
    };
    /// Readable and writable.
    pub const READ_WRITE: Interest = Interest {
        read: true,
        write: true,
    };

    fn flags(self) -> EventFlags {
        let mut f = EventFlags::RDHUP;
        if self.read {
            f |= EventFlags::IN;
        }
        if self.write {
            f |= EventFlags::OUT;
        }
        f
    }
}

/// What the fd is ready for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// Data (or end of file) can be read.
    pub readable: bool,
    /// Data can be written.
    pub writable: bool,
    /// The peer closed or the fd is in error.
    pub hangup: bool,
}

/// Receives readiness events on the reactor that registered the fd.
pub trait FdHandler {
    /// The fd is ready for something it was registered for.
    fn on_ready(&self, ready: Readiness);
}

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
                h.on_ready(Readiness {
                    readable: flags
                        .intersects(EventFlags::IN | EventFlags::RDHUP | EventFlags::HUP),
                    writable: flags.contains(EventFlags::OUT),
                    hangup: flags.intersects(EventFlags::HUP | EventFlags::ERR | EventFlags::RDHUP),
                });
            }
        }
        any
    }

    /// Whether any fd besides the wake-up fd is registered.
    pub(super) fn any(&self) -> bool {
        self.live.get() > 0
    }

    fn add(
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

    fn release(&self, token: usize) {
        self.handlers.borrow_mut()[token] = None;
        self.free.borrow_mut().push(token);
    }
}

/// Keeps an fd registered on its reactor; dropping it unregisters the fd.
pub struct FdRegistration {
    token: usize,
    source: Rc<dyn AsFd>,
}

impl FdRegistration {
    /// Changes what the fd is watched for.
    pub fn set_interest(&self, interest: Interest) -> std::io::Result<()> {
        super::local::with_fds(|fds| {
            epoll::modify(
                &fds.epoll,
                self.source.as_fd(),
                EventData::new_u64(self.token as u64),
                interest.flags(),
            )
            .map_err(std::io::Error::from)
        })
        .unwrap_or_else(|| {
            Err(std::io::Error::other(
                "not on the reactor that registered the fd",
            ))
        })
    }
}

impl Drop for FdRegistration {
    fn drop(&mut self) {
        super::local::with_fds(|fds| {
            let _ = epoll::delete(&fds.epoll, self.source.as_fd());
            fds.release(self.token);
            fds.live.set(fds.live.get() - 1);
        });
    }
}

/// Registers `source` on the calling reactor: `handler` is told when it is
/// ready for `interest`. The registration keeps `source` open; the handler
/// is held weakly (it usually owns the registration).
pub fn register_fd(
    source: Rc<dyn AsFd>,
    interest: Interest,
    handler: Weak<dyn FdHandler>,
) -> std::io::Result<FdRegistration> {
    let token = super::local::with_fds(|fds| fds.add(&*source, interest, handler)).unwrap_or_else(
        || {
            Err(std::io::Error::other(
                "register_fd called off a reactor thread",
            ))
        },
    )?;
    Ok(FdRegistration { token, source })
}
