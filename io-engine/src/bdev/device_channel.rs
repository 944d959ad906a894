//! [`DeviceChannel`]: a device's own side of a per-core channel, behind the
//! validation and bookkeeping of [`IoChannel`](super::IoChannel).
//!
//! Thread: the reactor that created it.

use super::io::BdevIo;

/// A device's per-core channel: receives validated IOs and reports them
/// complete.
///
/// Thread: the reactor that created it.
pub trait DeviceChannel {
    /// Starts an IO. Must not complete it inline: completions are reported
    /// by [`DeviceChannel::poll`], so a callback never runs inside a submit.
    fn submit(&mut self, io: BdevIo);
    /// Moves finished IOs (status set) into `done`; returns how many.
    fn poll(&mut self, done: &mut Vec<BdevIo>) -> usize;
    /// Whether the device wakes a sleeping reactor itself when its IO
    /// completes (a kernel ring's eventfd registered with the reactor), so
    /// IO in flight need not keep the reactor polling. False: an engine
    /// that signals nothing (an offload engine's completion records) keeps
    /// the reactor busy while it holds IO.
    fn wakes_reactor(&self) -> bool {
        false
    }
}
