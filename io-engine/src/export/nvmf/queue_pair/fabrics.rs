//! Fabrics commands (NVMe over Fabrics 1.1, section 3): Connect (an admin
//! queue makes a controller, an I/O queue joins one), Property Get and
//! Set, Disconnect; AUTH_Send and AUTH_Receive go on to `auth`.
//!
//! A Connect is checked whole before anything is granted, and grants
//! nothing a host must prove itself for: an admin queue's controller is
//! made (its host then authenticates before any other command runs), but
//! its place in the host's count, and an I/O queue's QID, export slot and
//! buffers, are taken only once the queue is established (at once without
//! authentication, else when it succeeds: `establish`).
//!
//! Thread: the queue pair's reactor.

use super::super::command::Command;
use super::super::command::fctype;
use super::super::completion::{Completion, Status};
use super::super::identify::NamespaceFacts;
use super::super::nqn;
use super::io_queue::COPY_LIMITS;
use super::{AdminQueue, Answer, PendingIo, Phase, QueueAuth, QueuePair};
use crate::env::tsc;
use crate::export::Protocol;
use crate::export::nvmf::auth::Transaction;
use crate::export::nvmf::controller::Controller;
use crate::export::nvmf::peer_event::PeerEvent;

/// Property offsets.
const PROP_CAP: u32 = 0x00;
const PROP_VS: u32 = 0x08;
const PROP_CC: u32 = 0x14;
const PROP_CSTS: u32 = 0x1C;
/// Connect's CATTR bit: the host disables SQ flow control.
const CATTR_SQ_FLOW_OFF: u8 = 0x04;
/// Connect's result: authentication (DH-HMAC-CHAP) is required (ATR).
const AUTHREQ_ATR: u32 = 1 << 17;
/// Bytes of a Connect's data.
const CONNECT_DATA: usize = 1024;

/// CAP: MQES, CQR, TO (15 s), CSS NVM, MPSMIN 4 KiB, MPSMAX 4 KiB.
const fn cap(queue_entries: u16) -> u64 {
    (queue_entries as u64 - 1) | 1 << 16 | 30 << 24 | 1 << 37
}

/// Connect Invalid Parameters naming the field at `offset` of the data
/// (`attr_data`) or of the command.
fn invalid(cid: u16, attr_data: bool, offset: u16) -> Answer {
    let mut c = Completion::new(cid, Status::CONNECT_INVALID_PARAMETERS);
    c.dw0 = attr_data as u32 | (offset as u32) << 16;
    Answer::Now(c, None)
}

impl QueuePair {
    /// A fabrics command (`data`: its in-capsule data).
    pub(super) fn fabrics(&mut self, cmd: &Command, data: &[u8]) -> Answer {
        let cid = cmd.cid();
        let ctrl = match &self.phase {
            Phase::Admin(a) => Some(a.ctrl.clone()),
            Phase::IoPending(p) => Some(p.ctrl.clone()),
            Phase::Io(q) => Some(q.ctrl.clone()),
            Phase::Init | Phase::Connecting => None,
        };
        match (cmd.fctype(), ctrl) {
            (fctype::CONNECT, None) => self.connect(cmd, data),
            (fctype::CONNECT, Some(_)) => Answer::status(cid, Status::COMMAND_SEQUENCE_ERROR),
            (fctype::PROPERTY_GET, Some(ctrl)) if self.qid == 0 => {
                let v = match cmd.property_offset() {
                    PROP_CAP => Some(cap(self.target.limits.queue_entries)),
                    PROP_VS => Some(0x0002_0000),
                    PROP_CC => Some(ctrl.cc() as u64),
                    PROP_CSTS => Some(ctrl.csts() as u64),
                    _ => None,
                };
                match v {
                    Some(v) => {
                        let mut c = Completion::new(cid, Status::SUCCESS);
                        c.dw0 = v as u32;
                        c.dw1 = (v >> 32) as u32;
                        Answer::Now(c, None)
                    }
                    None => Answer::status(cid, Status::INVALID_FIELD),
                }
            }
            (fctype::PROPERTY_SET, Some(ctrl)) if self.qid == 0 => {
                if cmd.property_offset() != PROP_CC {
                    return Answer::status(cid, Status::INVALID_FIELD);
                }
                let cc = cmd.property_value() as u32;
                ctrl.set_cc(cc);
                tracing::debug!(peer = %self.peer, cntlid = ctrl.cntlid, cc = format_args!("{cc:#x}"), "NVMe/TCP CC set");
                Answer::status(cid, Status::SUCCESS)
            }
            (fctype::AUTH_SEND, Some(_)) => self.auth_send(cmd, data),
            (fctype::AUTH_RECEIVE, Some(_)) => self.auth_receive(cmd),
            (fctype::DISCONNECT, Some(_)) => {
                self.terminate_after_answer();
                Answer::status(cid, Status::SUCCESS)
            }
            (_, None) => Answer::status(cid, Status::COMMAND_SEQUENCE_ERROR),
            _ => Answer::status(cid, Status::INVALID_OPCODE),
        }
    }

    /// Logs a Connect refused and answers it with `status`.
    fn refuse_connect(&self, cid: u16, status: Status, why: &str, hostnqn: &str) -> Answer {
        if let Some(n) = self.target.logs.note(PeerEvent::ConnectRefused) {
            tracing::warn!(peer = %self.peer, hostnqn, unlogged = n, "NVMe/TCP Connect refused: {why}");
        }
        Answer::status(cid, status)
    }

    /// Connect: the admin queue makes a controller, an I/O queue joins
    /// one.
    fn connect(&mut self, cmd: &Command, data: &[u8]) -> Answer {
        let cid = cmd.cid();
        let Some(data) = data.first_chunk::<CONNECT_DATA>() else {
            return Answer::status(cid, Status::SGL_LENGTH_INVALID);
        };
        if cmd.connect_recfmt() != 0 {
            return Answer::status(cid, Status::CONNECT_INCOMPATIBLE_FORMAT);
        }
        let qid = cmd.connect_qid();
        let sqsize = cmd.connect_sqsize();
        if sqsize == 0 || sqsize >= self.target.limits.queue_entries {
            return invalid(cid, false, 44);
        }
        let cntlid = u16::from_le_bytes([data[16], data[17]]);
        let subnqn = nqn::field(&data[256..512]);
        let hostnqn = nqn::field(&data[512..768]);
        if !self.target.host_queues.has_room(&hostnqn) {
            let limit = self.target.host_queues.limit();
            let why = format!("the host holds its {limit} queues");
            return self.refuse_connect(cid, Status::CONNECT_CONTROLLER_BUSY, &why, &hostnqn);
        }
        // The queue's ID and size, as the Connect asks (taken back if it
        // is refused). The Connect itself is entry 0: the head moves past
        // it as it is answered.
        self.qid = qid;
        self.qsize = sqsize + 1;
        self.sqhd = 0;
        self.sqhd_off = cmd.connect_cattr() & CATTR_SQ_FLOW_OFF != 0;
        let answer = if qid == 0 {
            self.connect_admin(cmd, cntlid, subnqn, hostnqn)
        } else {
            self.connect_io(cmd, qid, cntlid, &subnqn, &hostnqn)
        };
        if !matches!(&answer, Answer::Now(c, _) if c.status == Status::SUCCESS.0) {
            self.qid = 0;
            self.qsize = 0;
            self.sqhd_off = false;
        }
        answer
    }

    /// An admin queue's Connect: a controller of `subnqn` for `hostnqn`.
    fn connect_admin(
        &mut self,
        cmd: &Command,
        cntlid: u16,
        subnqn: String,
        hostnqn: String,
    ) -> Answer {
        let cid = cmd.cid();
        if cntlid != 0xFFFF {
            return invalid(cid, true, 16);
        }
        let (export, ns, serial, watch, dhchap) = if subnqn == nqn::DISCOVERY_NQN {
            (None, None, String::from("discovery"), None, None)
        } else {
            let Some(sub) = self.target.subsystems.find(&subnqn) else {
                return invalid(cid, true, 256);
            };
            let Some(watch) = self.target.exports.watch(Protocol::Nvmf, &sub.export) else {
                return invalid(cid, true, 256); // unshared meanwhile
            };
            let Some(share) = self.target.exports.find(Protocol::Nvmf, &sub.export) else {
                return invalid(cid, true, 256); // unshared meanwhile
            };
            if !sub.allowed_hosts.is_empty() && !sub.allowed_hosts.contains(&hostnqn) {
                let mut c = Completion::new(cid, Status::CONNECT_INVALID_HOST);
                c.dw0 = 1 | 512 << 16; // the data's HOSTNQN field
                self.refuse_connect(
                    cid,
                    Status::CONNECT_INVALID_HOST,
                    "the host is not allowed",
                    &hostnqn,
                );
                return Answer::Now(c, None);
            }
            let bdev = share.desc.bdev();
            let ns = NamespaceFacts {
                blocks: bdev.num_blocks(),
                block_size: bdev.block_size(),
                uuid: *bdev.uuid().as_bytes(),
                copy: COPY_LIMITS,
                volatile_cache: bdev.volatile_write_cache(),
                write_protected: share.read_only,
            };
            let mut serial = bdev.uuid().simple().to_string();
            serial.truncate(20);
            let dhchap = sub.dhchap.get(&hostnqn);
            (Some(share.name), Some(ns), serial, Some(watch), dhchap)
        };
        let ctrl = self
            .target
            .controllers
            .create(subnqn, hostnqn, export, dhchap);
        if let Some(n) = self.target.logs.note(PeerEvent::ControllerConnected) {
            tracing::info!(peer = %self.peer, cntlid = ctrl.cntlid, subnqn = ctrl.subnqn, hostnqn = ctrl.hostnqn, authentication = ctrl.dhchap.is_some(), unlogged = n, "NVMe/TCP controller connected");
        }
        let kato = cmd.connect_kato() as u64;
        let atr = self.require_auth(&ctrl);
        let mut c = Completion::new(cid, Status::SUCCESS);
        c.dw0 = ctrl.cntlid as u32 | atr;
        self.phase = Phase::Admin(Box::new(AdminQueue {
            ctrl,
            kato: tsc::ns_to_ticks(kato.saturating_mul(1_000_000)),
            last: self.now,
            aers: Vec::new(),
            ns_changed: false,
            watch,
            ns,
            serial,
        }));
        if atr == 0
            && let Err(status) = self.establish()
        {
            // The host's place went meanwhile: the controller goes.
            if let Phase::Admin(a) = std::mem::replace(&mut self.phase, Phase::Connecting) {
                self.target.controllers.remove(&a.ctrl);
            }
            return Answer::status(cid, status);
        }
        Answer::Now(c, None)
    }

    /// An I/O queue's Connect: queue `qid` of controller `cntlid`.
    fn connect_io(
        &mut self,
        cmd: &Command,
        qid: u16,
        cntlid: u16,
        subnqn: &str,
        hostnqn: &str,
    ) -> Answer {
        let cid = cmd.cid();
        let Some(ctrl) = self.target.controllers.get(cntlid) else {
            return invalid(cid, true, 16);
        };
        if ctrl.subnqn != subnqn {
            return invalid(cid, true, 256);
        }
        if ctrl.hostnqn != hostnqn {
            return invalid(cid, true, 512);
        }
        let Some(export) = ctrl.export.clone().filter(|_| ctrl.enabled()) else {
            return Answer::status(cid, Status::COMMAND_SEQUENCE_ERROR);
        };
        if u32::from(qid) > ctrl.io_queues.load(std::sync::atomic::Ordering::Acquire) {
            return invalid(cid, false, 42);
        }
        if ctrl.has_queue(qid) {
            let why = format!("I/O queue {qid} of controller {cntlid} is connected already");
            self.refuse_connect(cid, Status::CONNECT_INVALID_PARAMETERS, &why, hostnqn);
            return invalid(cid, false, 42);
        }
        if let Some(why) = self.target.exports.refusal(Protocol::Nvmf, &export) {
            return self.refuse_connect(cid, Status::CONNECT_CONTROLLER_BUSY, &why, hostnqn);
        }
        tracing::debug!(peer = %self.peer, cntlid, qid, "NVMe/TCP I/O queue connected");
        let atr = self.require_auth(&ctrl);
        self.phase = Phase::IoPending(Box::new(PendingIo { ctrl, export }));
        if atr == 0
            && let Err(status) = self.establish()
        {
            self.phase = Phase::Connecting;
            return Answer::status(cid, status);
        }
        let mut c = Completion::new(cid, Status::SUCCESS);
        c.dw0 = atr;
        Answer::Now(c, None)
    }

    /// After a successful Connect to `ctrl`: when its host has secrets,
    /// the queue must authenticate before anything else runs. Returns the
    /// Connect result's AUTHREQ bits.
    fn require_auth(&mut self, ctrl: &Controller) -> u32 {
        match &ctrl.dhchap {
            Some(keys) => {
                let t = Transaction::new(keys.clone(), &ctrl.hostnqn, &ctrl.subnqn);
                self.auth = QueueAuth::Pending(Box::new(t));
                AUTHREQ_ATR
            }
            None => 0,
        }
    }
}
