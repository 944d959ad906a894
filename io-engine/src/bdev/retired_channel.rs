//! [`RetiredChannel`]: what a closed, drained channel holds in place of its
//! device channel, so that the device channel (and what it holds: a
//! backing's open file, a kernel ring) goes when the channel retires, not
//! a reactor round later with its poller.
//!
//! Thread: the channel's reactor.

use super::device_channel::DeviceChannel;
use super::io::BdevIo;

/// A device channel that never has IO: nothing is submitted to a closed
/// channel.
pub(super) struct RetiredChannel;

impl DeviceChannel for RetiredChannel {
    fn submit(&mut self, io: BdevIo) {
        // Unreachable through the channel (closed channels take no IO);
        // dropping it returns the IO object to its pool.
        drop(io);
    }

    fn poll(&mut self, _done: &mut Vec<BdevIo>) -> usize {
        0
    }
}
