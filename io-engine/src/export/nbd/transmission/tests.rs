use super::*;
use crate::export::nbd::testing::malloc_export;
use proptest::prelude::*;

fn export() -> ExportInfo {
    malloc_export()
}

fn read_only() -> ExportInfo {
    ExportInfo {
        read_only: true,
        ..export()
    }
}

fn header(flags: u16, ty: u16, cookie: u64, offset: u64, length: u32) -> Vec<u8> {
    let mut v = REQUEST_MAGIC.to_be_bytes().to_vec();
    v.extend_from_slice(&flags.to_be_bytes());
    v.extend_from_slice(&ty.to_be_bytes());
    v.extend_from_slice(&cookie.to_be_bytes());
    v.extend_from_slice(&offset.to_be_bytes());
    v.extend_from_slice(&length.to_be_bytes());
    v
}

fn req(kind: Command, flags: u16, offset: u64, length: u32) -> Request {
    Request {
        flags,
        kind,
        cookie: 1,
        offset,
        length,
    }
}

#[test]
fn every_error_value_has_a_short_message() {
    for errno in [
        EPERM, EIO, ENOMEM, EINVAL, ENOSPC, EOVERFLOW, ENOTSUP, ESHUTDOWN, 9999,
    ] {
        let m = error_message(errno);
        assert!(!m.is_empty() && m.len() <= 80, "{errno}: {m}");
    }
    assert_eq!(error_message(EPERM), "the export is read-only");
    // The reply carries it: error value, message length, message.
    let mut out = Vec::new();
    put_structured_error(&mut out, 7, EINVAL, error_message(EINVAL), true);
    let m = error_message(EINVAL).as_bytes();
    assert_eq!(&out[20..24], &EINVAL.to_be_bytes());
    assert_eq!(&out[24..26], &(m.len() as u16).to_be_bytes());
    assert_eq!(&out[26..], m);
}

/// Validates with structured replies and a metadata context negotiated.
fn check(r: Request) -> Result<(), u32> {
    validate(&r, &export(), true, true)
}

const SIZED: [Command; 6] = [
    Command::Read,
    Command::Write,
    Command::Trim,
    Command::Cache,
    Command::WriteZeroes,
    Command::BlockStatus,
];

#[test]
fn parses_a_header_in_place() {
    let mut input = header(CMD_FLAG_FUA, CMD_WRITE, 0x0102_0304_0506_0708, 4096, 512);
    input.extend_from_slice(&[0xab; 512]);
    let (r, n) = RequestParser::parse(&input).unwrap().unwrap();
    assert_eq!(n, REQUEST_HEADER_LEN);
    assert_eq!(
        r,
        Request {
            flags: CMD_FLAG_FUA,
            kind: Command::Write,
            cookie: 0x0102_0304_0506_0708,
            offset: 4096,
            length: 512,
        }
    );
    assert_eq!(r.payload_len(), 512);
    assert!(r.has_flag(CMD_FLAG_FUA));
    assert!(!r.has_flag(CMD_FLAG_DF));
}

#[test]
fn only_writes_carry_payload() {
    for code in 0..=9u16 {
        let (r, _) = RequestParser::parse(&header(0, code, 0, 0, 4096))
            .unwrap()
            .unwrap();
        assert_eq!(r.kind.code(), code);
        assert_eq!(r.payload_len(), if code == CMD_WRITE { 4096 } else { 0 });
    }
    let (r, _) = RequestParser::parse(&header(0, 42, 0, 0, 0))
        .unwrap()
        .unwrap();
    assert_eq!(r.kind, Command::Unknown(42));
}

#[test]
fn partial_header_waits() {
    let input = header(0, CMD_READ, 7, 0, 512);
    for len in 0..REQUEST_HEADER_LEN {
        assert_eq!(RequestParser::parse(&input[..len]), Ok(None), "len {len}");
    }
}

#[test]
fn bad_magic_is_seen_after_four_bytes() {
    assert_eq!(RequestParser::parse(&[0x25, 0x60, 0x95]), Ok(None));
    assert_eq!(
        RequestParser::parse(&[0x25, 0x60, 0x95, 0x14]),
        Err(ProtocolError::BadMagic { magic: 0x2560_9514 })
    );
    let mut input = header(0, CMD_READ, 7, 0, 512);
    input[0] = 0x67;
    assert!(matches!(
        RequestParser::parse(&input),
        Err(ProtocolError::BadMagic { .. })
    ));
}

#[test]
fn oversized_write_closes_but_oversized_read_does_not() {
    assert_eq!(
        RequestParser::parse(&header(0, CMD_WRITE, 1, 0, MAX_PAYLOAD + 1)),
        Err(ProtocolError::PayloadTooLarge {
            length: MAX_PAYLOAD + 1
        })
    );
    assert!(
        RequestParser::parse(&header(0, CMD_WRITE, 1, 0, MAX_PAYLOAD))
            .unwrap()
            .is_some()
    );
    let (r, _) = RequestParser::parse(&header(0, CMD_READ, 1, 0, MAX_PAYLOAD + 1))
        .unwrap()
        .unwrap();
    assert_eq!(validate(&r, &export(), true, true), Err(EINVAL));
}

#[test]
fn parses_back_to_back_requests() {
    let mut input = header(0, CMD_WRITE, 1, 0, 4);
    input.extend_from_slice(b"data");
    input.extend(header(0, CMD_FLUSH, 2, 0, 0));
    input.extend(header(0, CMD_DISC, 3, 0, 0));
    let mut pos = 0;
    let mut cookies = Vec::new();
    while let Some((r, n)) = RequestParser::parse(&input[pos..]).unwrap() {
        pos += n + r.payload_len();
        cookies.push(r.cookie);
    }
    assert_eq!(pos, input.len());
    assert_eq!(cookies, [1, 2, 3]);
}

#[test]
fn valid_requests_pass() {
    for kind in SIZED {
        assert_eq!(check(req(kind, 0, 0, 4096)), Ok(()), "{kind:?}");
        assert_eq!(
            check(req(kind, 0, (1 << 20) - 512, 512)),
            Ok(()),
            "{kind:?} at the end"
        );
    }
    assert_eq!(check(req(Command::Flush, 0, 0, 0)), Ok(()));
    assert_eq!(check(req(Command::Disc, 0, 0, 0)), Ok(()));
    // DISC is never answered, whatever it carries.
    assert_eq!(check(req(Command::Disc, 0xffff, 1, 1)), Ok(()));
}

#[test]
fn unknown_command_is_einval() {
    for code in [8u16, 9, 0xffff] {
        assert_eq!(check(req(Command::Unknown(code), 0, 0, 512)), Err(EINVAL));
    }
}

#[test]
fn unknown_flag_bits_are_einval() {
    for bit in 5..16 {
        for kind in SIZED {
            assert_eq!(
                check(req(kind, 1 << bit, 0, 512)),
                Err(EINVAL),
                "{kind:?} bit {bit}"
            );
        }
    }
}

#[test]
fn fua_is_accepted_on_every_command() {
    for kind in SIZED {
        assert_eq!(check(req(kind, CMD_FLAG_FUA, 0, 512)), Ok(()), "{kind:?}");
    }
    assert_eq!(check(req(Command::Flush, CMD_FLAG_FUA, 0, 0)), Ok(()));
}

#[test]
fn flags_only_where_documented() {
    let cases = [
        (CMD_FLAG_NO_HOLE, Command::WriteZeroes),
        (CMD_FLAG_FAST_ZERO, Command::WriteZeroes),
        (CMD_FLAG_DF, Command::Read),
        (CMD_FLAG_REQ_ONE, Command::BlockStatus),
    ];
    for (flag, home) in cases {
        for kind in SIZED {
            let want = if kind == home { Ok(()) } else { Err(EINVAL) };
            assert_eq!(
                check(req(kind, flag, 0, 512)),
                want,
                "{flag:#x} on {kind:?}"
            );
        }
        assert_eq!(check(req(Command::Flush, flag, 0, 0)), Err(EINVAL));
    }
    // All of WRITE_ZEROES' flags at once.
    let all = CMD_FLAG_FUA | CMD_FLAG_NO_HOLE | CMD_FLAG_FAST_ZERO;
    assert_eq!(check(req(Command::WriteZeroes, all, 0, 512)), Ok(()));
}

#[test]
fn df_needs_structured_replies() {
    let r = req(Command::Read, CMD_FLAG_DF, 0, 512);
    assert_eq!(validate(&r, &export(), false, false), Err(EINVAL));
    assert_eq!(validate(&r, &export(), true, false), Ok(()));
}

#[test]
fn fast_zero_never_enotsup() {
    let r = req(Command::WriteZeroes, CMD_FLAG_FAST_ZERO, 0, 1 << 20);
    assert_eq!(validate(&r, &export(), false, false), Ok(()));
}

#[test]
fn flush_with_offset_or_length_is_einval() {
    assert_eq!(check(req(Command::Flush, 0, 512, 0)), Err(EINVAL));
    assert_eq!(check(req(Command::Flush, 0, 0, 512)), Err(EINVAL));
}

#[test]
fn block_status_needs_a_meta_context() {
    let r = req(Command::BlockStatus, 0, 0, 512);
    assert_eq!(validate(&r, &export(), true, false), Err(EINVAL));
    assert_eq!(validate(&r, &export(), false, false), Err(EINVAL));
    assert_eq!(validate(&r, &export(), false, true), Err(EINVAL));
    assert_eq!(validate(&r, &export(), true, true), Ok(()));
}

#[test]
fn zero_length_is_einval() {
    for kind in SIZED {
        assert_eq!(check(req(kind, 0, 0, 0)), Err(EINVAL), "{kind:?}");
    }
}

#[test]
fn unaligned_is_einval() {
    for kind in SIZED {
        assert_eq!(check(req(kind, 0, 1, 512)), Err(EINVAL), "{kind:?} offset");
        assert_eq!(
            check(req(kind, 0, 512, 511)),
            Err(EINVAL),
            "{kind:?} length"
        );
        assert_eq!(check(req(kind, 0, 0, 513)), Err(EINVAL), "{kind:?} length");
    }
    // A byte-granular export accepts any alignment.
    let e = ExportInfo {
        block_size: 1,
        ..export()
    };
    assert_eq!(
        validate(&req(Command::Read, 0, 3, 7), &e, true, true),
        Ok(())
    );
}

#[test]
fn over_the_maximum_block_size() {
    let e = ExportInfo {
        size: 1 << 30,
        max_payload: 1 << 20,
        ..export()
    };
    let long = (1 << 20) + 512;
    for kind in [Command::Read, Command::Write] {
        assert_eq!(
            validate(&req(kind, 0, 0, long), &e, true, true),
            Err(EINVAL)
        );
        assert_eq!(validate(&req(kind, 0, 0, 1 << 20), &e, true, true), Ok(()));
    }
    // No payload, no cap but the export's end.
    for kind in [
        Command::Trim,
        Command::Cache,
        Command::WriteZeroes,
        Command::BlockStatus,
    ] {
        assert_eq!(
            validate(&req(kind, 0, 0, long), &e, true, true),
            Ok(()),
            "{kind:?}"
        );
    }
    // READ beyond MAX_PAYLOAD is EINVAL even on a huge export.
    let big = ExportInfo {
        size: u64::MAX - 511,
        max_payload: u32::MAX,
        ..export()
    };
    let r = req(Command::Read, 0, 0, MAX_PAYLOAD + 512);
    assert_eq!(validate(&r, &big, true, true), Err(EINVAL));
    let r = req(Command::Read, CMD_FLAG_DF, 0, MAX_PAYLOAD);
    assert_eq!(validate(&r, &big, true, true), Ok(()));
}

#[test]
fn past_the_end() {
    let end = 1u64 << 20;
    let cases = [
        (Command::Read, EINVAL),
        (Command::Write, ENOSPC),
        (Command::Trim, EINVAL),
        (Command::Cache, EINVAL),
        (Command::WriteZeroes, ENOSPC),
        (Command::BlockStatus, EINVAL),
    ];
    for (kind, errno) in cases {
        assert_eq!(check(req(kind, 0, end, 512)), Err(errno), "{kind:?} at end");
        assert_eq!(
            check(req(kind, 0, end - 512, 1024)),
            Err(errno),
            "{kind:?} across end"
        );
        // offset + length overflows u64.
        assert_eq!(
            check(req(kind, 0, u64::MAX - 511, 1024)),
            Err(errno),
            "{kind:?} wrap"
        );
    }
}

#[test]
fn writes_on_a_read_only_export_are_eperm() {
    let ro = read_only();
    for kind in [Command::Write, Command::Trim, Command::WriteZeroes] {
        assert_eq!(
            validate(&req(kind, 0, 0, 512), &ro, true, true),
            Err(EPERM),
            "{kind:?}"
        );
    }
    for kind in [Command::Read, Command::Cache, Command::BlockStatus] {
        assert_eq!(
            validate(&req(kind, 0, 0, 512), &ro, true, true),
            Ok(()),
            "{kind:?}"
        );
    }
    assert_eq!(
        validate(&req(Command::Flush, 0, 0, 0), &ro, true, true),
        Ok(())
    );
    let fz = req(Command::WriteZeroes, CMD_FLAG_FAST_ZERO, 0, 512);
    assert_eq!(validate(&fz, &ro, true, true), Err(EPERM));
}

#[test]
fn errno_order_when_several_apply() {
    let ro = read_only();
    let end = 1u64 << 20;
    // Unknown flag beats everything else.
    assert_eq!(
        validate(&req(Command::Write, 1 << 9, end + 1, 0), &ro, true, true),
        Err(EINVAL)
    );
    // No meta context beats zero length and range.
    assert_eq!(
        validate(&req(Command::BlockStatus, 0, end, 0), &ro, true, false),
        Err(EINVAL)
    );
    // Misaligned beats read-only and past-the-end.
    assert_eq!(
        validate(&req(Command::Write, 0, end + 1, 512), &ro, true, true),
        Err(EINVAL)
    );
    // Too long beats read-only.
    let r = req(Command::Write, 0, 0, MAX_PAYLOAD + 512);
    assert_eq!(validate(&r, &ro, true, true), Err(EINVAL));
    // Read-only beats past-the-end (EPERM, not ENOSPC).
    assert_eq!(
        validate(&req(Command::Write, 0, end, 512), &ro, true, true),
        Err(EPERM)
    );
    assert_eq!(
        validate(&req(Command::WriteZeroes, 0, end, 512), &ro, true, true),
        Err(EPERM)
    );
    // Zero length beats past-the-end.
    assert_eq!(check(req(Command::Write, 0, end + 512, 0)), Err(EINVAL));
}

proptest! {
    #[test]
    fn arbitrary_input_never_panics(
        input in proptest::collection::vec(any::<u8>(), 0..1024),
        structured in any::<bool>(),
        meta in any::<bool>(),
    ) {
        let e = export();
        let mut pos = 0;
        while pos < input.len() {
            match RequestParser::parse(&input[pos..]) {
                Ok(Some((r, n))) => {
                    prop_assert!(n <= input.len() - pos);
                    let _ = validate(&r, &e, structured, meta);
                    pos += n;
                    pos = pos.saturating_add(r.payload_len()).min(input.len());
                }
                Ok(None) | Err(_) => break,
            }
        }
    }

    #[test]
    fn arbitrary_headers_validate_consistently(
        flags in any::<u16>(),
        ty in 0u16..10,
        offset in any::<u64>(),
        length in any::<u32>(),
        structured in any::<bool>(),
        meta in any::<bool>(),
        read_only in any::<bool>(),
    ) {
        let e = ExportInfo { read_only, ..export() };
        match RequestParser::parse(&header(flags, ty, 9, offset, length)) {
            Ok(Some((r, n))) => {
                prop_assert_eq!(n, REQUEST_HEADER_LEN);
                prop_assert_eq!((r.flags, r.kind.code(), r.cookie, r.offset, r.length),
                                (flags, ty, 9, offset, length));
                if validate(&r, &e, structured, meta).is_ok() && r.kind != Command::Disc
                    && r.kind != Command::Flush
                {
                    // Whatever passes lies inside the export, aligned.
                    prop_assert!(r.length > 0);
                    prop_assert!(offset + u64::from(length) <= e.size);
                    prop_assert_eq!(offset % 512, 0);
                    prop_assert_eq!(length % 512, 0);
                }
            }
            Ok(None) => prop_assert!(false, "a whole header"),
            Err(ProtocolError::PayloadTooLarge { length: l }) => {
                prop_assert_eq!(ty, CMD_WRITE);
                prop_assert!(l > MAX_PAYLOAD);
            }
            Err(ProtocolError::BadMagic { .. }) => prop_assert!(false, "magic was right"),
        }
    }
}
