//! In-band authentication (DH-HMAC-CHAP) of a queue after its Connect:
//! AUTH_Send and AUTH_Receive carry the queue's one transaction; its
//! Diffie-Hellman computations are paid from the target's budget first (a
//! queue without a token waits); and the queue is established when it
//! succeeds. A failed transaction ends only the queue it ran on (and, on
//! an admin queue, the controller that queue made): a host that fails, or
//! one that only claims another host's name, can tear down nothing of
//! anyone else's.
//!
//! Establishing a queue takes what it holds from then on: its place in
//! its host's count and, for an I/O queue, its QID on the controller, its
//! export slot and its IO buffers.
//!
//! Thread: the queue pair's reactor.

use super::super::auth::{Outcome, Received, message as auth_msg};
use super::super::command::Command;
use super::super::completion::Status;
use super::{Answer, IoQueue, Phase, QueueAuth, QueuePair, Wait};
use crate::env::tsc;
use crate::export::nvmf::peer_event::PeerEvent;
use crate::export::{Buffers, Protocol};

impl QueuePair {
    /// Checks an AUTH_Send's or AUTH_Receive's protocol fields and length;
    /// the status to refuse it with, if any.
    fn auth_refusal(cmd: &Command) -> Option<Status> {
        let (spsp0, spsp1, secp) = cmd.auth_protocol();
        if secp != auth_msg::SECP_DHCHAP
            || spsp0 != auth_msg::SPSP
            || spsp1 != auth_msg::SPSP
            || cmd.auth_len() == 0
        {
            return Some(Status::INVALID_FIELD);
        }
        None
    }

    /// AUTH_Send: a DH-HMAC-CHAP message for the queue's transaction.
    pub(super) fn auth_send(&mut self, cmd: &Command, data: &[u8]) -> Answer {
        let cid = cmd.cid();
        if let Some(s) = Self::auth_refusal(cmd) {
            return Answer::status(cid, s);
        }
        if data.len() != cmd.auth_len() as usize {
            return Answer::status(cid, Status::SGL_LENGTH_INVALID);
        }
        let QueueAuth::Pending(t) = &mut self.auth else {
            // Nothing to authenticate, or done (no re-authentication).
            return Answer::status(cid, Status::COMMAND_SEQUENCE_ERROR);
        };
        if t.needs_dh(data) {
            let now_ns = tsc::ticks_to_ns(self.now);
            if let Err(due_ns) = self.target.dh_budget.take(now_ns) {
                let wait_ns = due_ns.saturating_sub(now_ns);
                self.wait = Wait::Dh(self.now.saturating_add(tsc::ns_to_ticks(wait_ns)));
                return Answer::Wait;
            }
        }
        t.send(data);
        self.auth_settled();
        Answer::status(cid, Status::SUCCESS)
    }

    /// AUTH_Receive: the DH-HMAC-CHAP message the host is due. One that
    /// does not fit the allocation length (or the SGL) fails the
    /// transaction: the host is never given part of a message.
    pub(super) fn auth_receive(&mut self, cmd: &Command) -> Answer {
        let cid = cmd.cid();
        if let Some(s) = Self::auth_refusal(cmd) {
            return Answer::status(cid, s);
        }
        let al = cmd.auth_len() as usize;
        if (cmd.sgl().1 as usize) < al {
            return Answer::status(cid, Status::SGL_LENGTH_INVALID);
        }
        let QueueAuth::Pending(t) = &mut self.auth else {
            return Answer::status(cid, Status::COMMAND_SEQUENCE_ERROR);
        };
        let answer = match t.receive(al) {
            Received::Message(msg) => {
                Answer::Now(super::Completion::new(cid, Status::SUCCESS), Some(msg))
            }
            Received::TooShort { needed } => {
                tracing::debug!(peer = %self.peer, al, needed, "NVMe/TCP AUTH_Receive too short for its message");
                Answer::status(cid, Status::INVALID_FIELD)
            }
        };
        self.auth_settled();
        answer
    }

    /// Once the queue's transaction is over: authenticated, the queue is
    /// established and runs commands; failed, the queue (and the
    /// controller an admin queue made) ends once its answer is sent,
    /// executing nothing more.
    fn auth_settled(&mut self) {
        let QueueAuth::Pending(t) = &self.auth else {
            return;
        };
        let (hash, group) = t.negotiated();
        let outcome = t.outcome();
        let (cntlid, hostnqn) = match &self.phase {
            Phase::Admin(a) => (a.ctrl.cntlid, a.ctrl.hostnqn.clone()),
            Phase::IoPending(p) => (p.ctrl.cntlid, p.ctrl.hostnqn.clone()),
            _ => (0, String::new()),
        };
        match outcome {
            Outcome::Pending => {}
            Outcome::Authenticated => {
                self.auth = QueueAuth::Done;
                // Not rate-limited: only a host holding its secret gets here.
                tracing::info!(peer = %self.peer, cntlid, qid = self.qid, hostnqn, hash, dhgroup = group, "NVMe/TCP host authenticated (DH-HMAC-CHAP)");
                if let Err(status) = self.establish() {
                    if let Some(n) = self.target.logs.note(PeerEvent::NotEstablished) {
                        tracing::warn!(peer = %self.peer, cntlid, qid = self.qid, hostnqn, status = format_args!("{:#x}", status.0), unlogged = n, "NVMe/TCP queue closed after it authenticated: no room for it");
                    }
                    self.terminate_after_answer();
                }
            }
            Outcome::Failed(why) => {
                if let Some(n) = self.target.logs.note(PeerEvent::AuthFailed) {
                    tracing::warn!(peer = %self.peer, cntlid, qid = self.qid, hostnqn, reason = why, unlogged = n, "NVMe/TCP authentication failed (DH-HMAC-CHAP): queue closed");
                }
                self.terminate_after_answer();
                // An admin queue's controller is its own (its Connect made
                // it): it goes. An I/O queue's is another queue's: it
                // stays.
                if let Phase::Admin(a) = &self.phase {
                    self.target.controllers.remove(&a.ctrl);
                }
            }
        }
    }

    /// Establishes the queue: its host's place, and an I/O queue's QID,
    /// export slot and buffers. On failure nothing is held and the status
    /// says why (a Connect answers with it).
    pub(super) fn establish(&mut self) -> Result<(), Status> {
        let hostnqn = match &self.phase {
            Phase::Admin(a) => a.ctrl.hostnqn.clone(),
            Phase::IoPending(p) => p.ctrl.hostnqn.clone(),
            _ => return Err(Status::COMMAND_SEQUENCE_ERROR),
        };
        let host_slot = self
            .target
            .host_queues
            .admit(&hostnqn)
            .ok_or(Status::CONNECT_CONTROLLER_BUSY)?;
        if let Phase::IoPending(p) = &self.phase {
            let ctrl = p.ctrl.clone();
            if !ctrl.claim_queue(self.qid) {
                return Err(Status::CONNECT_INVALID_PARAMETERS);
            }
            let held = (|| {
                let attachment = self
                    .target
                    .exports
                    .attach(Protocol::Nvmf, &p.export)
                    .ok_or(Status::CONNECT_CONTROLLER_BUSY)?;
                let bufs = Buffers::new();
                let read_only = self
                    .target
                    .exports
                    .find(Protocol::Nvmf, &p.export)
                    .is_some_and(|s| s.read_only);
                Ok((attachment, bufs, read_only))
            })();
            let (attachment, bufs, read_only) = match held {
                Ok(h) => h,
                Err(s) => {
                    ctrl.release_queue(self.qid);
                    return Err(s);
                }
            };
            let bdev = attachment.desc.bdev().clone();
            self.slots = (0..self.qsize).map(|_| None).collect();
            self.free = (0..self.qsize).rev().collect();
            self.phase = Phase::Io(Box::new(IoQueue {
                ctrl,
                bufs,
                attachment,
                block_size: bdev.block_size() as u64,
                blocks: bdev.num_blocks(),
                read_only,
            }));
        }
        self.host_slot = Some(host_slot);
        self.established = true;
        // Established: it leaves the listener's connections in their
        // handshake.
        self.connecting = None;
        Ok(())
    }
}
