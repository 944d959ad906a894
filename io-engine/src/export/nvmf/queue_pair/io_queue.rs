//! An established I/O queue: its controller, its export slot and the IO
//! buffers its commands take, and the device's geometry.
//!
//! Thread: the queue's reactor (`!Send`: the buffers' pools are its).

use std::sync::Arc;

use crate::export::nvmf::controller::Controller;
use crate::export::nvmf::identify::CopyLimits;
use crate::export::{Attachment, Buffers};

/// The Copy command's limits: 256 blocks per source range, 128 ranges
/// (their list, 4 KiB, fits the capsule), 4096 blocks per command.
pub const COPY_LIMITS: CopyLimits = CopyLimits {
    range_blocks: 256,
    command_blocks: 4096,
    ranges: 128,
};

/// An established I/O queue.
pub(crate) struct IoQueue {
    pub ctrl: Arc<Controller>,
    pub bufs: Buffers,
    /// Its place in the share's connection count, and the device. The
    /// transport's channel to the device goes before it.
    pub attachment: Attachment,
    pub block_size: u64,
    pub blocks: u64,
    pub read_only: bool,
}
