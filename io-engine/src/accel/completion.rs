//! A finished task's outcome, as a module reports it and its submitter
//! reaps it.
//!
//! Thread: any; a plain value, made and read on the channel's thread.

use super::Status;

/// How a finished task ended, as its [`Queue`](super::Queue) record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The outcome.
    pub status: Status,
    /// The CRC-32C, for crc32c and copy_crc32c tasks that succeeded.
    pub crc: u32,
}

impl Completion {
    /// A successful completion with no value.
    pub const SUCCESS: Completion = Completion {
        status: Status::Success,
        crc: 0,
    };

    /// A completion with `status` and no value.
    pub const fn with(status: Status) -> Completion {
        Completion { status, crc: 0 }
    }
}
