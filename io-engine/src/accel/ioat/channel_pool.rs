//! [`ChannelPool`]: the started channels of an I/OAT module that no thread
//! holds.
//!
//! Thread: shared; a reactor takes a channel in `create_channel` and its
//! [`IoatChannel`](super::IoatChannel) gives it back when dropped.

use std::sync::Mutex;

use super::driver::Channel;

/// Channels not held by a thread.
pub(super) struct ChannelPool {
    pub(super) free: Mutex<Vec<Channel>>,
}
