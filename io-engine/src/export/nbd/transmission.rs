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
//! that error (skipping a WRITE's payload) and carries on. A structured
//! error reply carries [`error_message`]'s short text for its error value.
//!
//! Two things close the connection instead ([`ProtocolError`]): a header
//! without the request magic (the stream can no longer be framed), and a
//! WRITE whose payload exceeds [`MAX_PAYLOAD`] (the spec lets the server
//! treat that as a denial of service rather than buffer it).

use thiserror::Error;

use super::ExportInfo;
use super::proto::*;

/// Command names, in counter order.
pub const COMMANDS: [&str; 9] = [
    "read",
    "write",
    "disc",
    "flush",
    "trim",
    "cache",
    "write_zeroes",
    "block_status",
    "unknown",
];

/// The [`COMMANDS`] index of `c`.
pub(super) fn command_index(c: Command) -> usize {
    match c {
        Command::Read => 0,
        Command::Write => 1,
        Command::Disc => 2,
        Command::Flush => 3,
        Command::Trim => 4,
        Command::Cache => 5,
        Command::WriteZeroes => 6,
        Command::BlockStatus => 7,
        Command::Unknown(_) => 8,
    }
}

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
        if let Some(magic) = input.first_chunk::<4>() {
            let magic = u32::from_be_bytes(*magic);
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

/// The short human-readable message of a structured error reply with
/// error value `errno` (what [`validate`] or the device refused).
pub fn error_message(errno: u32) -> &'static str {
    match errno {
        EINVAL => "invalid request: command, flags, alignment, length or range",
        EPERM => "the export is read-only",
        ENOSPC => "past the end of the export",
        ENOTSUP => "not supported by the device",
        EIO => "device I/O error",
        ESHUTDOWN => "the export is being unshared",
        ENOMEM => "out of memory",
        EOVERFLOW => "the reply does not fit one chunk",
        _ => "request failed",
    }
}

#[cfg(test)]
mod tests;
