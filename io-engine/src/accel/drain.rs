//! Draining: waiting, bounded by a deadline, until an engine no longer
//! holds any task of whoever goes away, and the rule for what is left when
//! the deadline passes.
//!
//! Thread: whichever owns what drains (a module channel, an accel channel
//! or queue, a bdev channel: the reactor that made it); the wait polls on
//! that thread and yields the CPU between fruitless polls, so that an
//! engine running elsewhere (the I/OAT model's thread) gets it.
//!
//! The rule: a task an engine still holds at the deadline may still be
//! read and written by it (DMA does not stop because its submitter went
//! away). The memory it names is then leaked, never freed nor handed
//! back to a pool, with an error in the log saying how much and why.
//! Only the engine's own report proves a task over: the I/OAT driver
//! reports a request, success or failure, only once the device can no
//! longer write its buffers (after a confirmed reset when it gives up on
//! it).

use std::time::{Duration, Instant};

/// How long a drain waits for an engine to report every task it holds.
/// Longer than an I/OAT channel takes to give up on a stuck device
/// (`DriverConfig::timeout`, 1 s by default) and reset it, so that a drain
/// ends by the driver's own recovery whenever that recovery works.
pub const OFFLOAD_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `step` until it returns `true` (done) or `deadline` passes;
/// returns whether it was done. Yields the CPU between steps.
pub fn poll_until(deadline: Instant, mut step: impl FnMut() -> bool) -> bool {
    loop {
        if step() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::yield_now();
    }
}
