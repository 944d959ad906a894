//! A controller of the dynamic controller model: made by the Connect of
//! its admin queue, found by its I/O queues' Connects, gone when its admin
//! queue closes or its keep-alive timer expires.
//!
//! Thread: its state is kept by the admin queue's connection, on that
//! connection's reactor; I/O queues on any reactor read what they need
//! once, at their Connect (through the registry's lock), and then only the
//! atomic `dead` flag, once a round: nothing on the data path takes a
//! lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::auth::DhchapKeys;

/// One controller.
pub struct Controller {
    /// Its ID.
    pub cntlid: u16,
    /// The subsystem it belongs to.
    pub subnqn: String,
    /// The host that made it.
    pub hostnqn: String,
    /// The device it exports (`None`: the discovery controller).
    pub export: Option<String>,
    /// The host's DH-HMAC-CHAP secrets: each of its queues authenticates
    /// after its Connect (`None`: no authentication).
    pub dhchap: Option<Arc<DhchapKeys>>,
    /// Controller Configuration (CC), as the host last set it.
    cc: AtomicU32,
    /// I/O queues the host may create (Number of Queues), 1-based.
    pub io_queues: AtomicU32,
    /// The I/O queues established now, by QID: bit `qid - 1` (QIDs 1 to
    /// [`MAX_QID`]).
    qids: AtomicU64,
    /// The controller is torn down: its queues close.
    dead: AtomicBool,
}

/// CC.EN.
pub const CC_EN: u32 = 1;
/// The highest I/O queue ID a controller has (Number of Queues grants at
/// most this many).
pub const MAX_QID: u16 = 64;
/// CC.SHN, bits 15:14.
pub const CC_SHN_MASK: u32 = 3 << 14;

impl Controller {
    /// CC.
    pub fn cc(&self) -> u32 {
        self.cc.load(Ordering::Acquire)
    }

    /// Sets CC.
    pub fn set_cc(&self, cc: u32) {
        self.cc.store(cc, Ordering::Release)
    }

    /// CSTS, derived from CC: RDY follows EN; a shutdown notification is
    /// complete at once (nothing is cached that is not already on the
    /// device).
    pub fn csts(&self) -> u32 {
        let cc = self.cc();
        let rdy = cc & CC_EN;
        let shst = if cc & CC_SHN_MASK != 0 { 2 << 2 } else { 0 };
        rdy | shst
    }

    /// Whether CC.EN is set (I/O queues may connect and run).
    pub fn enabled(&self) -> bool {
        self.cc() & CC_EN != 0
    }

    /// Whether it is torn down.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// The bit of I/O queue `qid` in `qids`, if it is one (1 to
    /// [`MAX_QID`]).
    fn qid_bit(qid: u16) -> Option<u64> {
        (1..=MAX_QID).contains(&qid).then(|| 1 << (qid - 1))
    }

    /// Whether I/O queue `qid` is established.
    pub fn has_queue(&self, qid: u16) -> bool {
        Self::qid_bit(qid).is_some_and(|b| self.qids.load(Ordering::Acquire) & b != 0)
    }

    /// Takes QID `qid` for a queue being established; `false` when
    /// another queue has it (a second Connect of one QID) or it is no I/O
    /// queue's.
    pub fn claim_queue(&self, qid: u16) -> bool {
        Self::qid_bit(qid).is_some_and(|b| self.qids.fetch_or(b, Ordering::AcqRel) & b == 0)
    }

    /// Gives QID `qid` back (its queue closed).
    pub fn release_queue(&self, qid: u16) {
        if let Some(b) = Self::qid_bit(qid) {
            self.qids.fetch_and(!b, Ordering::AcqRel);
        }
    }

    /// I/O queues established now.
    pub fn connected_io_queues(&self) -> u32 {
        self.qids.load(Ordering::Acquire).count_ones()
    }
}

/// The controllers of one target, by ID.
#[derive(Default)]
pub struct Controllers {
    map: Mutex<HashMap<u16, Arc<Controller>>>,
    next: Mutex<u16>,
}

impl Controllers {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u16, Arc<Controller>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes a controller with a fresh ID (1 to 0xFFEF).
    pub fn create(
        &self,
        subnqn: String,
        hostnqn: String,
        export: Option<String>,
        dhchap: Option<Arc<DhchapKeys>>,
    ) -> Arc<Controller> {
        let mut map = self.map();
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let cntlid = loop {
            *next = if *next >= 0xFFEF { 1 } else { *next + 1 };
            if !map.contains_key(&*next) {
                break *next;
            }
        };
        let c = Arc::new(Controller {
            cntlid,
            subnqn,
            hostnqn,
            export,
            dhchap,
            cc: AtomicU32::new(0),
            io_queues: AtomicU32::new(1),
            qids: AtomicU64::new(0),
            dead: AtomicBool::new(false),
        });
        map.insert(cntlid, c.clone());
        c
    }

    /// The controller with ID `cntlid`.
    pub fn get(&self, cntlid: u16) -> Option<Arc<Controller>> {
        self.map().get(&cntlid).cloned()
    }

    /// Tears controller `c` down: its queues close.
    pub fn remove(&self, c: &Controller) {
        c.dead.store(true, Ordering::Release);
        self.map().remove(&c.cntlid);
    }

    /// Controllers now.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every controller, for the export list.
    pub fn all(&self) -> Vec<Arc<Controller>> {
        self.map().values().cloned().collect()
    }
}
