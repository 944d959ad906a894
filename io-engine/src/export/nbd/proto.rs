//! NBD wire constants and big-endian reply encoders (`doc/proto.md` of the
//! NetworkBlockDevice/nbd project).
//!
//! Thread: the reactor that owns the connection; pure code, no IO.
//!
//! Every number the option phase ([`super::handshake`]) and the
//! transmission phase ([`super::transmission`]) put on the wire lives here,
//! named as in the spec without the `NBD_` prefix. The `put_*` helpers append
//! one message (or one message header) to a caller-owned `Vec<u8>`, so a
//! connection can reuse a single output buffer and allocate nothing per
//! request once that buffer has grown to its working size.

// ---------------------------------------------------------------------------
// Magics
// ---------------------------------------------------------------------------

/// `NBDMAGIC`, the first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: follows [`NBDMAGIC`] in the greeting and starts every option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of every option reply (fixed newstyle).
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of a transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic of a structured reply chunk.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// ---------------------------------------------------------------------------
// Handshake flags (server, u16) and client flags (u32)
// ---------------------------------------------------------------------------

/// Handshake flag: the server speaks fixed newstyle.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: the server can omit the 124 zero bytes after `EXPORT_NAME`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag: the client speaks fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: do not send the 124 zero bytes after `EXPORT_NAME`.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;
/// Every client flag this server knows; any other bit drops the connection.
pub const KNOWN_CLIENT_FLAGS: u32 = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;

// ---------------------------------------------------------------------------
// Transmission flags (u16)
// ---------------------------------------------------------------------------

/// Always set.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
/// The export is read-only: writes fail with [`EPERM`].
pub const FLAG_READ_ONLY: u16 = 1 << 1;
/// `CMD_FLUSH` is supported.
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
/// `CMD_FLAG_FUA` is supported.
pub const FLAG_SEND_FUA: u16 = 1 << 3;
/// The export behaves like a rotational medium.
pub const FLAG_ROTATIONAL: u16 = 1 << 4;
/// `CMD_TRIM` is supported.
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
/// `CMD_WRITE_ZEROES` (and `CMD_FLAG_NO_HOLE`) are supported.
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// `CMD_FLAG_DF` is supported on reads (only with structured replies).
pub const FLAG_SEND_DF: u16 = 1 << 7;
/// Flush and FUA are visible across every connection to the export.
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;
/// Experimental `RESIZE` extension (never set here).
pub const FLAG_SEND_RESIZE: u16 = 1 << 9;
/// `CMD_CACHE` is supported.
pub const FLAG_SEND_CACHE: u16 = 1 << 10;
/// `CMD_FLAG_FAST_ZERO` is supported on write-zeroes.
pub const FLAG_SEND_FAST_ZERO: u16 = 1 << 11;

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

/// Choose an export and enter transmission (no error reply possible).
pub const OPT_EXPORT_NAME: u32 = 1;
/// Soft disconnect during the option phase.
pub const OPT_ABORT: u32 = 2;
/// List the exports.
pub const OPT_LIST: u32 = 3;
/// Withdrawn `PEEK_EXPORT` extension (answered with `ERR_UNSUP`).
pub const OPT_PEEK_EXPORT: u32 = 4;
/// Upgrade the session to TLS.
pub const OPT_STARTTLS: u32 = 5;
/// Describe an export without entering transmission.
pub const OPT_INFO: u32 = 6;
/// Describe an export and enter transmission.
pub const OPT_GO: u32 = 7;
/// Negotiate structured replies.
pub const OPT_STRUCTURED_REPLY: u32 = 8;
/// List metadata contexts.
pub const OPT_LIST_META_CONTEXT: u32 = 9;
/// Select metadata contexts for `CMD_BLOCK_STATUS`.
pub const OPT_SET_META_CONTEXT: u32 = 10;
/// Extended headers (64-bit lengths); not supported, answered `ERR_UNSUP`.
pub const OPT_EXTENDED_HEADERS: u32 = 11;

// ---------------------------------------------------------------------------
// Option reply types
// ---------------------------------------------------------------------------

/// The option succeeded (or a list is complete).
pub const REP_ACK: u32 = 1;
/// One export of an `OPT_LIST` answer.
pub const REP_SERVER: u32 = 2;
/// One information item of an `OPT_INFO`/`OPT_GO` answer.
pub const REP_INFO: u32 = 3;
/// One metadata context.
pub const REP_META_CONTEXT: u32 = 4;
/// Bit 31 marks an error reply.
pub const REP_FLAG_ERROR: u32 = 1 << 31;
/// Unknown option.
pub const REP_ERR_UNSUP: u32 = REP_FLAG_ERROR | 1;
/// Forbidden by server policy.
pub const REP_ERR_POLICY: u32 = REP_FLAG_ERROR | 2;
/// Syntactically or semantically invalid option.
pub const REP_ERR_INVALID: u32 = REP_FLAG_ERROR | 3;
/// Not supported on this platform.
pub const REP_ERR_PLATFORM: u32 = REP_FLAG_ERROR | 4;
/// TLS must be negotiated first.
pub const REP_ERR_TLS_REQD: u32 = REP_FLAG_ERROR | 5;
/// No such export.
pub const REP_ERR_UNKNOWN: u32 = REP_FLAG_ERROR | 6;
/// The server is shutting down.
pub const REP_ERR_SHUTDOWN: u32 = REP_FLAG_ERROR | 7;
/// The client must request `INFO_BLOCK_SIZE`.
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_FLAG_ERROR | 8;
/// The request or its reply is too large.
pub const REP_ERR_TOO_BIG: u32 = REP_FLAG_ERROR | 9;

// ---------------------------------------------------------------------------
// Information types (REP_INFO payload)
// ---------------------------------------------------------------------------

/// u64 size, u16 transmission flags.
pub const INFO_EXPORT: u16 = 0;
/// Canonical export name.
pub const INFO_NAME: u16 = 1;
/// Human-readable description.
pub const INFO_DESCRIPTION: u16 = 2;
/// u32 minimum, preferred and maximum block size.
pub const INFO_BLOCK_SIZE: u16 = 3;

// ---------------------------------------------------------------------------
// Metadata contexts
// ---------------------------------------------------------------------------

/// The one context the spec defines.
pub const META_BASE_ALLOCATION: &str = "base:allocation";
/// `base:allocation` flag: the extent is a hole (unallocated).
pub const STATE_HOLE: u32 = 1 << 0;
/// `base:allocation` flag: the extent reads as zeroes.
pub const STATE_ZERO: u32 = 1 << 1;

// ---------------------------------------------------------------------------
// Commands and command flags
// ---------------------------------------------------------------------------

/// Read.
pub const CMD_READ: u16 = 0;
/// Write; the request is followed by `length` bytes of payload.
pub const CMD_WRITE: u16 = 1;
/// Soft disconnect; no reply.
pub const CMD_DISC: u16 = 2;
/// Flush; offset and length must be zero.
pub const CMD_FLUSH: u16 = 3;
/// Discard hint.
pub const CMD_TRIM: u16 = 4;
/// Prefetch hint.
pub const CMD_CACHE: u16 = 5;
/// Write zeroes without payload.
pub const CMD_WRITE_ZEROES: u16 = 6;
/// Query the negotiated metadata contexts.
pub const CMD_BLOCK_STATUS: u16 = 7;

/// Force unit access (valid on every command when `SEND_FUA` is set).
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Write-zeroes: do not punch a hole.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// Read: do not fragment the structured reply.
pub const CMD_FLAG_DF: u16 = 1 << 2;
/// Block-status: one extent per context is enough.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
/// Write-zeroes: fail with `ENOTSUP` unless zeroing is fast.
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

// ---------------------------------------------------------------------------
// Structured replies
// ---------------------------------------------------------------------------

/// Structured reply flag: the final chunk of a reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
/// No payload; only as the final chunk.
pub const REPLY_TYPE_NONE: u16 = 0;
/// u64 offset then data.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// u64 offset, u32 hole length.
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
/// u32 context id, then (u32 length, u32 flags) descriptors.
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
/// Bit 15 marks an error chunk.
pub const REPLY_TYPE_FLAG_ERROR: u16 = 1 << 15;
/// u32 error, u16 message length, message.
pub const REPLY_TYPE_ERROR: u16 = REPLY_TYPE_FLAG_ERROR | 1;
/// As [`REPLY_TYPE_ERROR`], then the u64 offset of the failure.
pub const REPLY_TYPE_ERROR_OFFSET: u16 = REPLY_TYPE_FLAG_ERROR | 2;

// ---------------------------------------------------------------------------
// Error values (the error field of replies; not the host's errno)
// ---------------------------------------------------------------------------

/// Operation not permitted (write to a read-only export).
pub const EPERM: u32 = 1;
/// Input/output error.
pub const EIO: u32 = 5;
/// Cannot allocate memory.
pub const ENOMEM: u32 = 12;
/// Invalid argument.
pub const EINVAL: u32 = 22;
/// No space left on device (write past the end).
pub const ENOSPC: u32 = 28;
/// Value too large (`CMD_FLAG_DF` read that cannot be sent unfragmented).
pub const EOVERFLOW: u32 = 75;
/// Operation not supported (fast zero that would be slow).
pub const ENOTSUP: u32 = 95;
/// The server is shutting down.
pub const ESHUTDOWN: u32 = 108;

// ---------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------

/// The largest READ or WRITE payload accepted (32 MiB, the spec's
/// "SHOULD NOT be considered a denial of service" bound).
pub const MAX_PAYLOAD: u32 = 32 << 20;
/// Longest string the spec allows (export names, queries, messages).
pub const MAX_STRING_LEN: usize = 4096;
/// Size of a transmission request header.
pub const REQUEST_HEADER_LEN: usize = 28;
/// Size of a simple reply.
pub const SIMPLE_REPLY_LEN: usize = 16;
/// Size of a structured reply chunk header.
pub const STRUCTURED_HEADER_LEN: usize = 20;
/// Size of an option request header (magic, option, length).
pub const OPTION_HEADER_LEN: usize = 16;
/// Size of an option reply header (magic, option, type, length).
pub const OPTION_REPLY_HEADER_LEN: usize = 20;

// ---------------------------------------------------------------------------
// Encoders
// ---------------------------------------------------------------------------

/// Appends an option reply header; the caller appends `len` bytes of data.
pub fn put_option_reply_header(out: &mut Vec<u8>, option: u32, reply_type: u32, len: u32) {
    out.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&reply_type.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
}

/// Appends a whole option reply with `data` as its payload.
///
/// `data` is at most a few KiB in every caller (strings are capped at
/// [`MAX_STRING_LEN`]); a longer slice is truncated to `u32::MAX` bytes.
pub fn put_option_reply(out: &mut Vec<u8>, option: u32, reply_type: u32, data: &[u8]) {
    let data = at_most(data, u32::MAX as usize);
    put_option_reply_header(out, option, reply_type, data.len() as u32);
    out.extend_from_slice(data);
}

/// The first `max` bytes of `data`, or all of it when it is shorter.
pub(super) fn at_most(data: &[u8], max: usize) -> &[u8] {
    data.get(..max).unwrap_or(data)
}

/// Appends a simple reply (16 bytes). For a successful simple READ reply the
/// caller then appends the data.
pub fn put_simple_reply(out: &mut Vec<u8>, cookie: u64, error: u32) {
    out.extend_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&error.to_be_bytes());
    out.extend_from_slice(&cookie.to_be_bytes());
}

/// Appends a structured reply chunk header (20 bytes); the caller appends
/// `len` bytes of payload.
pub fn put_structured_header(
    out: &mut Vec<u8>,
    flags: u16,
    reply_type: u16,
    cookie: u64,
    len: u32,
) {
    out.extend_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&reply_type.to_be_bytes());
    out.extend_from_slice(&cookie.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
}

fn done_flag(done: bool) -> u16 {
    if done { REPLY_FLAG_DONE } else { 0 }
}

/// Appends an `OFFSET_DATA` chunk header and its 8-byte offset (28 bytes in
/// all); the caller then appends exactly `data_len` bytes of data.
///
/// `data_len` must be non-zero (the spec requires a chunk length of at least
/// 9) and at most `u32::MAX - 8`; reads are capped at [`MAX_PAYLOAD`], far
/// below that.
pub fn put_offset_data_header(
    out: &mut Vec<u8>,
    cookie: u64,
    offset: u64,
    data_len: u32,
    done: bool,
) {
    debug_assert!(
        data_len > 0 && data_len <= u32::MAX - 8,
        "OFFSET_DATA length {data_len}"
    );
    put_structured_header(
        out,
        done_flag(done),
        REPLY_TYPE_OFFSET_DATA,
        cookie,
        data_len.saturating_add(8),
    );
    out.extend_from_slice(&offset.to_be_bytes());
}

/// Appends an `OFFSET_HOLE` chunk (32 bytes): `hole_len` bytes at `offset`
/// read as zeroes. `hole_len` must be non-zero.
pub fn put_offset_hole(out: &mut Vec<u8>, cookie: u64, offset: u64, hole_len: u32, done: bool) {
    debug_assert!(hole_len > 0, "OFFSET_HOLE of length 0");
    put_structured_header(out, done_flag(done), REPLY_TYPE_OFFSET_HOLE, cookie, 12);
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&hole_len.to_be_bytes());
}

/// Cuts `message` to at most [`MAX_STRING_LEN`] bytes on a char boundary.
fn clip_message(message: &str) -> &str {
    if message.len() <= MAX_STRING_LEN {
        return message;
    }
    let mut end = MAX_STRING_LEN;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// Appends an `ERROR` chunk: `errno` (non-zero, one of the values above) and
/// a human-readable `message`, cut to [`MAX_STRING_LEN`] bytes.
pub fn put_structured_error(out: &mut Vec<u8>, cookie: u64, errno: u32, message: &str, done: bool) {
    debug_assert!(errno != 0, "error chunk with errno 0");
    let message = clip_message(message);
    let len = 6 + message.len() as u32;
    put_structured_header(out, done_flag(done), REPLY_TYPE_ERROR, cookie, len);
    out.extend_from_slice(&errno.to_be_bytes());
    out.extend_from_slice(&(message.len() as u16).to_be_bytes());
    out.extend_from_slice(message.as_bytes());
}

/// Appends an `ERROR_OFFSET` chunk: like [`put_structured_error`] plus the
/// offset at which the error happened.
pub fn put_structured_error_offset(
    out: &mut Vec<u8>,
    cookie: u64,
    errno: u32,
    message: &str,
    offset: u64,
    done: bool,
) {
    debug_assert!(errno != 0, "error chunk with errno 0");
    let message = clip_message(message);
    let len = 14 + message.len() as u32;
    put_structured_header(out, done_flag(done), REPLY_TYPE_ERROR_OFFSET, cookie, len);
    out.extend_from_slice(&errno.to_be_bytes());
    out.extend_from_slice(&(message.len() as u16).to_be_bytes());
    out.extend_from_slice(message.as_bytes());
    out.extend_from_slice(&offset.to_be_bytes());
}

/// Appends a `BLOCK_STATUS` chunk for one metadata context: the context id,
/// then one `(length, flags)` descriptor per extent. `extents` must hold at
/// least one extent, each of non-zero length.
pub fn put_block_status(
    out: &mut Vec<u8>,
    cookie: u64,
    context_id: u32,
    extents: &[(u32, u32)],
    done: bool,
) {
    debug_assert!(!extents.is_empty(), "BLOCK_STATUS without extents");
    debug_assert!(
        extents.len() <= (u32::MAX as usize - 4) / 8,
        "too many extents"
    );
    let len = 4 + 8 * extents.len() as u32;
    put_structured_header(out, done_flag(done), REPLY_TYPE_BLOCK_STATUS, cookie, len);
    out.extend_from_slice(&context_id.to_be_bytes());
    for &(length, flags) in extents {
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&flags.to_be_bytes());
    }
}

/// Appends the `NONE` chunk with `DONE` set (20 bytes): the request
/// succeeded and nothing more follows.
pub fn put_structured_none_done(out: &mut Vec<u8>, cookie: u64) {
    put_structured_header(out, REPLY_FLAG_DONE, REPLY_TYPE_NONE, cookie, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magics_spell_their_names() {
        assert_eq!(&NBDMAGIC.to_be_bytes(), b"NBDMAGIC");
        assert_eq!(&IHAVEOPT.to_be_bytes(), b"IHAVEOPT");
        assert_eq!(REP_ERR_UNSUP, 0x8000_0001);
        assert_eq!(REP_ERR_TOO_BIG, 0x8000_0009);
        assert_eq!(REPLY_TYPE_ERROR, 32769);
        assert_eq!(REPLY_TYPE_ERROR_OFFSET, 32770);
        assert_eq!(MAX_PAYLOAD, 33_554_432);
    }

    #[test]
    fn simple_reply_bytes() {
        let mut out = Vec::new();
        put_simple_reply(&mut out, 0x0102_0304_0506_0708, EINVAL);
        assert_eq!(
            out,
            [0x67, 0x44, 0x66, 0x98, 0, 0, 0, 22, 1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(out.len(), SIMPLE_REPLY_LEN);
    }

    #[test]
    fn structured_header_bytes() {
        let mut out = Vec::new();
        put_structured_header(&mut out, 1, 5, 0xaabb, 0x1234);
        assert_eq!(
            out,
            [
                0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 5, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb, 0, 0, 0x12, 0x34
            ]
        );
        assert_eq!(out.len(), STRUCTURED_HEADER_LEN);
    }

    #[test]
    fn offset_data_header_bytes() {
        let mut out = Vec::new();
        put_offset_data_header(&mut out, 7, 0x1000, 512, true);
        let mut want = vec![0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 1];
        want.extend_from_slice(&7u64.to_be_bytes());
        want.extend_from_slice(&520u32.to_be_bytes());
        want.extend_from_slice(&0x1000u64.to_be_bytes());
        assert_eq!(out, want);

        out.clear();
        put_offset_data_header(&mut out, 7, 0, 1, false);
        assert_eq!(&out[4..6], &[0, 0], "not done");
        assert_eq!(&out[16..20], &9u32.to_be_bytes());
    }

    #[test]
    fn offset_hole_bytes() {
        let mut out = Vec::new();
        put_offset_hole(&mut out, 9, 4096, 8192, true);
        let mut want = vec![0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 2];
        want.extend_from_slice(&9u64.to_be_bytes());
        want.extend_from_slice(&12u32.to_be_bytes());
        want.extend_from_slice(&4096u64.to_be_bytes());
        want.extend_from_slice(&8192u32.to_be_bytes());
        assert_eq!(out, want);
    }

    #[test]
    fn structured_error_bytes() {
        let mut out = Vec::new();
        put_structured_error(&mut out, 3, EIO, "bad", true);
        let mut want = vec![0x66, 0x8e, 0x33, 0xef, 0, 1, 0x80, 0x01];
        want.extend_from_slice(&3u64.to_be_bytes());
        want.extend_from_slice(&9u32.to_be_bytes());
        want.extend_from_slice(&5u32.to_be_bytes());
        want.extend_from_slice(&3u16.to_be_bytes());
        want.extend_from_slice(b"bad");
        assert_eq!(out, want);

        out.clear();
        put_structured_error(&mut out, 3, EINVAL, "", false);
        assert_eq!(out.len(), STRUCTURED_HEADER_LEN + 6);
        assert_eq!(&out[4..6], &[0, 0]);
    }

    #[test]
    fn structured_error_message_is_clipped_on_a_char_boundary() {
        let long = "é".repeat(3000); // 6000 bytes, 2 bytes per char
        let mut out = Vec::new();
        put_structured_error(&mut out, 1, EIO, &long, true);
        let msg_len = u16::from_be_bytes([out[24], out[25]]) as usize;
        assert_eq!(msg_len, MAX_STRING_LEN);
        assert!(std::str::from_utf8(&out[26..]).is_ok());
        assert_eq!(out.len(), 26 + msg_len);
        assert_eq!(
            u32::from_be_bytes(out[16..20].try_into().unwrap()) as usize,
            6 + msg_len
        );

        let odd = format!("a{}", "é".repeat(3000)); // boundary falls mid-char at 4096
        out.clear();
        put_structured_error(&mut out, 1, EIO, &odd, true);
        let msg_len = u16::from_be_bytes([out[24], out[25]]) as usize;
        assert_eq!(msg_len, MAX_STRING_LEN - 1);
        assert!(std::str::from_utf8(&out[26..]).is_ok());
    }

    #[test]
    fn structured_error_offset_bytes() {
        let mut out = Vec::new();
        put_structured_error_offset(&mut out, 3, EIO, "x", 0x200, false);
        let mut want = vec![0x66, 0x8e, 0x33, 0xef, 0, 0, 0x80, 0x02];
        want.extend_from_slice(&3u64.to_be_bytes());
        want.extend_from_slice(&15u32.to_be_bytes());
        want.extend_from_slice(&5u32.to_be_bytes());
        want.extend_from_slice(&1u16.to_be_bytes());
        want.extend_from_slice(b"x");
        want.extend_from_slice(&0x200u64.to_be_bytes());
        assert_eq!(out, want);
    }

    #[test]
    fn block_status_bytes() {
        let mut out = Vec::new();
        put_block_status(
            &mut out,
            0x55,
            1,
            &[(4096, 0), (8192, STATE_HOLE | STATE_ZERO)],
            true,
        );
        let mut want = vec![0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 5];
        want.extend_from_slice(&0x55u64.to_be_bytes());
        want.extend_from_slice(&20u32.to_be_bytes());
        want.extend_from_slice(&1u32.to_be_bytes());
        want.extend_from_slice(&4096u32.to_be_bytes());
        want.extend_from_slice(&0u32.to_be_bytes());
        want.extend_from_slice(&8192u32.to_be_bytes());
        want.extend_from_slice(&3u32.to_be_bytes());
        assert_eq!(out, want);
    }

    #[test]
    fn none_done_bytes() {
        let mut out = Vec::new();
        put_structured_none_done(&mut out, u64::MAX);
        let mut want = vec![0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 0];
        want.extend_from_slice(&u64::MAX.to_be_bytes());
        want.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(out, want);
    }

    #[test]
    fn option_reply_bytes() {
        let mut out = Vec::new();
        put_option_reply(&mut out, OPT_LIST, REP_SERVER, b"ab");
        let mut want = Vec::new();
        want.extend_from_slice(&[0, 3, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9]);
        want.extend_from_slice(&[0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2, b'a', b'b']);
        assert_eq!(out, want);
    }

    #[test]
    fn encoders_append_without_clearing() {
        let mut out = vec![0xee];
        put_simple_reply(&mut out, 1, 0);
        put_structured_none_done(&mut out, 1);
        assert_eq!(out[0], 0xee);
        assert_eq!(out.len(), 1 + SIMPLE_REPLY_LEN + STRUCTURED_HEADER_LEN);
    }
}
