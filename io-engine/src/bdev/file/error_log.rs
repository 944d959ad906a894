//! [`ErrorLog`]: the log lines of one file channel's failed IOs, bounded.
//!
//! Thread: the channel's reactor.

use std::time::{Duration, Instant};

use crate::bdev::{BdevIo, IoError};

/// Logs failed IOs of one channel: the first at once, then at most one
/// line a second with the count of those in between (a failing disk under
/// load fails thousands a second; each is counted in the device's stats).
pub(super) struct ErrorLog {
    device: String,
    next: Instant,
    quiet: u64,
}

impl ErrorLog {
    pub(super) fn new(device: &str) -> Self {
        ErrorLog {
            device: device.to_owned(),
            next: Instant::now(),
            quiet: 0,
        }
    }

    /// `io` failed with `e`.
    pub(super) fn failed(&mut self, io: &BdevIo, e: IoError) {
        let now = Instant::now();
        if now < self.next {
            self.quiet += 1;
            return;
        }
        let errno = match e {
            IoError::Device(n) => std::io::Error::from_raw_os_error(n).to_string(),
            other => other.to_string(),
        };
        tracing::warn!(
            device = %self.device,
            "{} of {} bytes at {} failed: {errno}{}",
            io.op(),
            io.len(),
            io.offset(),
            if self.quiet > 0 {
                format!(" ({} more failed IOs since the last line)", self.quiet)
            } else {
                String::new()
            }
        );
        self.quiet = 0;
        self.next = now + Duration::from_secs(1);
    }
}
