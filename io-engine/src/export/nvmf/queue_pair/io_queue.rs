//! An established I/O queue: its controller, its export slot and the IO
//! buffers its commands take, and the device's geometry.
//!
//! Thread: the queue's reactor (`!Send`: the buffers' pools are its).

use std::sync::Arc;

use crate::export::nvmf::Controller;
use crate::export::{Attachment, Buffers};

/// An established I/O queue.
pub(in crate::export::nvmf) struct IoQueue {
    pub ctrl: Arc<Controller>,
    pub bufs: Buffers,
    /// Its place in the share's connection count, and the device. The
    /// transport's channel to the device goes before it.
    pub attachment: Attachment,
    pub block_size: u64,
    pub blocks: u64,
    pub read_only: bool,
}
