//! Fuzzes the NVMe/TCP target's PDU header checks and command decoding:
//! arbitrary host bytes as a stream of PDUs.
//!
//! Thread: libFuzzer's; the checks are pure code, no IO.
//!
//! The stream is cut into PDUs the way a connection cuts it: the common
//! header, checked (`Header::check`) with and without digests against the
//! connection's largest PDU, then the whole PDU. Whatever the check
//! accepts must lie inside the PDU (its data after the header and any
//! digest); a capsule's command decodes without a panic; a refusal is
//! answered with a C2HTermReq quoting the header, of bounded size.

#![no_main]

use io_engine::export::nvmf::Command;
use io_engine::export::nvmf::pdu::{self, Digests, Header, kind};
use libfuzzer_sys::fuzz_target;

/// The connection's largest PDU (an H2CData of 128 KiB with digests).
const MAX_PLEN: u32 = (pdu::DATA_HLEN + 8 + (128 << 10)) as u32;

fuzz_target!(|data: &[u8]| {
    for digests in [
        Digests::default(),
        Digests {
            header: true,
            data: true,
        },
    ] {
        let mut pos = 0;
        let mut out = Vec::with_capacity(256);
        while data.len() - pos >= pdu::COMMON_HEADER {
            let b = &data[pos..];
            let h = Header::parse(b);
            match h.check(digests, MAX_PLEN) {
                Ok(len) => {
                    let plen = h.plen as usize;
                    assert!(plen <= MAX_PLEN as usize);
                    assert!(h.hlen as usize + len <= plen);
                    if h.pdo != 0 {
                        assert!(h.pdo as usize + len <= plen);
                        assert!(h.pdo >= h.hlen);
                    } else {
                        assert_eq!(
                            len,
                            if h.kind == kind::H2C_TERM_REQ {
                                plen - h.hlen as usize
                            } else {
                                0
                            }
                        );
                    }
                    if b.len() < plen {
                        break;
                    }
                    if h.kind == kind::CAPSULE_CMD {
                        let c = Command::from_slice(&b[pdu::COMMON_HEADER..]);
                        let _ = (c.opcode(), c.cid(), c.nsid(), c.sgl(), c.slba(), c.nlb());
                        let _ = (c.connect_qid(), c.connect_sqsize(), c.connect_kato());
                        assert!(c.nlb() >= 1 && c.nlb() <= 65536);
                    }
                    pos += plen;
                }
                Err(e) => {
                    out.clear();
                    let quoted = &b[..b.len().min(h.hlen as usize)];
                    pdu::put_c2h_term_req(&mut out, &e, quoted);
                    assert!(out.len() <= 152);
                    assert_eq!(out[0], kind::C2H_TERM_REQ);
                    break;
                }
            }
        }
    }
});
