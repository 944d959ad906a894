//! Fuzzes NBD transmission-phase parsing and validation: arbitrary client
//! bytes as a stream of requests.
//!
//! Thread: libFuzzer's; the parser and `validate` are pure code, no IO.
//!
//! The stream is parsed the way a connection would: header, then a WRITE's
//! payload, until the input runs out or a fatal `ProtocolError`. Each
//! request is validated against a writable and a read-only export under
//! every combination of negotiated features, and answered into a reused
//! buffer with the reply encoders. Whatever `validate` accepts must lie
//! inside the export, be aligned, and (for a READ) fit one reply chunk.

#![no_main]

use io_engine::export::nbd::ExportInfo;
use io_engine::export::nbd::proto::{self, MAX_PAYLOAD, REQUEST_HEADER_LEN};
use io_engine::export::nbd::testing::{malloc_export, null_export};
use io_engine::export::nbd::transmission::{Command, ProtocolError, RequestParser, validate};
use libfuzzer_sys::fuzz_target;

fn exports() -> [ExportInfo; 2] {
    [malloc_export(), null_export()]
}

fuzz_target!(|data: &[u8]| {
    let exports = exports();
    let mut out = Vec::with_capacity(256);
    let mut pos = 0;
    while pos < data.len() {
        let (req, n) = match RequestParser::parse(&data[pos..]) {
            Ok(Some(parsed)) => parsed,
            Ok(None) => break,
            Err(ProtocolError::PayloadTooLarge { length }) => {
                assert!(length > MAX_PAYLOAD);
                break;
            }
            Err(ProtocolError::BadMagic { .. }) => break,
        };
        assert_eq!(n, REQUEST_HEADER_LEN);
        assert!(n <= data.len() - pos);
        pos += n;

        for export in &exports {
            for structured in [false, true] {
                for block_status in [false, true] {
                    out.clear();
                    match validate(&req, export, structured, block_status) {
                        Err(errno) => {
                            assert!(errno != 0);
                            if structured {
                                proto::put_structured_error(
                                    &mut out, req.cookie, errno, "refused", true,
                                );
                            } else {
                                proto::put_simple_reply(&mut out, req.cookie, errno);
                            }
                        }
                        Ok(()) if matches!(req.kind, Command::Disc | Command::Flush) => {
                            proto::put_simple_reply(&mut out, req.cookie, 0);
                        }
                        Ok(()) => {
                            let limits = export.block_limits();
                            let end = req.offset.checked_add(u64::from(req.length));
                            assert!(req.length > 0);
                            assert!(end.is_some_and(|end| end <= export.size));
                            assert_eq!(req.offset % u64::from(limits.minimum), 0);
                            assert_eq!(req.length % limits.minimum, 0);
                            match req.kind {
                                Command::Read => {
                                    assert!(req.length <= limits.maximum);
                                    if structured {
                                        proto::put_offset_data_header(
                                            &mut out, req.cookie, req.offset, req.length, true,
                                        );
                                        assert_eq!(out.len(), 28);
                                    } else {
                                        proto::put_simple_reply(&mut out, req.cookie, 0);
                                    }
                                }
                                Command::BlockStatus => {
                                    assert!(structured && block_status);
                                    let flags = export.data_kind.block_status_flags();
                                    proto::put_block_status(
                                        &mut out,
                                        req.cookie,
                                        1,
                                        &[(req.length, flags)],
                                        true,
                                    );
                                }
                                Command::Write | Command::Trim | Command::WriteZeroes => {
                                    assert!(!export.read_only);
                                    proto::put_structured_none_done(&mut out, req.cookie);
                                }
                                _ => proto::put_structured_none_done(&mut out, req.cookie),
                            }
                        }
                    }
                }
            }
        }

        let payload = req.payload_len();
        if payload > data.len() - pos {
            break;
        }
        pos += payload;
    }
});
