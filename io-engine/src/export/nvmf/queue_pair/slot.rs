//! A command an I/O queue took and has not answered: its IO buffers, how
//! much of its data arrived, and the device IOs in flight for it.
//!
//! Thread: the queue's reactor.

use crate::export::nvmf::completion::Status;
use crate::pool::IoBuf;

/// Where a command stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// A Write's or Compare's data is arriving: in its capsule, or (`r2t`)
    /// in H2CData PDUs after the target's R2T. Only then is data taken.
    AwaitingData {
        /// An R2T asked for it (H2CData may come).
        r2t: bool,
    },
    /// On the device: no data is taken any more.
    Executing,
}

/// A command taken.
pub(crate) struct Slot {
    pub cid: u16,
    pub op: u8,
    pub state: SlotState,
    /// A Write's data (until it goes to the device), a Compare's host data.
    pub buf: Option<IoBuf>,
    /// A Compare's second buffer, for the device's data.
    pub spare: Option<IoBuf>,
    /// Bytes of data the command moves.
    pub len: usize,
    /// Bytes of a Write's or Compare's data received.
    pub got: usize,
    /// Byte offset on the device.
    pub offset: u64,
    /// Device IOs in flight for it (DSM, Copy: one per range).
    pub pending: u32,
    /// Digests of its data being computed off the core
    /// ([`DigestJobs`](super::digest_jobs::DigestJobs)): its data is not
    /// all checked (or its read data not sent) until they are done.
    pub digesting: u32,
    /// A Write with Force Unit Access (CDW12 bit 30): durable when it
    /// completes.
    pub fua: bool,
    pub status: Status,
}

impl Slot {
    /// A command with no data coming (it goes to the device at once).
    pub fn executing(cid: u16, op: u8, len: usize, offset: u64) -> Slot {
        Slot {
            cid,
            op,
            state: SlotState::Executing,
            buf: None,
            spare: None,
            len,
            got: 0,
            offset,
            pending: 0,
            digesting: 0,
            fua: false,
            status: Status::SUCCESS,
        }
    }
}
