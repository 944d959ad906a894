//! NVMe/TCP PDUs (NVMe/TCP transport specification 1.0, section 3.6): the
//! common header every PDU starts with, its checks, and the PDUs the
//! target sends, written into the connection's output. The common header
//! and header digest writers, the data PDU header and the ICReq (the
//! layouts of C2HData and ICResp) serve a host too (nvmf-perf).
//!
//! Thread: any (plain functions over bytes); used on the connection's
//! reactor and on nvmf-perf's threads.

/// PDU types.
pub mod kind {
    /// Initialize Connection Request (host to controller).
    pub const IC_REQ: u8 = 0x00;
    /// Initialize Connection Response.
    pub const IC_RESP: u8 = 0x01;
    /// Host to Controller Terminate Connection Request.
    pub const H2C_TERM_REQ: u8 = 0x02;
    /// Controller to Host Terminate Connection Request.
    pub const C2H_TERM_REQ: u8 = 0x03;
    /// Command Capsule.
    pub const CAPSULE_CMD: u8 = 0x04;
    /// Response Capsule.
    pub const CAPSULE_RESP: u8 = 0x05;
    /// Host to Controller Data.
    pub const H2C_DATA: u8 = 0x06;
    /// Controller to Host Data.
    pub const C2H_DATA: u8 = 0x07;
    /// Ready to Transfer.
    pub const R2T: u8 = 0x09;
}

/// Header flags.
pub mod flags {
    /// A header digest follows the PDU header.
    pub const HDGSTF: u8 = 0x01;
    /// A data digest follows the PDU data.
    pub const DDGSTF: u8 = 0x02;
    /// The last data PDU of a command's transfer (H2CData, C2HData).
    pub const LAST_PDU: u8 = 0x04;
    /// C2HData: the command succeeded and no response capsule follows.
    pub const SUCCESS: u8 = 0x08;
}

/// Bytes of the common header.
pub const COMMON_HEADER: usize = 8;
/// Header length of ICReq and ICResp.
pub const IC_HLEN: usize = 128;
/// Header length of a command capsule (common header and the 64-byte
/// submission queue entry).
pub const CAPSULE_CMD_HLEN: usize = COMMON_HEADER + 64;
/// Header length of a response capsule (common header and the 16-byte
/// completion queue entry).
pub const CAPSULE_RESP_HLEN: usize = COMMON_HEADER + 16;
/// Header length of H2CData, C2HData and R2T.
pub const DATA_HLEN: usize = 24;
/// Header length of the terminate requests.
pub const TERM_HLEN: usize = 24;
/// Most bytes of the offending PDU header a C2HTermReq carries.
pub const TERM_MAX_DATA: usize = 152 - TERM_HLEN;

/// Fatal Error Status of a terminate request (NVMe/TCP 3.6.2.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Fes {
    /// A header field is invalid; FEI names its byte offset.
    InvalidHeaderField = 0x01,
    /// A PDU arrived where the protocol does not allow it.
    PduSequence = 0x02,
    /// The header digest did not match.
    HeaderDigest = 0x03,
    /// Data outside the range the command or R2T allowed.
    DataTransferOutOfRange = 0x04,
    /// More data than the R2T asked for.
    DataTransferLimitExceeded = 0x05,
    /// A parameter the controller does not support (ICReq PFV, ...).
    UnsupportedParameter = 0x06,
}

/// Why a connection ends: what the C2HTermReq says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PduError {
    /// The error status.
    pub fes: Fes,
    /// Field Error Information: the offset of the bad header field (for
    /// [`Fes::InvalidHeaderField`]), the bad value otherwise.
    pub fei: u32,
    /// In words, for the log.
    pub why: String,
}

impl PduError {
    /// An invalid header field at byte `offset`.
    pub fn field(offset: u32, why: impl Into<String>) -> PduError {
        PduError {
            fes: Fes::InvalidHeaderField,
            fei: offset,
            why: why.into(),
        }
    }

    /// Any other fatal error.
    pub fn new(fes: Fes, why: impl Into<String>) -> PduError {
        PduError {
            fes,
            fei: 0,
            why: why.into(),
        }
    }
}

impl std::fmt::Display for PduError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (FES {:#x})", self.why, self.fes as u16)
    }
}

/// A PDU's common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// PDU type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Header length (without a header digest).
    pub hlen: u8,
    /// Data offset from the PDU's start (0: no data).
    pub pdo: u8,
    /// Length of the whole PDU.
    pub plen: u32,
}

/// The digests a connection negotiated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Digests {
    /// CRC-32C of every PDU header.
    pub header: bool,
    /// CRC-32C of every PDU's data.
    pub data: bool,
}

/// The most data a host's PDU of each type may carry on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PduLimits {
    /// A command capsule's in-capsule data.
    pub capsule_data: usize,
    /// An H2CData PDU's data (MAXH2CDATA).
    pub h2c_data: usize,
}

impl Header {
    /// The common header at the start of `b`, if its 8 bytes are there.
    #[inline]
    pub fn parse(b: &[u8]) -> Option<Header> {
        let h: &[u8; COMMON_HEADER] = b.first_chunk()?;
        Some(Header {
            kind: h[0],
            flags: h[1],
            hlen: h[2],
            pdo: h[3],
            plen: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
        })
    }

    /// Checks the header of a PDU a host sends against its type's fixed
    /// layout, the digests in use and the most data a PDU of its type may
    /// carry (`limits`). Returns the PDU's data length: the PDU, digests
    /// included, is then `plen` bytes, at most the header, its digest and
    /// that much data with its digest.
    pub fn check(&self, digests: Digests, limits: PduLimits) -> Result<usize, PduError> {
        let (hlen, max_data) = match self.kind {
            kind::IC_REQ => (IC_HLEN, 0),
            kind::H2C_TERM_REQ => (TERM_HLEN, TERM_MAX_DATA),
            kind::CAPSULE_CMD => (CAPSULE_CMD_HLEN, limits.capsule_data),
            kind::H2C_DATA => (DATA_HLEN, limits.h2c_data),
            k => {
                return Err(PduError::field(
                    0,
                    format!("PDU type {k:#x} is not one a host sends"),
                ));
            }
        };
        if self.hlen as usize != hlen {
            return Err(PduError::field(
                2,
                format!(
                    "HLEN {} for PDU type {:#x} (want {hlen})",
                    self.hlen, self.kind
                ),
            ));
        }
        let ic = self.kind == kind::IC_REQ || self.kind == kind::H2C_TERM_REQ;
        let hdgst = if digests.header && !ic { 4 } else { 0 };
        let ddgst = if digests.data && !ic { 4 } else { 0 };
        let header_end = hlen + hdgst;
        let plen = self.plen as usize;
        if plen < header_end {
            return Err(PduError::field(
                4,
                format!("PLEN {plen} is shorter than the header"),
            ));
        }
        if self.kind == kind::IC_REQ && plen != IC_HLEN {
            return Err(PduError::field(4, format!("ICReq PLEN {plen} (want 128)")));
        }
        // The most a PDU of this type may be: header, padding up to a data
        // offset of at most 255, the data and its digest.
        let most = u8::MAX as usize + max_data + ddgst;
        if plen > most {
            return Err(PduError {
                fes: Fes::DataTransferLimitExceeded,
                fei: self.plen,
                why: format!(
                    "PLEN {plen} of PDU type {:#x}: more than its {max_data} bytes of data",
                    self.kind
                ),
            });
        }
        if self.pdo == 0 {
            // Only a terminate request carries data (the header it quotes)
            // without a data offset.
            let data = plen - header_end;
            if data != 0 && (self.kind != kind::H2C_TERM_REQ || data > max_data) {
                return Err(PduError::field(
                    4,
                    format!("PLEN {plen} with no data (PDO 0)"),
                ));
            }
            return Ok(data);
        }
        let pdo = self.pdo as usize;
        if max_data == 0 || pdo < header_end || pdo >= plen {
            return Err(PduError::field(
                3,
                format!("PDO {pdo} (header ends at {header_end}, PLEN {plen})"),
            ));
        }
        let data = plen - pdo;
        if data <= ddgst {
            return Err(PduError::field(
                4,
                format!("PLEN {plen} leaves no data after PDO {pdo}"),
            ));
        }
        let data = data - ddgst;
        if data > max_data {
            return Err(PduError {
                fes: Fes::DataTransferLimitExceeded,
                fei: data as u32,
                why: format!(
                    "{data} bytes of data in PDU type {:#x}: more than its {max_data}",
                    self.kind
                ),
            });
        }
        Ok(data)
    }
}

/// Appends a common header.
pub fn put_common(out: &mut Vec<u8>, kind: u8, flags: u8, hlen: usize, pdo: usize, plen: usize) {
    out.extend_from_slice(&[kind, flags, hlen as u8, pdo as u8]);
    out.extend_from_slice(&(plen as u32).to_le_bytes());
}

/// Appends the header digest of the header that starts at `start`, when
/// header digests are on.
pub fn put_hdgst(out: &mut Vec<u8>, start: usize, digests: Digests) {
    if digests.header {
        let crc = crc32c(0, out.get(start..).unwrap_or_default());
        out.extend_from_slice(&crc.to_le_bytes());
    }
}

/// CRC-32C as NVMe/TCP's digests use it (initial value 0xFFFFFFFF, final
/// XOR; the value is sent little-endian).
pub fn crc32c(seed: u32, data: &[u8]) -> u32 {
    crate::accel::software::kernels::crc32c_update(seed, data)
}

/// Copies `src` into `dst` and returns [`crc32c`]`(seed, src)`, reading
/// the source once: the accel framework's copy_crc32c kernel, for data
/// that is copied anyway. `None` (nothing copied) when the two are not of
/// one length.
pub fn copy_crc32c(dst: &mut [u8], src: &[u8], seed: u32) -> Option<u32> {
    if dst.len() != src.len() {
        return None;
    }
    // SAFETY: `dst` and `src` are live slices of `src.len()` bytes (checked
    // equal above), and a `&mut` slice cannot overlap a shared one; the
    // borrows keep every other access out until the call returns.
    Some(unsafe {
        crate::accel::software::kernels::Kernels::get().copy_crc32c(
            dst.as_mut_ptr(),
            src.as_ptr(),
            src.len(),
            seed,
        )
    })
}

/// Host PDU Data Alignment: the offset (a multiple of 4, up to 128) at
/// which a host asked data to start in the PDUs the target sends (ICReq
/// HPDA, 0's based in units of 4 bytes; NVMe/TCP 3.6.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataAlignment(u8);

impl DataAlignment {
    /// No alignment beyond the header's own (HPDA 0: 4 bytes).
    pub const NONE: DataAlignment = DataAlignment(0);
    /// Most HPDA a host may ask for: 128-byte alignment.
    pub const MAX_HPDA: u8 = 31;

    /// The alignment of ICReq's HPDA, `None` when it is out of range.
    pub fn from_hpda(hpda: u8) -> Option<DataAlignment> {
        (hpda <= Self::MAX_HPDA).then_some(DataAlignment(hpda))
    }

    /// The data offset of a PDU whose header (and header digest) ends at
    /// `header_end`: rounded up to the alignment.
    #[inline]
    pub fn pdo(self, header_end: usize) -> usize {
        header_end.next_multiple_of((self.0 as usize + 1) * 4)
    }
}

impl Default for DataAlignment {
    fn default() -> Self {
        DataAlignment::NONE
    }
}

/// Appends an ICResp.
pub fn put_ic_resp(out: &mut Vec<u8>, digests: Digests, maxh2cdata: u32) {
    put_ic(out, kind::IC_RESP, digests, 0, maxh2cdata);
}

/// Appends an ICReq asking for `digests`, allowing `maxr2t` (0-based)
/// R2Ts outstanding per command, with HPDA `hpda` (data in the target's
/// PDUs aligned to `(hpda + 1) * 4` bytes).
pub fn put_ic_req(out: &mut Vec<u8>, digests: Digests, hpda: u8, maxr2t: u32) {
    put_ic(out, kind::IC_REQ, digests, hpda, maxr2t);
}

/// Appends an ICReq or ICResp (the same layout): PFV 0, HPDA (ICReq) or
/// CPDA (ICResp: 0, data right after the header), the digests, then
/// MAXR2T or MAXH2CDATA.
fn put_ic(out: &mut Vec<u8>, kind: u8, digests: Digests, pda: u8, limit: u32) {
    let start = out.len();
    put_common(out, kind, 0, IC_HLEN, 0, IC_HLEN);
    out.extend_from_slice(&0u16.to_le_bytes()); // PFV 0
    out.push(pda);
    out.push(digests.header as u8 | (digests.data as u8) << 1);
    out.extend_from_slice(&limit.to_le_bytes());
    out.resize(start + IC_HLEN, 0);
}

/// Appends a response capsule carrying `cqe`.
pub fn put_capsule_resp(out: &mut Vec<u8>, cqe: &[u8; 16], digests: Digests) {
    let start = out.len();
    let hd = if digests.header { 4 } else { 0 };
    let flags = if digests.header { flags::HDGSTF } else { 0 };
    put_common(
        out,
        kind::CAPSULE_RESP,
        flags,
        CAPSULE_RESP_HLEN,
        0,
        CAPSULE_RESP_HLEN + hd,
    );
    out.extend_from_slice(cqe);
    put_hdgst(out, start, digests);
}

/// Appends a C2HData header for `len` bytes at `offset` of command
/// `cccid`'s data, with `end`: 0, [`flags::LAST_PDU`], or that and
/// [`flags::SUCCESS`] (no response capsule follows), its data starting at
/// the offset `align` asks (zeroes pad the header to it); the data (and
/// its digest) follow it.
pub fn put_c2h_data(
    out: &mut Vec<u8>,
    cccid: u16,
    offset: u32,
    len: u32,
    end: u8,
    digests: Digests,
    align: DataAlignment,
) {
    put_data_header(
        out,
        kind::C2H_DATA,
        (cccid, 0),
        (offset, len),
        end,
        digests,
        align,
    );
}

/// Appends the header of a data PDU, C2HData or H2CData (`kind`: the
/// same layout), for `len` bytes at `offset` of command `cccid`'s data,
/// with the transfer tag `ttag` (an H2CData's is its R2T's; 0 in a
/// C2HData) and the flags in `end` ([`flags::LAST_PDU`], and
/// [`flags::SUCCESS`] on a C2HData), its data starting where `align`
/// asks; the data (and its digest) follow it.
pub fn put_data_header(
    out: &mut Vec<u8>,
    kind: u8,
    (cccid, ttag): (u16, u16),
    (offset, len): (u32, u32),
    end: u8,
    digests: Digests,
    align: DataAlignment,
) {
    let start = out.len();
    let hd = if digests.header { 4 } else { 0 };
    let dd = if digests.data { 4 } else { 0 };
    let mut f = end & (flags::LAST_PDU | flags::SUCCESS);
    if digests.header {
        f |= flags::HDGSTF;
    }
    if digests.data {
        f |= flags::DDGSTF;
    }
    let pdo = align.pdo(DATA_HLEN + hd);
    put_common(out, kind, f, DATA_HLEN, pdo, pdo + len as usize + dd);
    put_transfer(out, cccid, ttag, offset, len);
    put_hdgst(out, start, digests);
    out.resize(start + pdo, 0);
}

/// Appends the fields after the common header of C2HData, H2CData and
/// R2T: the command, the transfer tag, the data's offset and length.
fn put_transfer(out: &mut Vec<u8>, cccid: u16, ttag: u16, offset: u32, len: u32) {
    out.extend_from_slice(&cccid.to_le_bytes());
    out.extend_from_slice(&ttag.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
}

/// Appends an R2T asking for `len` bytes at `offset` of command `cccid`'s
/// data, to come in H2CData PDUs tagged `ttag`.
pub fn put_r2t(out: &mut Vec<u8>, cccid: u16, ttag: u16, offset: u32, len: u32, digests: Digests) {
    let start = out.len();
    let hd = if digests.header { 4 } else { 0 };
    let f = if digests.header { flags::HDGSTF } else { 0 };
    put_common(out, kind::R2T, f, DATA_HLEN, 0, DATA_HLEN + hd);
    put_transfer(out, cccid, ttag, offset, len);
    put_hdgst(out, start, digests);
}

/// Appends a C2HTermReq for `err`, quoting (at most [`TERM_MAX_DATA`]
/// bytes of) the offending PDU header.
pub fn put_c2h_term_req(out: &mut Vec<u8>, err: &PduError, offending: &[u8]) {
    let quoted = offending.get(..TERM_MAX_DATA).unwrap_or(offending);
    let start = out.len();
    put_common(
        out,
        kind::C2H_TERM_REQ,
        0,
        TERM_HLEN,
        TERM_HLEN,
        TERM_HLEN + quoted.len(),
    );
    out.extend_from_slice(&(err.fes as u16).to_le_bytes());
    out.extend_from_slice(&err.fei.to_le_bytes());
    out.resize(start + TERM_HLEN, 0);
    out.extend_from_slice(quoted);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: u8, hlen: u8, pdo: u8, plen: u32) -> Header {
        Header {
            kind,
            flags: 0,
            hlen,
            pdo,
            plen,
        }
    }

    const LIMITS: PduLimits = PduLimits {
        capsule_data: 8192,
        h2c_data: 128 << 10,
    };

    #[test]
    fn headers_are_checked_against_their_type_and_limits() {
        let none = Digests::default();
        let both = Digests {
            header: true,
            data: true,
        };
        assert_eq!(header(kind::IC_REQ, 128, 0, 128).check(none, LIMITS), Ok(0));
        let ic = header(kind::IC_REQ, 128, 0, 129).check(none, LIMITS);
        assert_eq!(ic.unwrap_err().fei, 4);
        assert_eq!(
            header(kind::CAPSULE_CMD, 72, 0, 72).check(none, LIMITS),
            Ok(0)
        );
        assert_eq!(
            header(kind::CAPSULE_CMD, 72, 72, 72 + 4096).check(none, LIMITS),
            Ok(4096)
        );
        assert_eq!(
            header(kind::CAPSULE_CMD, 72, 76, 76 + 4096 + 4).check(both, LIMITS),
            Ok(4096)
        );
        let bad_hlen = header(kind::CAPSULE_CMD, 70, 0, 70).check(none, LIMITS);
        assert_eq!(
            bad_hlen.map_err(|e| (e.fes, e.fei)),
            Err((Fes::InvalidHeaderField, 2))
        );
        let bad_pdo = header(kind::CAPSULE_CMD, 72, 10, 200).check(none, LIMITS);
        assert_eq!(bad_pdo.unwrap_err().fei, 3);
        let wrong_way = header(kind::C2H_DATA, 24, 24, 100).check(none, LIMITS);
        assert_eq!(wrong_way.unwrap_err().fei, 0);
        assert_eq!(header(kind::H2C_DATA, 24, 0, 24).check(none, LIMITS), Ok(0));
        // Each type's data within its own limit: a capsule's in-capsule
        // size, an H2CData's MAXH2CDATA.
        assert_eq!(
            header(kind::CAPSULE_CMD, 72, 72, 72 + 8192).check(none, LIMITS),
            Ok(8192)
        );
        for (h, d) in [
            (header(kind::CAPSULE_CMD, 72, 72, 72 + 8193), none),
            (header(kind::CAPSULE_CMD, 72, 76, 76 + 8193 + 4), both),
            (header(kind::H2C_DATA, 24, 24, 24 + (128 << 10) + 1), none),
            (header(kind::H2C_DATA, 24, 24, u32::MAX), none),
        ] {
            let e = h.check(d, LIMITS).unwrap_err();
            assert_eq!(e.fes, Fes::DataTransferLimitExceeded, "{h:?}");
        }
        assert_eq!(
            header(kind::H2C_DATA, 24, 24, 24 + (128 << 10)).check(none, LIMITS),
            Ok(128 << 10)
        );
        // An admin queue takes no H2CData.
        let admin = PduLimits {
            capsule_data: 8192,
            h2c_data: 0,
        };
        assert!(
            header(kind::H2C_DATA, 24, 24, 28)
                .check(none, admin)
                .is_err()
        );
    }

    #[test]
    fn the_common_header_needs_its_eight_bytes() {
        assert_eq!(Header::parse(&[4, 0, 72, 0, 72, 0, 0]), None);
        assert_eq!(
            Header::parse(&[4, 1, 72, 76, 72, 1, 0, 0, 9]),
            Some(Header {
                kind: 4,
                flags: 1,
                hlen: 72,
                pdo: 76,
                plen: 72 + 256
            })
        );
    }

    #[test]
    fn the_target_pdus_have_their_layouts() {
        let mut out = Vec::new();
        let hd = Digests {
            header: true,
            data: false,
        };
        put_ic_resp(&mut out, hd, 131072);
        assert_eq!(out.len(), 128);
        assert_eq!(&out[..8], &[1, 0, 128, 0, 128, 0, 0, 0]);
        assert_eq!(out[11], 1);
        assert_eq!(u32::from_le_bytes(out[12..16].try_into().unwrap()), 131072);

        out.clear();
        let none = Digests::default();
        put_c2h_data(
            &mut out,
            7,
            0,
            4096,
            flags::LAST_PDU,
            none,
            DataAlignment::NONE,
        );
        assert_eq!(out.len(), 24);
        assert_eq!(
            Header::parse(&out),
            Some(header(kind::C2H_DATA, 24, 24, 24 + 4096).with_flags(flags::LAST_PDU))
        );
        assert_eq!(u16::from_le_bytes([out[8], out[9]]), 7);

        out.clear();
        put_capsule_resp(&mut out, &[0xAB; 16], hd);
        assert_eq!(out.len(), 28);
        assert_eq!(
            u32::from_le_bytes(out[24..28].try_into().unwrap()),
            crc32c(0, &out[..24])
        );

        out.clear();
        put_c2h_term_req(&mut out, &PduError::field(2, "x"), &[9; 300]);
        assert_eq!(out.len(), 152);
        assert_eq!(u16::from_le_bytes([out[8], out[9]]), 1);
        assert_eq!(u32::from_le_bytes(out[10..14].try_into().unwrap()), 2);
    }

    /// HPDA: a C2HData's data starts at a multiple of `(HPDA + 1) * 4`,
    /// zeroes between its header (and header digest) and its data.
    #[test]
    fn c2h_data_is_aligned_as_the_host_asks() {
        assert_eq!(DataAlignment::from_hpda(32), None);
        let hd = Digests {
            header: true,
            data: true,
        };
        for (hpda, digests, pdo) in [
            (0, Digests::default(), 24),
            (0, hd, 28),
            (1, hd, 32),
            (7, hd, 32),
            (8, hd, 36),
            (31, Digests::default(), 128),
            (31, hd, 128),
        ] {
            let align = DataAlignment::from_hpda(hpda).unwrap();
            let mut out = vec![0xEE];
            put_c2h_data(&mut out, 1, 0, 512, flags::LAST_PDU, digests, align);
            let h = Header::parse(&out[1..]).unwrap();
            assert_eq!((h.pdo as usize, out.len() - 1), (pdo, pdo), "HPDA {hpda}");
            let dd = if digests.data { 4 } else { 0 };
            assert_eq!(h.plen as usize, pdo + 512 + dd);
            let end = 1 + 24 + if digests.header { 4 } else { 0 };
            assert!(out[end..].iter().all(|&b| b == 0));
            if digests.header {
                let want = u32::from_le_bytes(out[25..29].try_into().unwrap());
                assert_eq!(
                    crc32c(0, &out[1..25]),
                    want,
                    "the digest covers the header only"
                );
            }
        }
    }

    #[test]
    fn the_host_pdus_have_their_layouts() {
        let mut out = Vec::new();
        let dd = Digests {
            header: false,
            data: true,
        };
        put_ic_req(&mut out, dd, 31, 3);
        assert_eq!(out.len(), 128);
        assert_eq!(&out[..8], &[0, 0, 128, 0, 128, 0, 0, 0]);
        assert_eq!((out[10], out[11]), (31, 2));
        assert_eq!(u32::from_le_bytes(out[12..16].try_into().unwrap()), 3);

        out.clear();
        let both = Digests {
            header: true,
            data: true,
        };
        let align = DataAlignment::NONE;
        put_data_header(
            &mut out,
            kind::H2C_DATA,
            (7, 9),
            (512, 4096),
            0,
            both,
            align,
        );
        assert_eq!(out.len(), 28);
        assert_eq!(
            Header::parse(&out),
            Some(
                header(kind::H2C_DATA, 24, 28, 28 + 4096 + 4)
                    .with_flags(flags::HDGSTF | flags::DDGSTF)
            )
        );
        assert_eq!(u16::from_le_bytes([out[8], out[9]]), 7);
        assert_eq!(u16::from_le_bytes([out[10], out[11]]), 9);
        assert_eq!(u32::from_le_bytes(out[12..16].try_into().unwrap()), 512);
        assert_eq!(u32::from_le_bytes(out[16..20].try_into().unwrap()), 4096);
        assert_eq!(
            u32::from_le_bytes(out[24..28].try_into().unwrap()),
            crc32c(0, &out[..24])
        );
    }

    #[test]
    fn crc32c_is_the_castagnoli_check_value() {
        assert_eq!(crc32c(0, b"123456789"), 0xE306_9283);
        let mut dst = [0u8; 9];
        assert_eq!(
            copy_crc32c(&mut dst[..4], b"1234", 0),
            Some(crc32c(0, b"1234"))
        );
        assert_eq!(
            copy_crc32c(&mut dst[4..], b"56789", crc32c(0, b"1234")),
            Some(0xE306_9283)
        );
        assert_eq!(&dst, b"123456789");
        assert_eq!(
            copy_crc32c(&mut dst[..3], b"1234", 0),
            None,
            "lengths differ"
        );
    }

    impl Header {
        fn with_flags(mut self, f: u8) -> Header {
            self.flags = f;
            self
        }
    }
}
