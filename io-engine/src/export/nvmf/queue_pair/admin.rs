//! The admin commands an admin queue answers (NVMe Base 2.0, section 5):
//! Identify, Get Log Page, Get and Set Features, Asynchronous Event
//! Request, Keep Alive, Abort. Their answers are small (at most a log page)
//! and built here; the output bound keeps a host that does not read them
//! from piling them up.
//!
//! Thread: the admin queue's reactor (the controller's state lives there).

use std::sync::atomic::Ordering;

use super::super::command::Command;
use super::super::command::admin;
use super::super::completion::{Completion, Status};
use super::super::identify::{self, ControllerFacts};
use super::admin_queue::MAX_AERS;
use super::{Answer, Phase, QueuePair};
use crate::bdev::IoType;
use crate::env::tsc;
use crate::export::Protocol;

/// Feature identifiers.
const FEAT_ARBITRATION: u8 = 0x01;
const FEAT_POWER: u8 = 0x02;
const FEAT_TEMPERATURE: u8 = 0x04;
const FEAT_ERROR_RECOVERY: u8 = 0x05;
const FEAT_VWC: u8 = 0x06;
const FEAT_NUM_QUEUES: u8 = 0x07;
const FEAT_ASYNC_EVENT: u8 = 0x0B;
const FEAT_KATO: u8 = 0x0F;

impl QueuePair {
    /// An admin command on an admin queue.
    pub(super) fn admin_command(&mut self, cmd: &Command) -> Answer {
        let cid = cmd.cid();
        let target = self.target.clone();
        let Phase::Admin(a) = &mut self.phase else {
            return Answer::status(cid, Status::COMMAND_SEQUENCE_ERROR);
        };
        let ok = |data: Vec<u8>| Answer::Now(Completion::new(cid, Status::SUCCESS), Some(data));
        let discovery = a.ctrl.export.is_none();
        match cmd.opcode() {
            admin::IDENTIFY => {
                let cns = cmd.cdw(10) & 0xFF;
                let csi = (cmd.cdw(11) >> 24) & 0xFF;
                match (cns, &a.ns) {
                    (1, _) => ok(identify::controller(&ControllerFacts {
                        cntlid: a.ctrl.cntlid,
                        serial: &a.serial,
                        model: "io-engine",
                        subnqn: &a.ctrl.subnqn,
                        mdts: target.limits.mdts(),
                        capsule_bytes: (64 + target.limits.in_capsule) as u32,
                        max_commands: target.limits.queue_entries,
                        namespaces: if discovery { 0 } else { 1 },
                        discovery,
                        volatile_cache: a.ns.as_ref().is_some_and(|ns| ns.volatile_cache),
                    })),
                    (0, Some(ns)) if cmd.nsid() == 1 => ok(identify::namespace(ns)),
                    (0, Some(_)) => Answer::status(cid, Status::INVALID_NAMESPACE),
                    (2, Some(_)) => ok(identify::active_namespaces(cmd.nsid())),
                    (3, Some(ns)) if cmd.nsid() == 1 => {
                        ok(identify::namespace_descriptors(&ns.uuid))
                    }
                    // The NVM command set's specific structures: nothing
                    // beyond the defaults.
                    (5 | 6, Some(_)) if csi == 0 => ok(vec![0; identify::IDENTIFY_LEN]),
                    _ => Answer::status(cid, Status::INVALID_FIELD),
                }
            }
            admin::GET_LOG_PAGE => {
                let lid = (cmd.cdw(10) & 0xFF) as u8;
                let numd = ((cmd.cdw(10) >> 16) | (cmd.cdw(11) & 0xFFFF) << 16) as u64 + 1;
                let offset = cmd.cdw(12) as u64 | (cmd.cdw(13) as u64) << 32;
                let page = match lid {
                    0x01 => Some(vec![0u8; 64]),
                    0x02 => {
                        let export = a.ctrl.export.as_deref().unwrap_or("");
                        let (rb, wb, r, w) = target
                            .exports
                            .find(Protocol::Nvmf, export)
                            .map(|s| {
                                let st = s.desc.io_stats();
                                let (rd, wr) = (st.op(IoType::Read), st.op(IoType::Write));
                                (rd.bytes, wr.bytes, rd.ops, wr.ops)
                            })
                            .unwrap_or_default();
                        Some(identify::smart_log(rb, wb, r, w))
                    }
                    0x03 => Some(identify::firmware_log()),
                    0x04 => {
                        let mut list = vec![0u8; 4096];
                        if std::mem::take(&mut a.ns_changed)
                            && let Some(first) = list.first_chunk_mut::<4>()
                        {
                            *first = 1u32.to_le_bytes();
                        }
                        Some(list)
                    }
                    0x05 => Some(identify::effects_log(discovery)),
                    0x70 if discovery => Some(target.discovery_log()),
                    _ => None,
                };
                match page {
                    Some(p) => {
                        let len = p.len() as u64;
                        let from = offset.min(len) as usize;
                        let to = offset.saturating_add(numd.saturating_mul(4)).min(len) as usize;
                        ok(p.get(from..to).unwrap_or_default().to_vec())
                    }
                    None => Answer::status(cid, Status::INVALID_LOG_PAGE),
                }
            }
            admin::SET_FEATURES | admin::GET_FEATURES => {
                let set = cmd.opcode() == admin::SET_FEATURES;
                let fid = (cmd.cdw(10) & 0xFF) as u8;
                if set && cmd.cdw(10) & (1 << 31) != 0 {
                    return Answer::status(cid, Status::FEATURE_NOT_SAVEABLE);
                }
                let mut c = Completion::new(cid, Status::SUCCESS);
                match fid {
                    FEAT_NUM_QUEUES => {
                        if set {
                            let want = (cmd.cdw(11) & 0xFFFF).min(cmd.cdw(11) >> 16) + 1;
                            let granted = want.min(target.max_io_queues());
                            a.ctrl.io_queues.store(granted, Ordering::Release);
                        }
                        let n = a.ctrl.io_queues.load(Ordering::Acquire).saturating_sub(1);
                        c.dw0 = n | n << 16;
                    }
                    FEAT_KATO => {
                        if set {
                            a.kato = tsc::ns_to_ticks(cmd.cdw(11) as u64 * 1_000_000);
                        }
                        c.dw0 = (tsc::ticks_to_ns(a.kato) / 1_000_000) as u32;
                    }
                    FEAT_ASYNC_EVENT => {}
                    // The cache is the device's (a disk's, the page
                    // cache): reported, not switched; a host that has it
                    // sends Flush.
                    FEAT_VWC => {
                        c.dw0 = u32::from(a.ns.as_ref().is_some_and(|ns| ns.volatile_cache));
                    }
                    // The mandatory features, at their defaults: one
                    // arbitration burst, power state 0, an over-temperature
                    // threshold of 343 K, no error recovery time limit.
                    FEAT_ARBITRATION | FEAT_POWER | FEAT_ERROR_RECOVERY if !set => c.dw0 = 0,
                    FEAT_TEMPERATURE if !set => c.dw0 = 343,
                    FEAT_ARBITRATION | FEAT_POWER | FEAT_TEMPERATURE | FEAT_ERROR_RECOVERY => {}
                    _ => c.status = Status::INVALID_FIELD.0,
                }
                Answer::Now(c, None)
            }
            admin::ASYNC_EVENT => {
                if a.aers.len() >= MAX_AERS {
                    return Answer::status(cid, Status::AER_LIMIT_EXCEEDED);
                }
                a.aers.push(cid);
                Answer::Later
            }
            admin::KEEP_ALIVE => Answer::status(cid, Status::SUCCESS),
            admin::ABORT => {
                let mut c = Completion::new(cid, Status::SUCCESS);
                c.dw0 = 1; // not aborted
                Answer::Now(c, None)
            }
            _ => Answer::status(cid, Status::INVALID_OPCODE),
        }
    }
}
