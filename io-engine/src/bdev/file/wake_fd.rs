//! [`WakeFd`]: an eventfd that wakes a sleeping reactor: the kernel
//! signals it when IO completes (an io_uring's registered eventfd, an AIO
//! iocb's `resfd`), the blocking threads when a job finishes. Made only on
//! a reactor that may sleep (adaptive mode); a busy reactor polls.
//!
//! Thread: the reactor that made it; the fd itself is shared (`Arc`) with
//! the blocking threads, which write it.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;

use crate::reactor::{self, FdHandler, FdRegistration, Interest, Readiness};

/// An eventfd registered with the calling reactor.
pub(super) struct WakeFd {
    fd: Arc<OwnedFd>,
    _registration: FdRegistration,
    _reader: Rc<Reader>,
}

impl WakeFd {
    /// An eventfd watched by the calling reactor, if it may sleep; `None`
    /// in busy mode, or if it cannot be had (the reactor then stays awake
    /// for the IO: see the channels' `wakes_reactor`).
    pub(super) fn new() -> Option<WakeFd> {
        if !reactor::may_sleep() {
            return None;
        }
        let fd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .map_err(|e| tracing::warn!("no eventfd to wake the reactor, IO is polled: {e}"))
        .ok()?;
        let fd = Arc::new(fd);
        let reader = Rc::new(Reader(fd.clone()));
        let handler: Rc<dyn FdHandler> = reader.clone();
        let source: Rc<dyn AsFd> = Rc::new(Shared(fd.clone()));
        let registration = reactor::register_fd(source, Interest::READ, Rc::downgrade(&handler))
            .map_err(|e| tracing::warn!("eventfd not watched, IO is polled: {e}"))
            .ok()?;
        Some(WakeFd {
            fd,
            _registration: registration,
            _reader: reader,
        })
    }

    /// The fd, for the kernel and the blocking threads to signal.
    pub(super) fn fd(&self) -> &Arc<OwnedFd> {
        &self.fd
    }
}

/// Reads a signalled eventfd back to 0 so it can signal again; the
/// pollers, which run every round, then find the work.
struct Reader(Arc<OwnedFd>);

impl FdHandler for Reader {
    fn on_ready(&self, _ready: Readiness) {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(self.0.as_fd(), &mut buf);
    }
}

/// The shared eventfd, as the reactor's fd set holds its sources.
struct Shared(Arc<OwnedFd>);

impl AsFd for Shared {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}
