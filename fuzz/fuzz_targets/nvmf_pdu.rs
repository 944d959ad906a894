//! Fuzzes the NVMe/TCP target's PDU header checks and command decoding:
//! arbitrary host bytes as a stream of PDUs.
//!
//! Thread: libFuzzer's; the checks are pure code, no IO.
//!
//! The stream is cut into PDUs the way a connection cuts it: the common
//! header, checked (`Header::check`) with and without digests against the
//! limits of an admin and of an I/O queue, then the whole PDU. Whatever
//! the check accepts must lie inside the PDU (its data after the header
//! and any digest) and within its type's limit; a capsule's command
//! decodes without a panic; a refusal is answered with a C2HTermReq
//! quoting the header, of bounded size.

#![no_main]

use io_engine::export::nvmf::pdu::{self, Digests, Header, PduLimits, kind};
use io_engine::export::nvmf::{Command, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    for (digests, io) in [
        (Digests::default(), true),
        (
            Digests {
                header: true,
                data: true,
            },
            true,
        ),
        (Digests::default(), false),
    ] {
        let pdu_limits: PduLimits = limits.pdu_limits(io);
        let max_data = pdu_limits.capsule_data.max(pdu_limits.h2c_data);
        let mut pos = 0;
        let mut out = Vec::with_capacity(256);
        while data.len() - pos >= pdu::COMMON_HEADER {
            let b = &data[pos..];
            let h = Header::parse(b).expect("8 bytes are there");
            match h.check(digests, pdu_limits) {
                Ok(len) => {
                    let plen = h.plen as usize;
                    assert!(len <= max_data.max(pdu::TERM_MAX_DATA));
                    assert!(plen <= 255 + max_data + 8);
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
                        let c = Command::from_slice(&b[pdu::COMMON_HEADER..]).expect("a command");
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
