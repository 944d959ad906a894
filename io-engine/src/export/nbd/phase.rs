//! The phases of an NBD connection and what each holds.
//!
//! Thread: the connection's reactor.
//!
//! `Handshake` (option phase) -> `Transmission` (requests executed) ->
//! `Refusing` (the export went away: what was taken completes, every
//! further request is answered `ESHUTDOWN`) -> `Lingering` (all answered,
//! the device released; `ESHUTDOWN` until the client leaves or
//! [`LINGER`] passes) -> `Closed`. A client's DISC, or the end of its
//! stream, closes the connection from any phase once its IO is done.

use std::sync::Arc;
use std::time::Duration;

use super::ExportInfo;
use super::handshake::Handshake;
use super::stats::ExportCounters;
use super::transmission::Request;
use crate::bdev::IoChannel;
use crate::env::tsc;
use crate::export::Attachment;
use crate::export::Buffers;
use crate::pool::IoBuf;

/// How long a connection whose export went away waits, once all it took
/// is answered, for the client to disconnect before closing itself (a
/// client that sends requests gets `ESHUTDOWN` and disconnects; an idle
/// one may not look before this). A WRITE whose payload was arriving when
/// the export went away gets as long for the rest of it to arrive.
pub const LINGER: Duration = Duration::from_millis(500);

pub(super) fn linger_ticks() -> u64 {
    tsc::ns_to_ticks(LINGER.as_nanos() as u64)
}

pub(super) enum Phase {
    Handshake(Box<Handshake>),
    Transmission(Box<Tx>),
    Refusing(Refusing),
    Lingering(Lingering),
    Closed,
}

/// An export attached: requests are executed on its device.
pub(super) struct Tx {
    /// First: the channel lets the device go before the attachment's count
    /// says it did.
    pub ch: IoChannel,
    pub attachment: Attachment,
    pub export: ExportInfo,
    pub counters: Arc<ExportCounters>,
    pub structured: bool,
    pub block_status: Option<u32>,
    /// A WRITE whose payload is arriving: header and the buffer filled so far.
    pub payload: Option<(Request, IoBuf, usize)>,
    /// Payload bytes of a refused WRITE still to skip.
    pub skip: usize,
    /// DISC received: execute no more requests; close once all is answered.
    pub disc: bool,
    /// Last: dropped after `payload`, so its buffer is back first.
    pub bufs: Buffers,
}

/// The export went away: IO taken completes (a WRITE whose payload was
/// arriving is executed if the rest comes within [`LINGER`] of `since`);
/// every further request is answered `ESHUTDOWN`.
pub(super) struct Refusing {
    pub tx: Box<Tx>,
    /// When the connection noticed (TSC).
    pub since: u64,
}

impl Refusing {
    /// Whether a WRITE taken before the export went away is still arriving
    /// and may yet, at `now`.
    pub fn awaits_payload(&self, now: u64) -> bool {
        (self.tx.payload.is_some() || self.tx.skip > 0) && now < self.grace_end()
    }

    /// When the wait for such a WRITE's payload ends (TSC).
    pub fn grace_end(&self) -> u64 {
        self.since + linger_ticks()
    }
}

/// Everything taken is answered and the device released: requests are
/// answered `ESHUTDOWN` until the client disconnects or the TSC passes
/// `until`.
pub(super) struct Lingering {
    pub counters: Arc<ExportCounters>,
    pub structured: bool,
    /// Payload bytes of a refused WRITE still to skip.
    pub skip: usize,
    pub until: u64,
}

impl Phase {
    /// Transmission notices the export going away (unless the client
    /// already sent DISC) and starts refusing.
    pub fn notice_closing(&mut self) {
        let closing =
            matches!(self, Phase::Transmission(tx) if !tx.disc && tx.attachment.closing());
        if closing && let Phase::Transmission(tx) = std::mem::replace(self, Phase::Closed) {
            *self = Phase::Refusing(Refusing {
                tx,
                since: tsc::now(),
            });
        }
    }

    /// Refusing ends: the channel and the attachment go (the device is
    /// free), the rest of a WRITE whose payload stopped coming is skipped.
    pub fn linger(&mut self) {
        if let Phase::Refusing(r) = std::mem::replace(self, Phase::Closed) {
            let tx = r.tx;
            let unread = tx
                .payload
                .as_ref()
                .map_or(0, |(req, _, filled)| req.length as usize - filled);
            *self = Phase::Lingering(Lingering {
                counters: tx.counters.clone(),
                structured: tx.structured,
                skip: tx.skip + unread,
                until: tsc::now() + linger_ticks(),
            });
        }
    }

    /// The client sent DISC while refusing: no linger, close once all is
    /// answered.
    pub fn disconnect(&mut self) {
        if let Phase::Refusing(r) = std::mem::replace(self, Phase::Closed) {
            let mut tx = r.tx;
            tx.disc = true;
            *self = Phase::Transmission(tx);
        }
    }

    /// Whether replies to READs use structured replies.
    pub fn structured(&self) -> bool {
        match self {
            Phase::Transmission(tx) => tx.structured,
            Phase::Refusing(r) => r.tx.structured,
            Phase::Lingering(l) => l.structured,
            Phase::Handshake(_) | Phase::Closed => false,
        }
    }
}
