//! The DH-HMAC-CHAP messages' identifiers and layouts (NVMe Base 2.0
//! section 8.13.5; the Linux `struct nvmf_auth_dhchap_*_data`), and the
//! AUTH_Send / AUTH_Receive command fields that carry them.
//!
//! Thread: any (constants and pure functions).

/// AUTH_Send / AUTH_Receive: SECP, the DH-HMAC-CHAP protocol (byte 43).
pub const SECP_DHCHAP: u8 = 0xE9;
/// AUTH_Send / AUTH_Receive: SPSP0 and SPSP1 (bytes 41, 42).
pub const SPSP: u8 = 0x01;

/// AUTH_TYPE: common messages (Negotiate, Failure1, Failure2).
pub const TYPE_COMMON: u8 = 0x00;
/// AUTH_TYPE: DH-HMAC-CHAP messages.
pub const TYPE_DHCHAP: u8 = 0x01;

/// AUTH_ID of each message.
pub const NEGOTIATE: u8 = 0x00;
/// Challenge (controller to host).
pub const CHALLENGE: u8 = 0x01;
/// Reply (host to controller).
pub const REPLY: u8 = 0x02;
/// Success1 (controller to host).
pub const SUCCESS1: u8 = 0x03;
/// Success2 (host to controller, after bidirectional authentication).
pub const SUCCESS2: u8 = 0x04;
/// Failure2 (host to controller).
pub const FAILURE2: u8 = 0xF0;
/// Failure1 (controller to host).
pub const FAILURE1: u8 = 0xF1;

/// The one authentication protocol identifier, DH-HMAC-CHAP.
pub const AUTH_ID_DHCHAP: u8 = 0x01;
/// DH group identifiers.
pub const DHGROUP_NULL: u8 = 0x00;
/// ffdhe2048.
pub const DHGROUP_2048: u8 = 0x01;

/// Failure reason code: authentication failure.
pub const REASON_FAILED: u8 = 0x01;
/// Failure reason code explanations.
pub const FAILED: u8 = 0x01;
/// No usable secure channel concatenation.
pub const CONCAT_MISMATCH: u8 = 0x03;
/// No usable hash function.
pub const HASH_UNUSABLE: u8 = 0x04;
/// No usable DH group.
pub const DHGROUP_UNUSABLE: u8 = 0x05;
/// A field of the message is wrong.
pub const INCORRECT_PAYLOAD: u8 = 0x06;
/// The message is not the one expected.
pub const INCORRECT_MESSAGE: u8 = 0x07;

/// Negotiate: the header (8 bytes) and one protocol descriptor (64: AUTHID,
/// reserved, HALEN, DHLEN, 30 hash identifiers then 30 DH group
/// identifiers).
pub const NEGOTIATE_LEN: usize = 72;
/// The fixed part of Challenge, Reply and Success1.
pub const HEADER_LEN: usize = 16;
/// Failure1 and Failure2.
pub const FAILURE_LEN: usize = 8;

/// The transaction identifier (bytes 4-5) of a message (0 when it is
/// shorter).
pub fn tid(m: &[u8]) -> u16 {
    match m.first_chunk::<6>() {
        Some(h) => u16::from_le_bytes([h[4], h[5]]),
        None => 0,
    }
}

/// A message's first 16 bytes: AUTH_TYPE, AUTH_ID, reserved, T_ID, the
/// rest zero (each message fills in its own fields).
fn header(kind: u8, id: u8, tid: u16) -> [u8; HEADER_LEN] {
    let t = tid.to_le_bytes();
    let mut m = [0u8; HEADER_LEN];
    m[0] = kind;
    m[1] = id;
    m[4] = t[0];
    m[5] = t[1];
    m
}

/// Challenge: HL, HASHID, DHGID, DHVLEN, SEQNUM, then C1 and the DH value.
pub fn challenge(tid: u16, hash_id: u8, dhgid: u8, seqnum: u32, c1: &[u8], dh: &[u8]) -> Vec<u8> {
    let mut h = header(TYPE_DHCHAP, CHALLENGE, tid);
    let dhvlen = (dh.len() as u16).to_le_bytes();
    let s = seqnum.to_le_bytes();
    h[6] = c1.len() as u8;
    h[8] = hash_id;
    h[9] = dhgid;
    h[10] = dhvlen[0];
    h[11] = dhvlen[1];
    h[12..16].copy_from_slice(&s);
    [&h[..], c1, dh].concat()
}

/// Success1: HL, RVALID, then the controller's response when there is one.
pub fn success1(tid: u16, hl: usize, response: Option<&[u8]>) -> Vec<u8> {
    let mut h = header(TYPE_DHCHAP, SUCCESS1, tid);
    h[6] = hl as u8;
    h[8] = response.is_some() as u8;
    [&h[..], response.unwrap_or_default()].concat()
}

/// Failure1 (or, from a host, Failure2): reason "authentication failure"
/// and its explanation.
pub fn failure(id: u8, tid: u16, explanation: u8) -> Vec<u8> {
    let mut h = header(TYPE_COMMON, id, tid);
    h[6] = REASON_FAILED;
    h[7] = explanation;
    h[..FAILURE_LEN].to_vec()
}

/// Negotiate, as a host sends it: no secure channel, one DH-HMAC-CHAP
/// descriptor offering `hashes` and `dhgroups` (the unit tests' and the
/// fuzz targets' host).
#[cfg(any(test, fuzzing))]
pub fn negotiate(tid: u16, hashes: &[u8], dhgroups: &[u8]) -> Vec<u8> {
    let mut m = header(TYPE_COMMON, NEGOTIATE, tid).to_vec();
    m.resize(NEGOTIATE_LEN, 0);
    m[7] = 1;
    m[8] = AUTH_ID_DHCHAP;
    m[10] = hashes.len() as u8;
    m[11] = dhgroups.len() as u8;
    m[12..12 + hashes.len()].copy_from_slice(hashes);
    m[42..42 + dhgroups.len()].copy_from_slice(dhgroups);
    m
}

/// Reply, as a host sends it: its response, its challenge C2 (with
/// sequence number `seqnum`, or none), its DH value.
#[cfg(any(test, fuzzing))]
pub fn reply(tid: u16, response: &[u8], c2: Option<(&[u8], u32)>, dh: &[u8]) -> Vec<u8> {
    let hl = response.len();
    let mut m = header(TYPE_DHCHAP, REPLY, tid).to_vec();
    m[6] = hl as u8;
    m[10..12].copy_from_slice(&(dh.len() as u16).to_le_bytes());
    m.extend_from_slice(response);
    match c2 {
        Some((c, seqnum)) => {
            m[8] = 1;
            m[12..16].copy_from_slice(&seqnum.to_le_bytes());
            m.extend_from_slice(c);
        }
        None => m.resize(m.len() + hl, 0),
    }
    m.extend_from_slice(dh);
    m
}

/// Success2, as a host sends it.
#[cfg(any(test, fuzzing))]
pub fn success2(tid: u16) -> Vec<u8> {
    header(TYPE_DHCHAP, SUCCESS2, tid).to_vec()
}
