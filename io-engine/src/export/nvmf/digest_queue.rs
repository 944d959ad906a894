//! A connection's data digests computed off the core: the queue pair's
//! digest jobs submitted as crc32c tasks on its reactor's accel channel
//! (one batch, one doorbell, per round of jobs) and their results handed
//! back. A task the engine refuses or fails is computed inline by the
//! queue pair instead, so a digest is never lost.
//!
//! Thread: the connection's reactor.

use std::rc::Rc;
use std::time::Instant;

use super::queue_pair::QueuePair;
use crate::accel::{AccelChannel, Batch, IoVec, OFFLOAD_DRAIN_TIMEOUT, Queue, Reaped, Status};

/// The accel queue of a connection's digests, opened on its first.
pub struct DigestQueue {
    ch: Rc<AccelChannel>,
    q: Option<Queue>,
    reaped: Vec<Reaped>,
}

impl DigestQueue {
    /// Digests on `ch`, the connection's reactor's channel.
    pub fn new(ch: Rc<AccelChannel>) -> DigestQueue {
        DigestQueue {
            ch,
            q: None,
            reaped: Vec::new(),
        }
    }

    /// Submits every digest the core hands out, in one batch.
    pub fn submit(&mut self, core: &mut QueuePair) {
        let Some((id, data, seed)) = core.next_digest() else {
            return;
        };
        let mut next = Some((id, IoVec::new(data.as_ptr(), data.len()), seed));
        let ch = &self.ch;
        let q = self.q.get_or_insert_with(|| ch.queue());
        let mut batch: Batch<'_> = q.batch();
        while let Some((id, v, seed)) = next.take() {
            // SAFETY: `v` names bytes of an IO buffer the queue pair holds
            // in the job's command slot; it keeps them there, unmoved and
            // unwritten, and does not close, until `digest_done(id)`, which
            // is called only once this task's record is reaped (`reap`) or
            // its submission refused (below). The task only reads them.
            if unsafe { batch.crc32c(&[v], seed, u64::from(id)) }.is_err() {
                core.digest_done(id, None);
            }
            next = core
                .next_digest()
                .map(|(id, d, seed)| (id, IoVec::new(d.as_ptr(), d.len()), seed));
        }
        batch.submit();
    }

    /// Waits (up to [`OFFLOAD_DRAIN_TIMEOUT`]) until the engine holds none
    /// of this queue's tasks; returns how many it still holds then.
    pub fn drain(&self) -> usize {
        self.q
            .as_ref()
            .map_or(0, |q| q.drain(Instant::now() + OFFLOAD_DRAIN_TIMEOUT))
    }

    /// Hands the core the digests the engine computed (a failed one as
    /// `None`, computed inline); returns how many.
    pub fn reap(&mut self, core: &mut QueuePair) -> usize {
        let Some(q) = self.q.as_ref().filter(|q| q.in_flight() > 0) else {
            return 0;
        };
        let n = q.reap(&mut self.reaped);
        for &(tag, c) in &self.reaped {
            let crc = (c.status == Status::Success).then_some(c.crc);
            core.digest_done(tag as u32, crc);
        }
        self.reaped.clear();
        n
    }
}
