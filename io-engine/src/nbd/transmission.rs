//! The NBD transmission phase, sans IO: parse request headers in place and
//! check each request against the export and what was negotiated, yielding
//! the error value the spec asks for.
//!
//! Thread: the reactor that owns the connection; pure code, no IO.
//!
//! [`RequestParser::parse`] reads one 28-byte request header from the front
//! of the connection's input buffer, copying nothing and allocating
//! nothing; a WRITE's payload ([`Request::payload_len`] bytes) follows the
//! header and stays in the caller's buffer. [`validate`] then decides
//! whether the request may run; on `Err(errno)` the connection replies with
//! that error (skipping a WRITE's payload) and carries on.
//!
//! Two things close the connection instead ([`ProtocolError`]): a header
//! without the request magic (the stream can no longer be framed), and a
//! WRITE whose payload exceeds [`MAX_PAYLOAD`] (the spec lets the server
//! treat that as a denial of service rather than buffer it).

use thiserror::Error;

use super::handshake::ExportInfo;
use super::proto::*;

/// A transmission request type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// `CMD_READ`.
    Read,
    /// `CMD_WRITE`: the header is followed by `length` bytes.
    Write,
    /// `CMD_DISC`: finish in-flight requests, then close; no reply.
    Disc,
    /// `CMD_FLUSH`.
    Flush,
    /// `CMD_TRIM`.
    Trim,
    /// `CMD_CACHE`.
    Cache,
    /// `CMD_WRITE_ZEROES`.
    WriteZeroes,
    /// `CMD_BLOCK_STATUS`.
    BlockStatus,
    /// Any other type (answered with `EINVAL`; assumed to carry no payload).
    Unknown(u16),
}

impl Command {
    /// The command for a wire type.
    pub const fn from_code(code: u16) -> Self {
        match code {
            CMD_READ => Command::Read,
            CMD_WRITE => Command::Write,
            CMD_DISC => Command::Disc,
            CMD_FLUSH => Command::Flush,
            CMD_TRIM => Command::Trim,
            CMD_CACHE => Command::Cache,
            CMD_WRITE_ZEROES => Command::WriteZeroes,
            CMD_BLOCK_STATUS => Command::BlockStatus,
            other => Command::Unknown(other),
        }
    }

    /// The wire type of this command.
    pub const fn code(self) -> u16 {
        match self {
            Command::Read => CMD_READ,
            Command::Write => CMD_WRITE,
            Command::Disc => CMD_DISC,
            Command::Flush => CMD_FLUSH,
            Command::Trim => CMD_TRIM,
            Command::Cache => CMD_CACHE,
            Command::WriteZeroes => CMD_WRITE_ZEROES,
            Command::BlockStatus => CMD_BLOCK_STATUS,
            Command::Unknown(code) => code,
        }
    }

    /// The command flags the spec documents for this command (`FUA` is
    /// valid on every command once `SEND_FUA` is advertised, which it
    /// always is here; `DF` needs structured replies).
    pub const fn allowed_flags(self, structured_replies: bool) -> u16 {
        match self {
            Command::Read if structured_replies => CMD_FLAG_FUA | CMD_FLAG_DF,
            Command::WriteZeroes => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE | CMD_FLAG_FAST_ZERO,
            Command::BlockStatus => CMD_FLAG_FUA | CMD_FLAG_REQ_ONE,
            Command::Unknown(_) => 0,
            _ => CMD_FLAG_FUA,
        }
    }
}

/// One parsed request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Command flags (`CMD_FLAG_*`).
    pub flags: u16,
    /// The command.
    pub kind: Command,
    /// The client's cookie (handle), echoed in every reply.
    pub cookie: u64,
    /// Byte offset into the export.
    pub offset: u64,
    /// Length in bytes.
    pub length: u32,
}

impl Request {
    /// Bytes of payload that follow this header: `length` for a WRITE, 0
    /// otherwise. The connection must consume them even when [`validate`]
    /// refuses the request.
    pub const fn payload_len(&self) -> usize {
        match self.kind {
            Command::Write => self.length as usize,
            _ => 0,
        }
    }

    /// Whether `flag` (a `CMD_FLAG_*`) is set.
    pub const fn has_flag(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// A request the connection cannot survive: close it.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum ProtocolError {
    /// The header does not start with `REQUEST_MAGIC`.
    #[error("request magic {magic:#010x} is not NBD_REQUEST_MAGIC")]
    BadMagic {
        /// The four bytes found instead.
        magic: u32,
    },
    /// A WRITE announces more payload than [`MAX_PAYLOAD`].
    #[error("write payload of {length} bytes exceeds the {MAX_PAYLOAD}-byte limit")]
    PayloadTooLarge {
        /// The announced length.
        length: u32,
    },
}

/// Parses request headers; stateless (a connection needs no parser state
/// between requests beyond its input buffer).
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestParser;

impl RequestParser {
    /// Parses the request header at the front of `input`.
    ///
    /// `Ok(None)`: fewer than [`REQUEST_HEADER_LEN`] bytes; wait for more.
    /// `Ok(Some((request, n)))`: `n` (always [`REQUEST_HEADER_LEN`]) header
    /// bytes were used; a WRITE's payload follows them. The magic is checked
    /// as soon as 4 bytes are there.
    pub fn parse(input: &[u8]) -> Result<Option<(Request, usize)>, ProtocolError> {
        if input.len() >= 4 {
            let magic = u32::from_be_bytes([input[0], input[1], input[2], input[3]]);
            if magic != REQUEST_MAGIC {
                return Err(ProtocolError::BadMagic { magic });
            }
        }
        let Some(h) = input.first_chunk::<REQUEST_HEADER_LEN>() else {
            return Ok(None);
        };
        let flags = u16::from_be_bytes([h[4], h[5]]);
        let kind = Command::from_code(u16::from_be_bytes([h[6], h[7]]));
        let cookie = u64::from_be_bytes([h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]]);
        let offset = u64::from_be_bytes([h[16], h[17], h[18], h[19], h[20], h[21], h[22], h[23]]);
        let length = u32::from_be_bytes([h[24], h[25], h[26], h[27]]);
        if kind == Command::Write && length > MAX_PAYLOAD {
            return Err(ProtocolError::PayloadTooLarge { length });
        }
        Ok(Some((
            Request {
                flags,
                kind,
                cookie,
                offset,
                length,
            },
            REQUEST_HEADER_LEN,
        )))
    }
}

/// Checks `req` against `export` and the negotiated features;
/// `Err(errno)` is the error value to reply with.
///
/// `structured_replies` and `block_status` are what the option phase
/// negotiated (`Outcome::Transmission`'s `structured_replies`, and whether
/// `meta_context_base_allocation` is `Some`).
///
/// The spec names the errors but not their order when several apply; the
/// checks run in this order, the first failure wins:
/// 1. unknown command: `EINVAL` (a DISC is always accepted: it has no reply);
/// 2. a flag not documented for the command (`DF` only on READ with
///    structured replies, `REQ_ONE` only on BLOCK_STATUS, `NO_HOLE` and
///    `FAST_ZERO` only on WRITE_ZEROES; `FUA` everywhere): `EINVAL`;
/// 3. FLUSH with a non-zero offset or length: `EINVAL` (else FLUSH is fine);
/// 4. BLOCK_STATUS without a negotiated metadata context: `EINVAL`;
/// 5. length 0 (the spec leaves it unspecified; we refuse it): `EINVAL`;
/// 6. offset or length not a multiple of the minimum block size: `EINVAL`;
/// 7. READ or WRITE longer than the advertised maximum block size (at most
///    [`MAX_PAYLOAD`]): `EINVAL` — the spec reserves `EOVERFLOW` for a DF
///    read that cannot be sent unfragmented, which cannot happen here since
///    any accepted read fits one chunk;
/// 8. WRITE, TRIM or WRITE_ZEROES on a read-only export: `EPERM` (before the
///    range check: the export refuses writes wherever they land);
/// 9. past the end of the export: `ENOSPC` for WRITE and WRITE_ZEROES,
///    `EINVAL` for READ, TRIM, CACHE and BLOCK_STATUS.
///
/// TRIM, WRITE_ZEROES, CACHE and BLOCK_STATUS carry no payload, so their
/// length is bounded only by the export's size. `FAST_ZERO` never yields
/// `ENOTSUP`: zeroing is always fast here.
pub fn validate(
    req: &Request,
    export: &ExportInfo,
    structured_replies: bool,
    block_status: bool,
) -> Result<(), u32> {
    match req.kind {
        Command::Unknown(_) => return Err(EINVAL),
        Command::Disc => return Ok(()),
        _ => {}
    }
    if req.flags & !req.kind.allowed_flags(structured_replies) != 0 {
        return Err(EINVAL);
    }
    match req.kind {
        Command::Flush => {
            return if req.offset == 0 && req.length == 0 {
                Ok(())
            } else {
                Err(EINVAL)
            };
        }
        Command::BlockStatus if !(block_status && structured_replies) => return Err(EINVAL),
        _ => {}
    }
    if req.length == 0 {
        return Err(EINVAL);
    }
    let limits = export.block_limits();
    let minimum = u64::from(limits.minimum);
    if !req.offset.is_multiple_of(minimum) || !u64::from(req.length).is_multiple_of(minimum) {
        return Err(EINVAL);
    }
    let writes = matches!(
        req.kind,
        Command::Write | Command::Trim | Command::WriteZeroes
    );
    if matches!(req.kind, Command::Read | Command::Write) && req.length > limits.maximum {
        return Err(EINVAL);
    }
    if writes && export.read_only {
        return Err(EPERM);
    }
    let in_range = req
        .offset
        .checked_add(u64::from(req.length))
        .is_some_and(|end| end <= export.size);
    if !in_range {
        return Err(match req.kind {
            Command::Write | Command::WriteZeroes => ENOSPC,
            _ => EINVAL,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nbd::handshake::Allocation;
    use proptest::prelude::*;

    fn export() -> ExportInfo {
        ExportInfo {
            name: "disk0".into(),
            description: String::new(),
            size: 1 << 20,
            read_only: false,
            block_size: 512,
            preferred: 4096,
            max_payload: MAX_PAYLOAD,
            can_multi_conn: true,
            data_kind: Allocation::Data,
        }
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
}
