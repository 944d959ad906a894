//! One queue's DH-HMAC-CHAP transaction, target side (NVMe Base 2.0
//! section 8.13.5; the Linux target's `nvmet_execute_auth_send/receive`
//! is the model): Negotiate in an AUTH_Send, Challenge out by AUTH_Receive,
//! Reply in, Success1 (with the controller's response when the host sent
//! a challenge of its own) out, Success2 in after bidirectional
//! authentication; a failure at any step is a Failure1 the host reads,
//! and the queue then executes nothing more.
//!
//! Thread: the connection's reactor (a plain value in its state).

use std::sync::Arc;

use zeroize::Zeroizing;

use super::ffdhe2048::Ffdhe2048;
use super::hash::Hash;
use super::keys::DhchapKeys;
use super::message as m;

/// Where a transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not done: the queue executes only AUTH_Send and AUTH_Receive.
    Pending,
    /// The host proved it holds its secret (and took the controller's
    /// proof when it asked for one).
    Authenticated,
    /// Authentication failed, with this reason code explanation: the
    /// queue executes nothing more.
    Failed(u8),
}

/// The message the transaction expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Negotiate,
    Challenge,
    Reply,
    Success1,
    Success2,
    Failure1,
}

/// Largest AUTH_Receive answer (the Linux host asks for 4 KiB).
const MAX_RECEIVE: usize = 64 << 10;

/// One transaction.
pub struct Transaction {
    keys: Arc<DhchapKeys>,
    hostnqn: String,
    subnqn: String,
    step: Step,
    outcome: Outcome,
    /// Why it failed (Failure1's explanation).
    explanation: u8,
    tid: u16,
    hash: Hash,
    dh: Option<Ffdhe2048>,
    c1: Vec<u8>,
    s1: u32,
    /// The host's challenge and sequence number (bidirectional).
    c2: Option<(Vec<u8>, u32)>,
    /// The DH shared value (ffdhe2048), wiped when dropped.
    session: Option<Zeroizing<Vec<u8>>>,
}

/// What an AUTH_Receive gets.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// The message the host is due, zero-padded to the allocation length.
    Message(Vec<u8>),
    /// The message does not fit the allocation length: the transaction
    /// failed (the host cannot be given part of a message).
    TooShort {
        /// The message's length.
        needed: usize,
    },
}

/// Equal, in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

impl Transaction {
    /// A transaction for host `hostnqn`, holding `keys`, with subsystem
    /// `subnqn`.
    pub fn new(keys: Arc<DhchapKeys>, hostnqn: &str, subnqn: &str) -> Transaction {
        Transaction {
            keys,
            hostnqn: hostnqn.to_string(),
            subnqn: subnqn.to_string(),
            step: Step::Negotiate,
            outcome: Outcome::Pending,
            explanation: 0,
            tid: 0,
            hash: Hash::Sha256,
            dh: None,
            c1: Vec::new(),
            s1: 0,
            c2: None,
            session: None,
        }
    }

    /// Where it stands.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// The hash function and DH group negotiated, for logs.
    pub fn negotiated(&self) -> (&'static str, &'static str) {
        let group = if self.dh.is_some() {
            "ffdhe2048"
        } else {
            "null"
        };
        (self.hash.name(), group)
    }

    fn fail(&mut self, explanation: u8) {
        self.step = Step::Failure1;
        self.explanation = explanation;
        self.dh = None;
        self.session = None;
    }

    /// Whether handling `msg` (an AUTH_Send's data) would compute a
    /// Diffie-Hellman value: a Negotiate that may choose ffdhe2048 (a key
    /// pair), a Reply under ffdhe2048 (the shared value). The caller pays
    /// for it from the target's budget first.
    pub fn needs_dh(&self, msg: &[u8]) -> bool {
        if self.outcome != Outcome::Pending {
            return false;
        }
        match msg.first_chunk::<2>() {
            Some(&[m::TYPE_COMMON, m::NEGOTIATE]) => self.step == Step::Negotiate,
            Some(&[m::TYPE_DHCHAP, m::REPLY]) => self.step == Step::Reply && self.dh.is_some(),
            _ => false,
        }
    }

    /// The data of an AUTH_Send.
    pub fn send(&mut self, msg: &[u8]) {
        if self.outcome != Outcome::Pending {
            return;
        }
        let Some(head) = msg.first_chunk::<{ m::FAILURE_LEN }>() else {
            return self.fail(m::INCORRECT_PAYLOAD);
        };
        match (head[0], head[1]) {
            // One Negotiate per transaction, first: another would make the
            // target compute a new key pair for each.
            (m::TYPE_COMMON, m::NEGOTIATE) if self.step == Step::Negotiate => self.negotiate(msg),
            (m::TYPE_COMMON, m::FAILURE2) => {
                // The host refused the controller's proof (or gave up).
                self.outcome = Outcome::Failed(head[7]);
            }
            (m::TYPE_DHCHAP, _) if m::tid(msg) != self.tid => self.fail(m::INCORRECT_PAYLOAD),
            (m::TYPE_DHCHAP, m::REPLY) if self.step == Step::Reply => self.reply(msg),
            (m::TYPE_DHCHAP, m::SUCCESS2) if self.step == Step::Success2 => {
                self.outcome = Outcome::Authenticated;
            }
            _ => self.fail(m::INCORRECT_MESSAGE),
        }
    }

    /// Negotiate: the host's transaction ID, hash functions and DH groups;
    /// SHA-256 is taken when offered (else the first one offered), and
    /// ffdhe2048 (else the NULL group).
    fn negotiate(&mut self, msg: &[u8]) {
        self.tid = m::tid(msg);
        self.c2 = None;
        self.session = None;
        let Some(msg) = msg.first_chunk::<{ m::NEGOTIATE_LEN }>() else {
            return self.fail(m::INCORRECT_PAYLOAD);
        };
        if msg[6] != 0 {
            // Secure channel concatenation (TLS) is not offered.
            return self.fail(m::CONCAT_MISMATCH);
        }
        if msg[7] != 1 {
            return self.fail(m::HASH_UNUSABLE);
        }
        let (halen, dhlen) = (msg[10] as usize, msg[11] as usize);
        let hashes = msg.get(12..12 + halen);
        let groups = msg.get(42..42 + dhlen);
        let (Some(hashes), Some(groups)) = (hashes, groups) else {
            return self.fail(m::INCORRECT_PAYLOAD);
        };
        if msg[8] != m::AUTH_ID_DHCHAP || halen > 30 || dhlen > 30 {
            return self.fail(m::INCORRECT_PAYLOAD);
        }
        let hash = if hashes.contains(&Hash::Sha256.id()) {
            Some(Hash::Sha256)
        } else {
            hashes.iter().find_map(|&h| Hash::from_id(h))
        };
        let Some(hash) = hash else {
            return self.fail(m::HASH_UNUSABLE);
        };
        self.hash = hash;
        self.dh = if groups.contains(&m::DHGROUP_2048) {
            match Ffdhe2048::generate() {
                Ok(k) => Some(k),
                Err(_) => return self.fail(m::FAILED),
            }
        } else if groups.contains(&m::DHGROUP_NULL) {
            None
        } else {
            return self.fail(m::DHGROUP_UNUSABLE);
        };
        self.step = Step::Challenge;
    }

    /// The challenge, augmented with the DH session key when there is one
    /// (section 8.13.5.4: HMAC(H(session key), challenge)).
    fn augmented(&self, c: &[u8]) -> Zeroizing<Vec<u8>> {
        match &self.session {
            Some(k) => {
                let key = Zeroizing::new(self.hash.digest(k));
                Zeroizing::new(self.hash.hmac(&key, &[c]))
            }
            None => Zeroizing::new(c.to_vec()),
        }
    }

    /// The response the host must give: HMAC(transformed host key, C1' ||
    /// SEQNUM || T_ID || SC_C || "HostHost" || NQNh || 00h || NQNs).
    fn host_response(&self) -> Zeroizing<Vec<u8>> {
        let key = self.keys.host.transformed(&self.hostnqn);
        let c = self.augmented(&self.c1);
        Zeroizing::new(self.hash.hmac(
            &key,
            &[
                &c,
                &self.s1.to_le_bytes(),
                &self.tid.to_le_bytes(),
                &[0],
                b"HostHost",
                self.hostnqn.as_bytes(),
                &[0],
                self.subnqn.as_bytes(),
            ],
        ))
    }

    /// The controller's response to the host's challenge: HMAC(transformed
    /// controller key, C2' || SEQNUM2 || T_ID || SC_C || "Controller" ||
    /// NQNs || 00h || NQNh).
    fn ctrl_response(&self, c2: &[u8], s2: u32) -> Option<Vec<u8>> {
        let key = self.keys.ctrl.as_ref()?.transformed(&self.subnqn);
        let c = self.augmented(c2);
        Some(self.hash.hmac(
            &key,
            &[
                &c,
                &s2.to_le_bytes(),
                &self.tid.to_le_bytes(),
                &[0],
                b"Controller",
                self.subnqn.as_bytes(),
                &[0],
                self.hostnqn.as_bytes(),
            ],
        ))
    }

    /// Reply: the host's DH value, response and (maybe) challenge.
    fn reply(&mut self, msg: &[u8]) {
        let Some(head) = msg.first_chunk::<{ m::HEADER_LEN }>() else {
            return self.fail(m::INCORRECT_PAYLOAD);
        };
        let hl = head[6] as usize;
        let cvalid = head[8] != 0;
        let dhvlen = u16::from_le_bytes([head[10], head[11]]) as usize;
        let seqnum = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
        let at = m::HEADER_LEN;
        let parts = (
            msg.get(at..at + hl),
            msg.get(at + hl..at + 2 * hl),
            msg.get(at + 2 * hl..at + 2 * hl + dhvlen),
        );
        let (Some(rval), Some(c2), Some(dhv)) = parts else {
            return self.fail(m::INCORRECT_PAYLOAD);
        };
        if hl != self.hash.size() {
            return self.fail(m::INCORRECT_PAYLOAD);
        }
        match &self.dh {
            Some(dh) => match dh.shared(dhv) {
                Some(s) => self.session = Some(Zeroizing::new(s.to_vec())),
                None => return self.fail(m::DHGROUP_UNUSABLE),
            },
            None if dhvlen != 0 => return self.fail(m::INCORRECT_PAYLOAD),
            None => {}
        }
        if !same(&self.host_response(), rval) {
            return self.fail(m::FAILED);
        }
        // A zero sequence number asks for no controller response.
        if cvalid && seqnum != 0 {
            if self.keys.ctrl.is_none() {
                return self.fail(m::FAILED);
            }
            self.c2 = Some((c2.to_vec(), seqnum));
        }
        self.step = Step::Success1;
    }

    /// The data of an AUTH_Receive of allocation length `al`: the message
    /// the host is due, zero-padded to `al` (at most 64 KiB), or, when it
    /// does not fit in `al`, the transaction fails: part of a message
    /// would be a message the host cannot read.
    pub fn receive(&mut self, al: usize) -> Received {
        let msg = match (self.outcome, self.step) {
            (Outcome::Pending, Step::Challenge) => match self.challenge() {
                Some(c) => c,
                None => {
                    self.fail(m::FAILED);
                    self.failure1()
                }
            },
            (Outcome::Pending, Step::Success1) => {
                let response = match &self.c2 {
                    Some((c2, s2)) => self.ctrl_response(c2, *s2),
                    None => None,
                };
                let msg = m::success1(self.tid, self.hash.size(), response.as_deref());
                if msg.len() <= al {
                    if self.c2.is_some() {
                        self.step = Step::Success2;
                    } else {
                        self.outcome = Outcome::Authenticated;
                    }
                    self.session = None;
                }
                msg
            }
            (Outcome::Pending, Step::Failure1) => self.failure1(),
            _ => {
                self.fail(m::INCORRECT_MESSAGE);
                self.failure1()
            }
        };
        if msg.len() > al {
            self.fail(m::INCORRECT_PAYLOAD);
            self.outcome = Outcome::Failed(m::INCORRECT_PAYLOAD);
            return Received::TooShort { needed: msg.len() };
        }
        let mut msg = msg;
        msg.resize(al.min(MAX_RECEIVE).max(msg.len()), 0);
        Received::Message(msg)
    }

    fn failure1(&mut self) -> Vec<u8> {
        self.outcome = Outcome::Failed(self.explanation);
        m::failure(m::FAILURE1, self.tid, self.explanation)
    }

    /// Challenge: fresh C1 and sequence number, the DH public value.
    fn challenge(&mut self) -> Option<Vec<u8>> {
        let mut c1 = vec![0u8; self.hash.size()];
        let mut s1 = [0u8; 4];
        getrandom::fill(&mut c1).ok()?;
        getrandom::fill(&mut s1).ok()?;
        self.s1 = u32::from_le_bytes(s1).max(1);
        self.c1 = c1;
        let (dhgid, dhv): (u8, &[u8]) = match &self.dh {
            Some(k) => (m::DHGROUP_2048, k.public()),
            None => (m::DHGROUP_NULL, &[]),
        };
        self.step = Step::Reply;
        Some(m::challenge(
            self.tid,
            self.hash.id(),
            dhgid,
            self.s1,
            &self.c1,
            dhv,
        ))
    }
}
