//! The controller nvmf-perf drives: its admin queue (Connect with CNTLID
//! 0xFFFF, CC.EN and CSTS.RDY, Identify, Set Features Number of Queues),
//! what Identify says about it and the namespace, and the Connect of each
//! I/O queue. The admin queue stays open for the run and is closed after
//! it, which ends the controller.
//!
//! Thread: `main`.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use io_engine::export::nvmf::command::{Command, admin};
use io_engine::export::nvmf::pdu::Digests;

use super::setup_queue::SetupQueue;
use super::transport_id::TransportId;

/// Entries of the admin queue.
const ADMIN_ENTRIES: u16 = 32;
/// Property offsets.
const PROP_CAP: u32 = 0x00;
const PROP_CC: u32 = 0x14;
const PROP_CSTS: u32 = 0x1C;
/// CC: EN, I/O submission entries of 2^6 bytes, completions of 2^4.
const CC_ENABLE: u32 = 1 | 6 << 16 | 4 << 20;
/// Set Features: Number of Queues.
const FEAT_NUM_QUEUES: u32 = 0x07;
/// ONCS bit 8: the Copy command.
const ONCS_COPY: u16 = 1 << 8;

/// A connected, enabled controller and its namespace.
pub struct Controller {
    admin: SetupQueue,
    addr: SocketAddr,
    subnqn: String,
    hostnqn: String,
    /// Controller ID.
    pub cntlid: u16,
    /// Most entries of an I/O queue (CAP.MQES + 1).
    pub max_entries: u32,
    /// Largest transfer of one command in bytes (None: no limit).
    pub max_transfer: Option<u64>,
    /// Most data bytes a command capsule carries on an I/O queue.
    pub in_capsule: usize,
    /// The namespace driven.
    pub nsid: u32,
    /// Its size in blocks.
    pub blocks: u64,
    /// Its block size in bytes.
    pub block_size: u32,
    oncs: u16,
    mssrl: u16,
    mcl: u32,
}

/// Connect's status, in words.
fn connect_status(s: u16) -> &'static str {
    match s {
        0x180 => "Connect Incompatible Format",
        0x181 => "Connect Controller Busy",
        0x182 => "Connect Invalid Parameters: unknown subsystem NQN or controller",
        0x184 => "Connect Invalid Host",
        _ => "see the NVMe status codes",
    }
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

impl Controller {
    /// Connects the admin queue to `tid`'s subsystem as `hostnqn`, enables
    /// the controller and reads its Identify data.
    pub fn attach(
        tid: &TransportId,
        hostnqn: &str,
        digests: Digests,
    ) -> Result<Controller, String> {
        let addr = tid.socket_addr()?;
        let mut admin = SetupQueue::open(addr, digests)?;
        let cqe = admin.connect(0, ADMIN_ENTRIES, 0xFFFF, &tid.subnqn, hostnqn)?;
        if cqe.status() != 0 {
            return Err(format!(
                "Connect to {} at {addr} refused: status {:#x} ({})",
                tid.subnqn,
                cqe.status(),
                connect_status(cqe.status())
            ));
        }
        let cntlid = cqe.dw0() as u16;
        let cap = admin.get_property(PROP_CAP, true)?;
        admin.set_property(PROP_CC, CC_ENABLE)?;
        // CAP.TO: the longest wait for CSTS.RDY, in 500 ms units.
        let deadline = Instant::now() + Duration::from_millis(500 * ((cap >> 24) & 0xFF).max(1));
        while admin.get_property(PROP_CSTS, false)? & 1 == 0 {
            if Instant::now() > deadline {
                return Err("the controller did not become ready (CSTS.RDY) after CC.EN".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let identify = |admin: &mut SetupQueue, cns: u32, nsid: u32| {
            let (cqe, data) = admin.exec(
                Command::new(admin::IDENTIFY, nsid).with_cdw(10, cns),
                &[],
                4096,
            )?;
            match cqe.status() {
                0 => Ok(data),
                s => Err(format!("Identify CNS {cns} NSID {nsid}: status {s:#x}")),
            }
        };
        let ctrl = identify(&mut admin, 1, 0)?;
        let ns = identify(&mut admin, 0, tid.nsid)?;
        let mpsmin = (cap >> 48) & 0xF;
        let mdts = ctrl[77];
        let flbas = (ns[26] & 0xF) as usize;
        let lbads = ns[128 + 4 * flbas + 2];
        if !(9..=16).contains(&lbads) {
            return Err(format!(
                "namespace {} has an unusable block size (LBADS {lbads})",
                tid.nsid
            ));
        }
        let ioccsz = le32(&ctrl, 1792) as usize * 16;
        Ok(Controller {
            admin,
            addr,
            subnqn: tid.subnqn.clone(),
            hostnqn: hostnqn.to_string(),
            cntlid,
            max_entries: (cap & 0xFFFF) as u32 + 1,
            max_transfer: (mdts != 0).then(|| (4096u64 << mpsmin) << mdts),
            in_capsule: ioccsz.saturating_sub(64),
            nsid: tid.nsid,
            blocks: u64::from_le_bytes(ns[0..8].try_into().expect("8 bytes")),
            block_size: 1 << lbads,
            oncs: le16(&ctrl, 520),
            mssrl: le16(&ns, 74),
            mcl: le32(&ns, 76),
        })
    }

    /// Asks for `n` I/O queues (Set Features Number of Queues); fails if
    /// fewer are granted.
    pub fn set_io_queues(&mut self, n: u32) -> Result<(), String> {
        let want = n - 1;
        let sqe = Command::new(admin::SET_FEATURES, 0)
            .with_cdw(10, FEAT_NUM_QUEUES)
            .with_cdw(11, want | want << 16);
        let (cqe, _) = self.admin.exec(sqe, &[], 0)?;
        if cqe.status() != 0 {
            return Err(format!(
                "Set Features Number of Queues ({n}): status {:#x}",
                cqe.status()
            ));
        }
        let granted = (cqe.dw0() & 0xFFFF).min(cqe.dw0() >> 16) + 1;
        if granted < n {
            return Err(format!(
                "the target grants {granted} I/O queues; {n} are needed (cores x -P)"
            ));
        }
        Ok(())
    }

    /// Whether Copy commands of one range of `nlb` blocks may be sent:
    /// ONCS says Copy, and MSSRL, MCL and MSRC allow it.
    pub fn check_copy(&self, nlb: u64) -> Result<(), String> {
        if self.oncs & ONCS_COPY == 0 {
            return Err(format!(
                "{} does not support Copy (Identify Controller ONCS bit 8 is clear)",
                self.subnqn
            ));
        }
        if nlb > self.mssrl as u64 || nlb > self.mcl as u64 {
            return Err(format!(
                "a Copy of {nlb} blocks exceeds the target's limits (MSSRL {} blocks, MCL {} blocks)",
                self.mssrl, self.mcl
            ));
        }
        // MSRC (byte 80, 0-based) allows at least the one range sent.
        Ok(())
    }

    /// Connects I/O queue `qid` with `entries` entries; returns its
    /// socket (non-blocking) and the target's MAXH2CDATA.
    pub fn connect_io_queue(
        &self,
        qid: u16,
        entries: u16,
        digests: Digests,
    ) -> Result<(TcpStream, u32), String> {
        let mut q = SetupQueue::open(self.addr, digests)?;
        let cqe = q.connect(qid, entries, self.cntlid, &self.subnqn, &self.hostnqn)?;
        if cqe.status() != 0 {
            return Err(format!(
                "Connect of I/O queue {qid} refused: status {:#x} ({})",
                cqe.status(),
                connect_status(cqe.status())
            ));
        }
        let maxh2cdata = q.maxh2cdata;
        Ok((q.into_socket()?, maxh2cdata))
    }
}
