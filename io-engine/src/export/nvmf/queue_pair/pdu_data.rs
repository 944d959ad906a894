//! The data of the PDU being handled: the part of it in the input, its
//! whole length, and its digest when data digests are on and it is here.
//!
//! Thread: the queue's reactor (a view into its input).

use crate::export::nvmf::pdu::{self, Digests, Header};

/// A PDU's data.
#[derive(Clone, Copy)]
pub(crate) struct PduData<'a> {
    pub here: &'a [u8],
    pub len: usize,
    pub digest: Option<u32>,
}

impl<'a> PduData<'a> {
    /// The data of the PDU whose bytes so far are `b` (all of them once
    /// `b` is as long as PLEN), `len` bytes long (as the header check
    /// found).
    pub fn of(d: Digests, hdr: &Header, b: &'a [u8], len: usize) -> PduData<'a> {
        if hdr.pdo == 0 {
            return PduData {
                here: &[],
                len: 0,
                digest: None,
            };
        }
        let at = hdr.pdo as usize;
        let rest = b.get(at..).unwrap_or_default();
        let here = rest.get(..len).unwrap_or(rest);
        let digest = if d.data {
            rest.get(len..)
                .and_then(|t| t.first_chunk::<4>())
                .map(|c| u32::from_le_bytes(*c))
        } else {
            None
        };
        PduData { here, len, digest }
    }

    /// Whether all of it is here.
    pub fn complete(&self) -> bool {
        self.here.len() == self.len
    }

    /// Whether the digest (if any) matches the data (which is all here).
    pub fn digest_ok(&self) -> bool {
        self.digest
            .is_none_or(|want| pdu::crc32c(0, self.here) == want)
    }
}
