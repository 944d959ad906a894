//! [`Interest`]: what a registered fd is watched for.
//!
//! Thread: any (plain data); used on the reactor that registers the fd.

use rustix::event::epoll::EventFlags;

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

    /// The epoll flags that watch for this.
    pub(super) fn flags(self) -> EventFlags {
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
