//! The PDUs a host sends (ICReq, command capsules, H2CData's data),
//! appended to an output buffer, and the checks of the PDUs it receives:
//! the layouts of the NVMe/TCP transport specification 1.0, section 3.6,
//! with the constants, header writers and CRC-32C of the target's own
//! `pdu` module.
//!
//! Thread: any (plain functions over bytes).

use io_engine::export::nvmf::Command;
use io_engine::export::nvmf::pdu::{
    self, CAPSULE_CMD_HLEN, COMMON_HEADER, DATA_HLEN, Digests, Header, IC_HLEN, flags, kind,
};

/// MAXR2T the host announces (0-based: one R2T outstanding per command).
const MAXR2T: u32 = 0;

/// Appends an ICReq asking for `digests` (PFV 0, HPDA 0).
pub fn put_ic_req(out: &mut Vec<u8>, digests: Digests) {
    pdu::put_ic_req(out, digests, 0, MAXR2T);
}

/// Appends a command capsule for `sqe` with `data` in the capsule (none
/// when empty).
pub fn put_capsule(out: &mut Vec<u8>, sqe: &Command, data: &[u8], digests: Digests) {
    let start = out.len();
    let hd = if digests.header { 4 } else { 0 };
    let dd = if digests.data && !data.is_empty() {
        4
    } else {
        0
    };
    let pdo = if data.is_empty() {
        0
    } else {
        CAPSULE_CMD_HLEN + hd
    };
    let mut f = 0;
    if digests.header {
        f |= flags::HDGSTF;
    }
    if dd != 0 {
        f |= flags::DDGSTF;
    }
    let plen = CAPSULE_CMD_HLEN + hd + data.len() + dd;
    pdu::put_common(out, kind::CAPSULE_CMD, f, CAPSULE_CMD_HLEN, pdo, plen);
    out.extend_from_slice(&sqe.0);
    pdu::put_hdgst(out, start, digests);
    put_data(out, data, digests);
}

/// Appends `data` and, when data digests are on, its CRC-32C: the data
/// of a command capsule, or of an H2CData PDU after its header (the
/// target's `pdu::put_data_header`).
pub fn put_data(out: &mut Vec<u8>, data: &[u8], digests: Digests) {
    out.extend_from_slice(data);
    if digests.data && !data.is_empty() {
        out.extend_from_slice(&pdu::crc32c(0, data).to_le_bytes());
    }
}

/// Where a received PDU's data is: `(offset, length)` within the PDU
/// (length 0 when it has none), after checking its header against its
/// type's layout and its header digest. `b` is the whole PDU.
pub fn received(b: &[u8], digests: Digests) -> Result<(usize, usize), String> {
    let h = Header::parse(b).ok_or("a PDU shorter than its common header")?;
    let (hlen, digested) = match h.kind {
        kind::IC_RESP => (IC_HLEN, false),
        kind::C2H_TERM_REQ => (pdu::TERM_HLEN, false),
        kind::CAPSULE_RESP => (pdu::CAPSULE_RESP_HLEN, true),
        kind::C2H_DATA | kind::R2T => (DATA_HLEN, true),
        k => return Err(format!("the target sent PDU type {k:#x}")),
    };
    if h.hlen as usize != hlen {
        return Err(format!("PDU type {:#x} with HLEN {}", h.kind, h.hlen));
    }
    let hd = if digested && digests.header { 4 } else { 0 };
    let plen = h.plen as usize;
    if plen < hlen + hd {
        return Err(format!("PDU type {:#x} with PLEN {plen}", h.kind));
    }
    if hd != 0 {
        let want = u32::from_le_bytes(b[hlen..hlen + 4].try_into().expect("4 bytes"));
        if pdu::crc32c(0, &b[..hlen]) != want {
            return Err("header digest mismatch in a PDU from the target".into());
        }
    }
    if h.pdo == 0 {
        return Ok((0, 0));
    }
    let dd = if digested && digests.data { 4 } else { 0 };
    let pdo = h.pdo as usize;
    if pdo < hlen + hd || pdo + dd > plen {
        return Err(format!(
            "PDU type {:#x} with PDO {pdo}, PLEN {plen}",
            h.kind
        ));
    }
    Ok((pdo, plen - pdo - dd))
}

/// Checks the data digest after the data at `at..at + len` of PDU `b`.
pub fn data_digest_ok(b: &[u8], at: usize, len: usize, digests: Digests) -> bool {
    if !digests.data || len == 0 {
        return true;
    }
    let want = u32::from_le_bytes(b[at + len..at + len + 4].try_into().expect("4 bytes"));
    pdu::crc32c(0, &b[at..at + len]) == want
}

/// The most bytes of one PDU the target may send: a C2HData of `max_data`
/// bytes with both digests.
pub fn max_pdu(max_data: usize) -> usize {
    DATA_HLEN + 4 + max_data + 4
}

/// Bytes of a common header: what is needed to know a PDU's length.
pub const HEADER: usize = COMMON_HEADER;

/// What a C2HTermReq says, in words.
pub fn term_req(b: &[u8]) -> String {
    let fes = u16::from_le_bytes([b[8], b[9]]);
    let fei = u32::from_le_bytes([b[10], b[11], b[12], b[13]]);
    format!("the target terminated the connection (C2HTermReq FES {fes:#x}, FEI {fei:#x})")
}
