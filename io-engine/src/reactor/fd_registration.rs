//! [`FdRegistration`]: an fd registered on its reactor's epoll set.
//!
//! Thread: the reactor that registered the fd; `!Send`, so it never leaves
//! that reactor.

use std::os::fd::AsFd;
use std::rc::{Rc, Weak};

use super::fd_handler::FdHandler;
use super::fds::Fds;
use super::interest::Interest;

/// Keeps an fd registered on its reactor; dropping it unregisters the fd.
pub struct FdRegistration {
    fds: Rc<Fds>,
    token: usize,
    source: Rc<dyn AsFd>,
}

impl FdRegistration {
    /// Registers `source` on `fds` (see [`register_fd`](super::register_fd)).
    pub(super) fn new(
        fds: Rc<Fds>,
        source: Rc<dyn AsFd>,
        interest: Interest,
        handler: Weak<dyn FdHandler>,
    ) -> std::io::Result<FdRegistration> {
        let token = fds.add(&*source, interest, handler)?;
        Ok(FdRegistration { fds, token, source })
    }

    /// Changes what the fd is watched for.
    pub fn set_interest(&self, interest: Interest) -> std::io::Result<()> {
        self.fds.modify(&*self.source, self.token, interest)
    }
}

impl Drop for FdRegistration {
    fn drop(&mut self) {
        self.fds.remove(&*self.source, self.token);
    }
}
