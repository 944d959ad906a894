//! The NBD fixed-newstyle handshake and option phase as a sans-IO state
//! machine: bytes from the client go in, option replies come out, and the
//! end of the phase is reported as an [`Outcome`].
//!
//! Thread: the reactor that owns the connection; pure code, no IO.
//!
//! Use: call [`Handshake::greeting`] once and send what it wrote, then hand
//! every byte received to [`Handshake::feed`]. `feed` consumes only whole
//! messages (the client flags, or one whole option) and reports how many
//! bytes it used; keep the rest and pass it again with more data. Options
//! whose data is longer than [`MAX_OPTION_LEN`] are skipped as they stream
//! in, without buffering, so the connection never needs more than
//! `OPTION_HEADER_LEN + MAX_OPTION_LEN` bytes of input buffer. Bytes after
//! the option that ended the phase (a pipelined first request) are left
//! unconsumed for the transmission phase.
//!
//! Policy where the spec leaves a choice:
//! - A client that does not set `FLAG_C_FIXED_NEWSTYLE` is still served
//!   fixed newstyle (the spec allows it); unknown client flags are fatal.
//! - `INFO_BLOCK_SIZE` is sent for every successful `INFO` and `GO`, asked
//!   for or not; `INFO_NAME` and `INFO_DESCRIPTION` only when asked for.
//! - Option data over [`MAX_OPTION_LEN`] gets `ERR_TOO_BIG` (or `ERR_UNSUP`
//!   for an option we do not know) once it has been skipped; an
//!   `EXPORT_NAME` that long is a hard disconnect, as that option cannot
//!   fail politely.
//! - `LIST_META_CONTEXT` is answered with or without structured replies;
//!   `SET_META_CONTEXT` needs them (`ERR_INVALID` otherwise). Both answer
//!   `ERR_UNKNOWN` for an unknown export. `base:allocation` gets context id
//!   [`BASE_ALLOCATION_ID`] from `SET`, and 0 (reserved) from `LIST`.
//! - Read-only exports advertise neither `SEND_TRIM`, `SEND_WRITE_ZEROES`
//!   nor `SEND_FAST_ZERO` (qemu-nbd does the same); `SEND_DF` is advertised
//!   once structured replies are negotiated, because a read up to
//!   [`MAX_PAYLOAD`] always fits in one chunk.

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use super::proto::*;

/// Longest option data handled; longer options are skipped and refused.
pub const MAX_OPTION_LEN: u32 = 64 << 10;

/// Context id that `SET_META_CONTEXT` assigns to `base:allocation`.
pub const BASE_ALLOCATION_ID: u32 = 1;

/// What an export reports for `base:allocation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// Every block is allocated data (malloc devices): status 0.
    Data,
    /// Every block is an unallocated hole that reads as zeroes (null
    /// devices): `STATE_HOLE | STATE_ZERO`.
    Zero,
}

impl Allocation {
    /// The `base:allocation` status flags for extents of this kind.
    pub const fn block_status_flags(self) -> u32 {
        match self {
            Allocation::Data => 0,
            Allocation::Zero => STATE_HOLE | STATE_ZERO,
        }
    }
}

/// One export as the option phase describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportInfo {
    /// Canonical name (`INFO_NAME`, `REP_SERVER`).
    pub name: String,
    /// Human-readable description (`INFO_DESCRIPTION`).
    pub description: String,
    /// Size in bytes.
    pub size: u64,
    /// Writes fail with `EPERM`; `FLAG_READ_ONLY` is advertised.
    pub read_only: bool,
    /// Minimum block size: requests must be aligned to it.
    pub block_size: u32,
    /// Preferred block size.
    pub preferred: u32,
    /// Largest READ/WRITE accepted (0: [`MAX_PAYLOAD`]); capped at
    /// [`MAX_PAYLOAD`].
    pub max_payload: u32,
    /// Flush and FUA are visible across connections (`CAN_MULTI_CONN`).
    pub can_multi_conn: bool,
    /// What `base:allocation` reports.
    pub data_kind: Allocation,
}

/// Block size constraints as advertised in `INFO_BLOCK_SIZE`, sanitised to
/// what the spec allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockLimits {
    /// Power of two, 1..=64 KiB; offsets and lengths must be multiples.
    pub minimum: u32,
    /// Power of two, at least `max(minimum, 512)`, at most `maximum`.
    pub preferred: u32,
    /// Multiple of `minimum`, at most [`MAX_PAYLOAD`]: the longest READ or
    /// WRITE.
    pub maximum: u32,
}

impl ExportInfo {
    /// The block size constraints advertised for (and enforced on) this
    /// export: `block_size` rounded up to a power of two in 1..=64 KiB,
    /// `max_payload` capped at [`MAX_PAYLOAD`] and rounded down to a
    /// multiple of the minimum, `preferred` made a power of two between
    /// `max(minimum, 512)` and the maximum.
    pub fn block_limits(&self) -> BlockLimits {
        let minimum = self.block_size.clamp(1, 1 << 16).next_power_of_two();
        let floor = minimum.max(512);
        let cap = if self.max_payload == 0 {
            MAX_PAYLOAD
        } else {
            self.max_payload.min(MAX_PAYLOAD)
        };
        let maximum = (cap - cap % minimum).max(floor);
        let mut preferred = self
            .preferred
            .max(floor)
            .checked_next_power_of_two()
            .unwrap_or(1 << 31);
        if preferred > maximum {
            // Largest power of two <= maximum; >= floor since floor is one.
            preferred = 1 << (31 - maximum.leading_zeros());
        }
        BlockLimits {
            minimum,
            preferred,
            maximum,
        }
    }
}

/// The transmission flags advertised for `export`.
///
/// Always `HAS_FLAGS | SEND_FLUSH | SEND_FUA | SEND_CACHE`; writable exports
/// add `SEND_TRIM | SEND_WRITE_ZEROES | SEND_FAST_ZERO`, read-only ones
/// `READ_ONLY`; `CAN_MULTI_CONN` when the export says so; `SEND_DF` once
/// structured replies are negotiated.
pub fn transmission_flags(export: &ExportInfo, structured_replies: bool) -> u16 {
    let mut flags = FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_CACHE;
    if export.read_only {
        flags |= FLAG_READ_ONLY;
    } else {
        flags |= FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES | FLAG_SEND_FAST_ZERO;
    }
    if export.can_multi_conn {
        flags |= FLAG_CAN_MULTI_CONN;
    }
    if structured_replies {
        flags |= FLAG_SEND_DF;
    }
    flags
}

/// Where the option phase finds exports.
///
/// Thread: called on the connection's reactor; implementations are shared
/// between connections, hence `Send + Sync`.
pub trait ExportLookup: Send + Sync {
    /// The export called `name` (`""` is the default export, if any).
    fn lookup(&self, name: &str) -> Option<ExportInfo>;
    /// Every export as `(name, description)`, for `OPT_LIST`.
    fn list(&self) -> Vec<(String, String)>;
    /// Why a client may not attach to export `name` now (it is at its
    /// connection limit), or `None` if it may.
    fn refusal(&self, _name: &str) -> Option<String> {
        None
    }
}

/// A fixed table of exports: exact name match, and `""` selects the first
/// export unless one is named `""`.
#[derive(Clone, Debug, Default)]
pub struct StaticExports {
    /// The exports, first one the default.
    pub exports: Vec<ExportInfo>,
}

impl ExportLookup for StaticExports {
    fn lookup(&self, name: &str) -> Option<ExportInfo> {
        self.exports
            .iter()
            .find(|e| e.name == name)
            .or_else(|| {
                if name.is_empty() {
                    self.exports.first()
                } else {
                    None
                }
            })
            .cloned()
    }

    fn list(&self) -> Vec<(String, String)> {
        self.exports
            .iter()
            .map(|e| (e.name.clone(), e.description.clone()))
            .collect()
    }
}

/// What the option phase needs from the server.
#[derive(Clone)]
pub struct HandshakeConfig {
    /// The exports clients may choose from.
    pub exports: Arc<dyn ExportLookup>,
    /// Whether `STARTTLS` may succeed. When false it gets `ERR_POLICY`; when
    /// true it gets `ACK` and [`Outcome::StartTls`].
    pub tls_available: bool,
    /// Refuse every export with this reason (the server is at its
    /// connection limit): `GO` gets `ERR_POLICY` with it, `EXPORT_NAME` a
    /// disconnect (it has no error reply). Listing and INFO still work.
    pub refuse: Option<String>,
}

impl fmt::Debug for HandshakeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandshakeConfig")
            .field("tls_available", &self.tls_available)
            .field("refuse", &self.refuse)
            .finish()
    }
}

/// How the option phase ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Enter the transmission phase (after `GO` or `EXPORT_NAME`; the reply
    /// is already in the output).
    Transmission {
        /// The chosen export.
        export: ExportInfo,
        /// The transmission flags sent to the client.
        flags: u16,
        /// Structured replies were negotiated: READ must use them.
        structured_replies: bool,
        /// Context id of `base:allocation` if it was selected for this
        /// export; `CMD_BLOCK_STATUS` is valid only then.
        meta_context_base_allocation: Option<u32>,
    },
    /// The client sent `ABORT`: send the `ACK` in the output, then close.
    Abort,
    /// Hard disconnect now, sending nothing more (e.g. `EXPORT_NAME` with an
    /// unknown name).
    Disconnect,
    /// `STARTTLS` was accepted (only with `tls_available`): send the `ACK`,
    /// run the TLS handshake, call [`Handshake::tls_established`], then feed
    /// the decrypted stream.
    StartTls,
}

/// A fatal violation: close the connection without replying.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum HandshakeError {
    /// `feed` was called before `greeting`.
    #[error("the greeting has not been sent")]
    GreetingNotSent,
    /// The client set flags the server did not offer.
    #[error("client sent unknown handshake flags {0:#x}")]
    UnknownClientFlags(u32),
    /// An option did not start with `IHAVEOPT`.
    #[error("option does not start with IHAVEOPT (got {0:#018x})")]
    BadOptionMagic(u64),
    /// `feed` was called after `StartTls` without `tls_established`.
    #[error("the TLS handshake has not completed")]
    TlsPending,
    /// `tls_established` was called while no `STARTTLS` was pending.
    #[error("no STARTTLS is pending")]
    NoTlsPending,
    /// `feed` was called after the phase ended.
    #[error("the option phase is over")]
    Finished,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    ClientFlags,
    Options,
    /// Skipping `remaining` bytes of an over-long option, then replying
    /// `reply` to `option`.
    Discard {
        option: u32,
        remaining: u32,
        reply: u32,
    },
    TlsPending,
    Done,
}

/// The option phase of one connection.
pub struct Handshake {
    config: HandshakeConfig,
    state: State,
    greeted: bool,
    no_zeroes: bool,
    structured: bool,
    tls: bool,
    /// `base:allocation` selected by the last `SET_META_CONTEXT`, with the
    /// export name it was selected for.
    meta: Option<(String, u32)>,
}

impl fmt::Debug for Handshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handshake")
            .field("state", &self.state)
            .field("no_zeroes", &self.no_zeroes)
            .field("structured", &self.structured)
            .field("tls", &self.tls)
            .field("meta", &self.meta)
            .finish()
    }
}

fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// A bounds-checked reader over one option's data.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(be_u16)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(be_u32)
    }

    /// A u32-length-prefixed string of at most [`MAX_STRING_LEN`] bytes.
    fn string(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        if len > MAX_STRING_LEN {
            return None;
        }
        self.take(len)
    }
}

fn known_option(option: u32) -> bool {
    matches!(
        option,
        OPT_EXPORT_NAME
            | OPT_ABORT
            | OPT_LIST
            | OPT_STARTTLS
            | OPT_INFO
            | OPT_GO
            | OPT_STRUCTURED_REPLY
            | OPT_LIST_META_CONTEXT
            | OPT_SET_META_CONTEXT
    )
}

fn reply_ack(out: &mut Vec<u8>, option: u32) {
    put_option_reply_header(out, option, REP_ACK, 0);
}

fn reply_error(out: &mut Vec<u8>, option: u32, reply_type: u32, message: &str) {
    tracing::debug!(option, reply_type, message, "nbd: option refused");
    put_option_reply(out, option, reply_type, message.as_bytes());
}

fn put_info(out: &mut Vec<u8>, option: u32, info: u16, payload: &[u8]) {
    let len = (2 + payload.len()).min(u32::MAX as usize) as u32;
    put_option_reply_header(out, option, REP_INFO, len);
    out.extend_from_slice(&info.to_be_bytes());
    out.extend_from_slice(&payload[..len as usize - 2]);
}

impl Handshake {
    /// A handshake for a freshly accepted connection.
    pub fn new(config: HandshakeConfig) -> Self {
        Handshake {
            config,
            state: State::ClientFlags,
            greeted: false,
            no_zeroes: false,
            structured: false,
            tls: false,
            meta: None,
        }
    }

    /// Appends the server greeting (18 bytes): `NBDMAGIC`, `IHAVEOPT`,
    /// `FIXED_NEWSTYLE | NO_ZEROES`.
    pub fn greeting(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&NBDMAGIC.to_be_bytes());
        out.extend_from_slice(&IHAVEOPT.to_be_bytes());
        out.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
        self.greeted = true;
    }

    /// Whether structured replies have been negotiated so far.
    pub fn structured_replies(&self) -> bool {
        self.structured
    }

    /// Consumes as much of `input` as forms whole messages, appending the
    /// replies to `out`. Returns the bytes consumed (never more than
    /// `input.len()`) and, when the phase ended, how. Partial input
    /// consumes nothing until the rest arrives (except an over-long option,
    /// whose data is skipped as it comes).
    ///
    /// An error means the client broke a MUST of the spec: close the
    /// connection without sending anything more.
    pub fn feed(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, Option<Outcome>), HandshakeError> {
        if !self.greeted {
            return Err(HandshakeError::GreetingNotSent);
        }
        let mut pos = 0;
        loop {
            let rest = &input[pos..];
            match self.state {
                State::Done => return Err(HandshakeError::Finished),
                State::TlsPending => return Err(HandshakeError::TlsPending),
                State::ClientFlags => {
                    if rest.len() < 4 {
                        return Ok((pos, None));
                    }
                    let flags = be_u32(rest);
                    if flags & !KNOWN_CLIENT_FLAGS != 0 {
                        self.state = State::Done;
                        return Err(HandshakeError::UnknownClientFlags(flags));
                    }
                    self.no_zeroes = flags & FLAG_C_NO_ZEROES != 0;
                    pos += 4;
                    self.state = State::Options;
                }
                State::Options => {
                    if rest.len() < 8 {
                        return Ok((pos, None));
                    }
                    let magic = be_u64(rest);
                    if magic != IHAVEOPT {
                        self.state = State::Done;
                        return Err(HandshakeError::BadOptionMagic(magic));
                    }
                    if rest.len() < OPTION_HEADER_LEN {
                        return Ok((pos, None));
                    }
                    let option = be_u32(&rest[8..]);
                    let len = be_u32(&rest[12..]);
                    if len > MAX_OPTION_LEN {
                        if option == OPT_EXPORT_NAME {
                            tracing::debug!(len, "nbd: over-long EXPORT_NAME, disconnecting");
                            self.state = State::Done;
                            return Ok((pos + OPTION_HEADER_LEN, Some(Outcome::Disconnect)));
                        }
                        let reply = if known_option(option) {
                            REP_ERR_TOO_BIG
                        } else {
                            REP_ERR_UNSUP
                        };
                        pos += OPTION_HEADER_LEN;
                        self.state = State::Discard {
                            option,
                            remaining: len,
                            reply,
                        };
                        continue;
                    }
                    let total = OPTION_HEADER_LEN + len as usize;
                    if rest.len() < total {
                        return Ok((pos, None));
                    }
                    let data = &rest[OPTION_HEADER_LEN..total];
                    pos += total;
                    if let Some(outcome) = self.handle_option(option, data, out) {
                        self.state = match outcome {
                            Outcome::StartTls => State::TlsPending,
                            _ => State::Done,
                        };
                        return Ok((pos, Some(outcome)));
                    }
                }
                State::Discard {
                    option,
                    remaining,
                    reply,
                } => {
                    let n = rest.len().min(remaining as usize);
                    pos += n;
                    let remaining = remaining - n as u32;
                    if remaining > 0 {
                        self.state = State::Discard {
                            option,
                            remaining,
                            reply,
                        };
                        return Ok((pos, None));
                    }
                    self.state = State::Options;
                    let message = if reply == REP_ERR_UNSUP {
                        "unsupported option"
                    } else {
                        "option data too long"
                    };
                    reply_error(out, option, reply, message);
                }
            }
        }
    }

    /// Completes a `STARTTLS`: the option phase restarts on the encrypted
    /// stream with all negotiated state forgotten, as the spec requires.
    pub fn tls_established(&mut self) -> Result<(), HandshakeError> {
        if self.state != State::TlsPending {
            return Err(HandshakeError::NoTlsPending);
        }
        self.state = State::Options;
        self.tls = true;
        self.structured = false;
        self.meta = None;
        Ok(())
    }

    /// Handles one whole option; `Some` ends (or suspends) the phase.
    fn handle_option(&mut self, option: u32, data: &[u8], out: &mut Vec<u8>) -> Option<Outcome> {
        match option {
            OPT_EXPORT_NAME => Some(self.export_name(data, out)),
            OPT_ABORT => {
                // The spec: ignore any data rather than reject it.
                reply_ack(out, option);
                Some(Outcome::Abort)
            }
            OPT_LIST => {
                if !data.is_empty() {
                    reply_error(out, option, REP_ERR_INVALID, "LIST takes no data");
                    return None;
                }
                for (name, description) in self.config.exports.list() {
                    let len = 4 + name.len() + description.len();
                    put_option_reply_header(out, option, REP_SERVER, len as u32);
                    out.extend_from_slice(&(name.len() as u32).to_be_bytes());
                    out.extend_from_slice(name.as_bytes());
                    out.extend_from_slice(description.as_bytes());
                }
                reply_ack(out, option);
                None
            }
            OPT_STARTTLS => {
                if !data.is_empty() {
                    reply_error(out, option, REP_ERR_INVALID, "STARTTLS takes no data");
                } else if self.tls {
                    reply_error(out, option, REP_ERR_INVALID, "TLS is already active");
                } else if !self.config.tls_available {
                    reply_error(out, option, REP_ERR_POLICY, "TLS is not available");
                } else {
                    reply_ack(out, option);
                    return Some(Outcome::StartTls);
                }
                None
            }
            OPT_INFO | OPT_GO => self.info_go(option, data, out),
            OPT_STRUCTURED_REPLY => {
                if data.is_empty() {
                    self.structured = true;
                    reply_ack(out, option);
                } else {
                    reply_error(
                        out,
                        option,
                        REP_ERR_INVALID,
                        "STRUCTURED_REPLY takes no data",
                    );
                }
                None
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                self.meta_context(option, data, out);
                None
            }
            _ => {
                reply_error(out, option, REP_ERR_UNSUP, "unsupported option");
                None
            }
        }
    }

    /// Why attaching to `name` is refused now, if it is.
    fn refusal(&self, name: &str) -> Option<String> {
        self.config
            .refuse
            .clone()
            .or_else(|| self.config.exports.refusal(name))
    }

    fn transmission(&self, export: ExportInfo, name: &str) -> Outcome {
        let flags = transmission_flags(&export, self.structured);
        let meta = match &self.meta {
            Some((selected_for, id)) if selected_for == name => Some(*id),
            _ => None,
        };
        Outcome::Transmission {
            export,
            flags,
            structured_replies: self.structured,
            meta_context_base_allocation: meta,
        }
    }

    fn export_name(&mut self, data: &[u8], out: &mut Vec<u8>) -> Outcome {
        let Some((name, export)) = std::str::from_utf8(data)
            .ok()
            .and_then(|name| Some((name, self.config.exports.lookup(name)?)))
        else {
            tracing::debug!("nbd: EXPORT_NAME for an unknown export, disconnecting");
            return Outcome::Disconnect;
        };
        if let Some(why) = self.refusal(name) {
            tracing::info!("nbd: EXPORT_NAME refused ({why}), disconnecting");
            return Outcome::Disconnect;
        }
        let flags = transmission_flags(&export, self.structured);
        out.extend_from_slice(&export.size.to_be_bytes());
        out.extend_from_slice(&flags.to_be_bytes());
        if !self.no_zeroes {
            out.extend_from_slice(&[0; 124]);
        }
        self.transmission(export, name)
    }

    fn info_go(&mut self, option: u32, data: &[u8], out: &mut Vec<u8>) -> Option<Outcome> {
        let mut r = Reader { buf: data };
        let Some(name) = r.string() else {
            reply_error(out, option, REP_ERR_INVALID, "malformed export name");
            return None;
        };
        let Some(count) = r.u16() else {
            reply_error(
                out,
                option,
                REP_ERR_INVALID,
                "missing information request count",
            );
            return None;
        };
        if r.buf.len() != 2 * count as usize {
            reply_error(
                out,
                option,
                REP_ERR_INVALID,
                "information request count mismatch",
            );
            return None;
        }
        let (mut want_name, mut want_description) = (false, false);
        while let Some(info) = r.u16() {
            match info {
                INFO_NAME => want_name = true,
                INFO_DESCRIPTION => want_description = true,
                // EXPORT and BLOCK_SIZE are always sent; others are ignored.
                _ => {}
            }
        }
        let Ok(name) = std::str::from_utf8(name) else {
            reply_error(out, option, REP_ERR_INVALID, "export name is not UTF-8");
            return None;
        };
        let Some(export) = self.config.exports.lookup(name) else {
            reply_error(out, option, REP_ERR_UNKNOWN, "unknown export");
            return None;
        };
        if option == OPT_GO
            && let Some(why) = self.refusal(name)
        {
            reply_error(out, option, REP_ERR_POLICY, &why);
            return None;
        }

        let flags = transmission_flags(&export, self.structured);
        let mut info = [0u8; 12];
        info[..8].copy_from_slice(&export.size.to_be_bytes());
        info[8..10].copy_from_slice(&flags.to_be_bytes());
        put_info(out, option, INFO_EXPORT, &info[..10]);
        if want_name {
            put_info(out, option, INFO_NAME, export.name.as_bytes());
        }
        if want_description {
            put_info(out, option, INFO_DESCRIPTION, export.description.as_bytes());
        }
        let limits = export.block_limits();
        info[..4].copy_from_slice(&limits.minimum.to_be_bytes());
        info[4..8].copy_from_slice(&limits.preferred.to_be_bytes());
        info[8..12].copy_from_slice(&limits.maximum.to_be_bytes());
        put_info(out, option, INFO_BLOCK_SIZE, &info);
        reply_ack(out, option);

        if option == OPT_GO {
            Some(self.transmission(export, name))
        } else {
            None
        }
    }

    fn meta_context(&mut self, option: u32, data: &[u8], out: &mut Vec<u8>) {
        let set = option == OPT_SET_META_CONTEXT;
        if set {
            // SET replaces the selection even when it fails.
            self.meta = None;
            if !self.structured {
                reply_error(
                    out,
                    option,
                    REP_ERR_INVALID,
                    "negotiate structured replies first",
                );
                return;
            }
        }
        let mut r = Reader { buf: data };
        let Some(name) = r.string() else {
            reply_error(out, option, REP_ERR_INVALID, "malformed export name");
            return;
        };
        let Some(count) = r.u32() else {
            reply_error(out, option, REP_ERR_INVALID, "missing query count");
            return;
        };
        // Each query needs at least 4 bytes, so this loop is bounded by the
        // data length whatever the count says.
        let mut matched = count == 0 && !set;
        for _ in 0..count {
            let Some(query) = r.string() else {
                reply_error(out, option, REP_ERR_INVALID, "malformed query");
                return;
            };
            let base = query == META_BASE_ALLOCATION.as_bytes();
            // "base:" is a wildcard for LIST and ignored by SET.
            let wildcard = !set && query == b"base:";
            matched |= base || wildcard;
        }
        if !r.buf.is_empty() {
            reply_error(out, option, REP_ERR_INVALID, "trailing data after queries");
            return;
        }
        let Ok(name) = std::str::from_utf8(name) else {
            reply_error(out, option, REP_ERR_INVALID, "export name is not UTF-8");
            return;
        };
        if self.config.exports.lookup(name).is_none() {
            reply_error(out, option, REP_ERR_UNKNOWN, "unknown export");
            return;
        }
        if matched {
            let id = if set { BASE_ALLOCATION_ID } else { 0 };
            let len = 4 + META_BASE_ALLOCATION.len() as u32;
            put_option_reply_header(out, option, REP_META_CONTEXT, len);
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(META_BASE_ALLOCATION.as_bytes());
            if set {
                self.meta = Some((name.to_owned(), id));
            }
        }
        reply_ack(out, option);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn malloc_export() -> ExportInfo {
        ExportInfo {
            name: "disk0".into(),
            description: "malloc disk".into(),
            size: 1 << 20,
            read_only: false,
            block_size: 512,
            preferred: 4096,
            max_payload: MAX_PAYLOAD,
            can_multi_conn: true,
            data_kind: Allocation::Data,
        }
    }

    fn null_export() -> ExportInfo {
        ExportInfo {
            name: "null0".into(),
            description: String::new(),
            size: 1 << 30,
            read_only: true,
            block_size: 4096,
            preferred: 4096,
            max_payload: 1 << 20,
            can_multi_conn: false,
            data_kind: Allocation::Zero,
        }
    }

    fn config(tls_available: bool) -> HandshakeConfig {
        HandshakeConfig {
            exports: Arc::new(StaticExports {
                exports: vec![malloc_export(), null_export()],
            }),
            tls_available,
            refuse: None,
        }
    }

    #[test]
    fn a_refusing_server_answers_go_with_policy_and_drops_export_name() {
        let mut cfg = config(false);
        cfg.refuse = Some("server is at its limit".into());
        let mut h = Handshake::new(cfg.clone());
        h.greeting(&mut Vec::new());
        let mut out = Vec::new();
        h.feed(&(FLAG_C_FIXED_NEWSTYLE).to_be_bytes(), &mut out)
            .unwrap();
        let (out, outcome) = run(&mut h, &opt(OPT_GO, &go_data("disk0", &[])));
        assert_eq!(outcome, None, "the client may try again or abort");
        assert_eq!(out, rep(OPT_GO, REP_ERR_POLICY, b"server is at its limit"));
        // Listing still works.
        let (out, _) = run(&mut h, &opt(OPT_LIST, b""));
        assert!(!out.is_empty());
        let mut h = Handshake::new(cfg);
        h.greeting(&mut Vec::new());
        h.feed(&(FLAG_C_FIXED_NEWSTYLE).to_be_bytes(), &mut Vec::new())
            .unwrap();
        let (_, outcome) = run(&mut h, &opt(OPT_EXPORT_NAME, b"disk0"));
        assert_eq!(outcome, Some(Outcome::Disconnect));
    }

    /// A handshake past the greeting (discarded) and, if `flags` is given,
    /// past the client flags.
    fn started(flags: Option<u32>) -> Handshake {
        let mut h = Handshake::new(config(false));
        let mut out = Vec::new();
        h.greeting(&mut out);
        if let Some(flags) = flags {
            assert_eq!(h.feed(&flags.to_be_bytes(), &mut out).unwrap(), (4, None));
        }
        h
    }

    fn opt(option: u32, data: &[u8]) -> Vec<u8> {
        let mut v = IHAVEOPT.to_be_bytes().to_vec();
        v.extend_from_slice(&option.to_be_bytes());
        v.extend_from_slice(&(data.len() as u32).to_be_bytes());
        v.extend_from_slice(data);
        v
    }

    fn rep(option: u32, reply_type: u32, data: &[u8]) -> Vec<u8> {
        let mut v = vec![0x00, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9];
        v.extend_from_slice(&option.to_be_bytes());
        v.extend_from_slice(&reply_type.to_be_bytes());
        v.extend_from_slice(&(data.len() as u32).to_be_bytes());
        v.extend_from_slice(data);
        v
    }

    fn go_data(name: &str, infos: &[u16]) -> Vec<u8> {
        let mut v = (name.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(name.as_bytes());
        v.extend_from_slice(&(infos.len() as u16).to_be_bytes());
        for i in infos {
            v.extend_from_slice(&i.to_be_bytes());
        }
        v
    }

    fn meta_data(name: &str, queries: &[&str]) -> Vec<u8> {
        let mut v = (name.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(name.as_bytes());
        v.extend_from_slice(&(queries.len() as u32).to_be_bytes());
        for q in queries {
            v.extend_from_slice(&(q.len() as u32).to_be_bytes());
            v.extend_from_slice(q.as_bytes());
        }
        v
    }

    fn info_export(option: u32, size: u64, flags: u16) -> Vec<u8> {
        let mut d = INFO_EXPORT.to_be_bytes().to_vec();
        d.extend_from_slice(&size.to_be_bytes());
        d.extend_from_slice(&flags.to_be_bytes());
        rep(option, REP_INFO, &d)
    }

    fn info_block_size(option: u32, min: u32, pref: u32, max: u32) -> Vec<u8> {
        let mut d = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
        for v in [min, pref, max] {
            d.extend_from_slice(&v.to_be_bytes());
        }
        rep(option, REP_INFO, &d)
    }

    fn info_string(option: u32, info: u16, s: &str) -> Vec<u8> {
        let mut d = info.to_be_bytes().to_vec();
        d.extend_from_slice(s.as_bytes());
        rep(option, REP_INFO, &d)
    }

    fn meta_reply(option: u32, id: u32) -> Vec<u8> {
        let mut d = id.to_be_bytes().to_vec();
        d.extend_from_slice(b"base:allocation");
        rep(option, REP_META_CONTEXT, &d)
    }

    const RW_FLAGS: u16 = FLAG_HAS_FLAGS
        | FLAG_SEND_FLUSH
        | FLAG_SEND_FUA
        | FLAG_SEND_CACHE
        | FLAG_SEND_TRIM
        | FLAG_SEND_WRITE_ZEROES
        | FLAG_SEND_FAST_ZERO
        | FLAG_CAN_MULTI_CONN;
    const RO_FLAGS: u16 =
        FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_CACHE | FLAG_READ_ONLY;

    /// Feeds `input` in one go; asserts everything was consumed.
    fn run(h: &mut Handshake, input: &[u8]) -> (Vec<u8>, Option<Outcome>) {
        let mut out = Vec::new();
        let (n, outcome) = h.feed(input, &mut out).unwrap();
        assert_eq!(n, input.len(), "all input consumed");
        (out, outcome)
    }

    /// Feeds `input` one byte at a time the way a connection would: append to
    /// a buffer, feed the buffer, drop what was consumed.
    fn run_bytewise(h: &mut Handshake, input: &[u8]) -> (Vec<u8>, Option<Outcome>, usize) {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let mut total = 0;
        for &b in input {
            buf.push(b);
            let (n, outcome) = h.feed(&buf, &mut out).unwrap();
            assert!(n <= buf.len());
            buf.drain(..n);
            total += n;
            if outcome.is_some() {
                return (out, outcome, total);
            }
        }
        (out, None, total)
    }

    #[test]
    fn greeting_bytes() {
        let mut h = Handshake::new(config(false));
        let mut out = Vec::new();
        h.greeting(&mut out);
        assert_eq!(out, b"NBDMAGICIHAVEOPT\x00\x03");
    }

    #[test]
    fn feed_before_greeting_is_an_error() {
        let mut h = Handshake::new(config(false));
        assert_eq!(
            h.feed(&[0; 4], &mut Vec::new()),
            Err(HandshakeError::GreetingNotSent)
        );
    }

    #[test]
    fn client_flags_wait_for_four_bytes() {
        let mut h = started(None);
        let mut out = Vec::new();
        for len in 0..4 {
            assert_eq!(h.feed(&[0, 0, 0, 3][..len], &mut out).unwrap(), (0, None));
        }
        assert_eq!(h.feed(&[0, 0, 0, 3], &mut out).unwrap(), (4, None));
        assert!(out.is_empty());
    }

    #[test]
    fn unknown_client_flags_are_fatal() {
        let mut h = started(None);
        assert_eq!(
            h.feed(&4u32.to_be_bytes(), &mut Vec::new()),
            Err(HandshakeError::UnknownClientFlags(4))
        );
        assert_eq!(h.feed(&[], &mut Vec::new()), Err(HandshakeError::Finished));
    }

    #[test]
    fn client_without_fixed_newstyle_is_still_served() {
        let mut h = started(Some(0));
        let (out, outcome) = run(&mut h, &opt(OPT_LIST, &[]));
        assert!(outcome.is_none());
        assert!(out.ends_with(&rep(OPT_LIST, REP_ACK, &[])));
    }

    #[test]
    fn bad_option_magic_is_fatal_after_eight_bytes() {
        let mut h = started(Some(1));
        let mut out = Vec::new();
        assert_eq!(h.feed(b"IHAVEOP", &mut out).unwrap(), (0, None));
        assert_eq!(
            h.feed(b"IHAVEOPX", &mut out),
            Err(HandshakeError::BadOptionMagic(0x4948_4156_454f_5058))
        );
    }

    #[test]
    fn export_name_sends_size_flags_and_zeroes() {
        let mut h = started(Some(FLAG_C_FIXED_NEWSTYLE));
        let (out, outcome) = run(&mut h, &opt(OPT_EXPORT_NAME, b"disk0"));
        let mut want = (1u64 << 20).to_be_bytes().to_vec();
        want.extend_from_slice(&RW_FLAGS.to_be_bytes());
        want.extend_from_slice(&[0; 124]);
        assert_eq!(out, want);
        assert_eq!(
            outcome,
            Some(Outcome::Transmission {
                export: malloc_export(),
                flags: RW_FLAGS,
                structured_replies: false,
                meta_context_base_allocation: None,
            })
        );
        assert_eq!(h.feed(&[], &mut Vec::new()), Err(HandshakeError::Finished));
    }

    #[test]
    fn export_name_honours_no_zeroes() {
        let mut h = started(Some(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES));
        let (out, _) = run(&mut h, &opt(OPT_EXPORT_NAME, b"null0"));
        let mut want = (1u64 << 30).to_be_bytes().to_vec();
        want.extend_from_slice(&RO_FLAGS.to_be_bytes());
        assert_eq!(out, want);
    }

    #[test]
    fn export_name_empty_selects_the_default_export() {
        let mut h = started(Some(3));
        let (out, outcome) = run(&mut h, &opt(OPT_EXPORT_NAME, b""));
        assert_eq!(out.len(), 10);
        match outcome {
            Some(Outcome::Transmission { export, .. }) => assert_eq!(export.name, "disk0"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn export_name_unknown_is_a_hard_disconnect() {
        let mut h = started(Some(3));
        let (out, outcome) = run(&mut h, &opt(OPT_EXPORT_NAME, b"nope"));
        assert!(out.is_empty());
        assert_eq!(outcome, Some(Outcome::Disconnect));

        let mut h = started(Some(3));
        let (out, outcome) = run(&mut h, &opt(OPT_EXPORT_NAME, &[0xff, 0xfe]));
        assert!(out.is_empty());
        assert_eq!(outcome, Some(Outcome::Disconnect));
    }

    #[test]
    fn export_name_over_long_disconnects_without_reading_it() {
        let mut h = started(Some(3));
        let mut header = IHAVEOPT.to_be_bytes().to_vec();
        header.extend_from_slice(&OPT_EXPORT_NAME.to_be_bytes());
        header.extend_from_slice(&u32::MAX.to_be_bytes());
        let (out, outcome) = run(&mut h, &header);
        assert!(out.is_empty());
        assert_eq!(outcome, Some(Outcome::Disconnect));
    }

    #[test]
    fn go_replies_export_block_size_then_ack() {
        let mut h = started(Some(3));
        let (out, outcome) = run(&mut h, &opt(OPT_GO, &go_data("disk0", &[INFO_BLOCK_SIZE])));
        let mut want = info_export(OPT_GO, 1 << 20, RW_FLAGS);
        want.extend(info_block_size(OPT_GO, 512, 4096, MAX_PAYLOAD));
        want.extend(rep(OPT_GO, REP_ACK, &[]));
        assert_eq!(out, want);
        assert_eq!(
            outcome,
            Some(Outcome::Transmission {
                export: malloc_export(),
                flags: RW_FLAGS,
                structured_replies: false,
                meta_context_base_allocation: None,
            })
        );
    }

    #[test]
    fn go_without_requests_still_sends_block_size() {
        let mut h = started(Some(3));
        let (out, _) = run(&mut h, &opt(OPT_GO, &go_data("null0", &[])));
        let mut want = info_export(OPT_GO, 1 << 30, RO_FLAGS);
        want.extend(info_block_size(OPT_GO, 4096, 4096, 1 << 20));
        want.extend(rep(OPT_GO, REP_ACK, &[]));
        assert_eq!(out, want);
    }

    #[test]
    fn info_sends_name_and_description_when_asked_and_stays_in_options() {
        let mut h = started(Some(3));
        let data = go_data("", &[INFO_DESCRIPTION, INFO_NAME, 0x7777, INFO_NAME]);
        let (out, outcome) = run(&mut h, &opt(OPT_INFO, &data));
        assert!(outcome.is_none(), "INFO does not end the phase");
        let mut want = info_export(OPT_INFO, 1 << 20, RW_FLAGS);
        want.extend(info_string(OPT_INFO, INFO_NAME, "disk0"));
        want.extend(info_string(OPT_INFO, INFO_DESCRIPTION, "malloc disk"));
        want.extend(info_block_size(OPT_INFO, 512, 4096, MAX_PAYLOAD));
        want.extend(rep(OPT_INFO, REP_ACK, &[]));
        assert_eq!(out, want);

        // The phase goes on: a GO afterwards enters transmission.
        let (_, outcome) = run(&mut h, &opt(OPT_GO, &go_data("disk0", &[])));
        assert!(matches!(outcome, Some(Outcome::Transmission { .. })));
    }

    #[test]
    fn info_and_go_for_an_unknown_export_get_err_unknown() {
        for option in [OPT_INFO, OPT_GO] {
            let mut h = started(Some(3));
            let (out, outcome) = run(&mut h, &opt(option, &go_data("nope", &[INFO_NAME])));
            assert_eq!(out, rep(option, REP_ERR_UNKNOWN, b"unknown export"));
            assert!(outcome.is_none(), "the client may try again");
        }
    }

    #[test]
    fn malformed_go_gets_err_invalid() {
        let cases: Vec<(Vec<u8>, &[u8])> = vec![
            (vec![0, 0, 0], b"malformed export name"),
            (vec![0, 0, 0, 9, b'a'], b"malformed export name"),
            (vec![0, 0, 0, 0], b"missing information request count"),
            (
                vec![0, 0, 0, 0, 0, 2, 0, 1],
                b"information request count mismatch",
            ),
            (
                vec![0, 0, 0, 0, 0, 0, 0],
                b"information request count mismatch",
            ),
            (
                vec![0, 0, 0, 2, 0xff, 0xfe, 0, 0],
                b"export name is not UTF-8",
            ),
        ];
        for (data, message) in cases {
            let mut h = started(Some(3));
            let (out, outcome) = run(&mut h, &opt(OPT_GO, &data));
            assert_eq!(out, rep(OPT_GO, REP_ERR_INVALID, message), "{data:?}");
            assert!(outcome.is_none());
        }
        // A name over the 4096-byte string limit.
        let mut h = started(Some(3));
        let long = "x".repeat(MAX_STRING_LEN + 1);
        let (out, _) = run(&mut h, &opt(OPT_GO, &go_data(&long, &[])));
        assert_eq!(out, rep(OPT_GO, REP_ERR_INVALID, b"malformed export name"));
    }

    #[test]
    fn list_sends_one_server_reply_per_export_then_ack() {
        let mut h = started(Some(3));
        let (out, outcome) = run(&mut h, &opt(OPT_LIST, &[]));
        assert!(outcome.is_none());
        let mut d0 = 5u32.to_be_bytes().to_vec();
        d0.extend_from_slice(b"disk0malloc disk");
        let mut d1 = 5u32.to_be_bytes().to_vec();
        d1.extend_from_slice(b"null0");
        let mut want = rep(OPT_LIST, REP_SERVER, &d0);
        want.extend(rep(OPT_LIST, REP_SERVER, &d1));
        want.extend(rep(OPT_LIST, REP_ACK, &[]));
        assert_eq!(out, want);
    }

    #[test]
    fn list_with_data_is_invalid() {
        let mut h = started(Some(3));
        let (out, _) = run(&mut h, &opt(OPT_LIST, b"x"));
        assert_eq!(out, rep(OPT_LIST, REP_ERR_INVALID, b"LIST takes no data"));
    }

    #[test]
    fn abort_acks_and_ends() {
        let mut h = started(Some(3));
        let (out, outcome) = run(&mut h, &opt(OPT_ABORT, b"ignored"));
        assert_eq!(out, rep(OPT_ABORT, REP_ACK, &[]));
        assert_eq!(outcome, Some(Outcome::Abort));
        assert_eq!(h.feed(&[], &mut Vec::new()), Err(HandshakeError::Finished));
    }

    #[test]
    fn structured_reply_acks_and_is_reported() {
        let mut h = started(Some(3));
        let (out, _) = run(&mut h, &opt(OPT_STRUCTURED_REPLY, &[]));
        assert_eq!(out, rep(OPT_STRUCTURED_REPLY, REP_ACK, &[]));
        assert!(h.structured_replies());
        let (out, outcome) = run(&mut h, &opt(OPT_GO, &go_data("disk0", &[])));
        // SEND_DF is advertised once structured replies are on.
        assert!(out.starts_with(&info_export(OPT_GO, 1 << 20, RW_FLAGS | FLAG_SEND_DF)));
        assert_eq!(
            outcome,
            Some(Outcome::Transmission {
                export: malloc_export(),
                flags: RW_FLAGS | FLAG_SEND_DF,
                structured_replies: true,
                meta_context_base_allocation: None,
            })
        );
    }

    #[test]
    fn structured_reply_with_data_is_invalid() {
        let mut h = started(Some(3));
        let (out, _) = run(&mut h, &opt(OPT_STRUCTURED_REPLY, &[1]));
        assert_eq!(
            out,
            rep(
                OPT_STRUCTURED_REPLY,
                REP_ERR_INVALID,
                b"STRUCTURED_REPLY takes no data"
            )
        );
        assert!(!h.structured_replies());
    }

    #[test]
    fn set_meta_context_needs_structured_replies() {
        let mut h = started(Some(3));
        let data = meta_data("disk0", &["base:allocation"]);
        let (out, _) = run(&mut h, &opt(OPT_SET_META_CONTEXT, &data));
        assert_eq!(
            out,
            rep(
                OPT_SET_META_CONTEXT,
                REP_ERR_INVALID,
                b"negotiate structured replies first"
            )
        );
    }

    #[test]
    fn set_meta_context_selects_base_allocation_for_go() {
        let mut h = started(Some(3));
        run(&mut h, &opt(OPT_STRUCTURED_REPLY, &[]));
        let data = meta_data(
            "disk0",
            &["qemu:dirty-bitmap:x", "base:allocation", "base:allocation"],
        );
        let (out, _) = run(&mut h, &opt(OPT_SET_META_CONTEXT, &data));
        let mut want = meta_reply(OPT_SET_META_CONTEXT, BASE_ALLOCATION_ID);
        want.extend(rep(OPT_SET_META_CONTEXT, REP_ACK, &[]));
        assert_eq!(
            out, want,
            "one reply for the context, none for unknown namespaces"
        );
        let (_, outcome) = run(&mut h, &opt(OPT_GO, &go_data("disk0", &[])));
        match outcome {
            Some(Outcome::Transmission {
                meta_context_base_allocation,
                structured_replies,
                ..
            }) => {
                assert!(structured_replies);
                assert_eq!(meta_context_base_allocation, Some(BASE_ALLOCATION_ID));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn set_meta_context_for_another_export_does_not_carry_over() {
        let mut h = started(Some(3));
        run(&mut h, &opt(OPT_STRUCTURED_REPLY, &[]));
        run(
            &mut h,
            &opt(
                OPT_SET_META_CONTEXT,
                &meta_data("null0", &["base:allocation"]),
            ),
        );
        let (_, outcome) = run(&mut h, &opt(OPT_GO, &go_data("disk0", &[])));
        assert!(matches!(
            outcome,
            Some(Outcome::Transmission {
                meta_context_base_allocation: None,
                ..
            })
        ));
    }

    #[test]
    fn set_meta_context_with_no_match_or_no_queries_selects_nothing() {
        for queries in [
            &[][..],
            &["base:"][..],
            &["x-foo:bar"][..],
            &["base:nothing"][..],
        ] {
            let mut h = started(Some(3));
            run(&mut h, &opt(OPT_STRUCTURED_REPLY, &[]));
            // A first SET that selects, then one that replaces it with nothing.
            run(
                &mut h,
                &opt(
                    OPT_SET_META_CONTEXT,
                    &meta_data("disk0", &["base:allocation"]),
                ),
            );
            let (out, _) = run(
                &mut h,
                &opt(OPT_SET_META_CONTEXT, &meta_data("disk0", queries)),
            );
            assert_eq!(out, rep(OPT_SET_META_CONTEXT, REP_ACK, &[]), "{queries:?}");
            let (_, outcome) = run(&mut h, &opt(OPT_GO, &go_data("disk0", &[])));
            assert!(matches!(
                outcome,
                Some(Outcome::Transmission {
                    meta_context_base_allocation: None,
                    ..
                })
            ));
        }
    }

    #[test]
    fn set_meta_context_failure_clears_the_selection() {
        let mut h = started(Some(3));
        run(&mut h, &opt(OPT_STRUCTURED_REPLY, &[]));
        run(
            &mut h,
            &opt(
                OPT_SET_META_CONTEXT,
                &meta_data("disk0", &["base:allocation"]),
            ),
        );
        let (out, _) = run(
            &mut h,
            &opt(
                OPT_SET_META_CONTEXT,
                &meta_data("nope", &["base:allocation"]),
            ),
        );
        assert_eq!(
            out,
            rep(OPT_SET_META_CONTEXT, REP_ERR_UNKNOWN, b"unknown export")
        );
        let (_, outcome) = run(&mut h, &opt(OPT_GO, &go_data("disk0", &[])));
        assert!(matches!(
            outcome,
            Some(Outcome::Transmission {
                meta_context_base_allocation: None,
                ..
            })
        ));
    }

    #[test]
    fn malformed_meta_context_gets_err_invalid() {
        let mut trailing = meta_data("disk0", &["base:allocation"]);
        trailing.push(0);
        let mut huge_count = meta_data("disk0", &[]);
        let n = huge_count.len();
        huge_count[n - 4..].copy_from_slice(&u32::MAX.to_be_bytes());
        let mut overrun = meta_data("disk0", &["base:allocation"]);
        overrun.pop();
        let cases: Vec<(Vec<u8>, &[u8])> = vec![
            (vec![0, 0], b"malformed export name"),
            (vec![0, 0, 0, 0], b"missing query count"),
            (huge_count, b"malformed query"),
            (overrun, b"malformed query"),
            (trailing, b"trailing data after queries"),
        ];
        for option in [OPT_LIST_META_CONTEXT, OPT_SET_META_CONTEXT] {
            for (data, message) in &cases {
                let mut h = started(Some(3));
                run(&mut h, &opt(OPT_STRUCTURED_REPLY, &[]));
                let (out, _) = run(&mut h, &opt(option, data));
                assert_eq!(
                    out,
                    rep(option, REP_ERR_INVALID, message),
                    "{option} {data:?}"
                );
            }
        }
    }

    #[test]
    fn list_meta_context_without_queries_lists_base_allocation() {
        // Allowed before STRUCTURED_REPLY too; the id is reserved (0).
        let mut h = started(Some(3));
        let (out, _) = run(
            &mut h,
            &opt(OPT_LIST_META_CONTEXT, &meta_data("disk0", &[])),
        );
        let mut want = meta_reply(OPT_LIST_META_CONTEXT, 0);
        want.extend(rep(OPT_LIST_META_CONTEXT, REP_ACK, &[]));
        assert_eq!(out, want);
    }

    #[test]
    fn list_meta_context_queries() {
        let cases: [(&[&str], bool); 5] = [
            (&["base:"], true),
            (&["base:allocation"], true),
            (&["base:", "base:allocation"], true),
            (&["x-foo:"], false),
            (&["base:other", "qemu:dirty-bitmap:a"], false),
        ];
        for (queries, listed) in cases {
            let mut h = started(Some(3));
            let (out, _) = run(
                &mut h,
                &opt(OPT_LIST_META_CONTEXT, &meta_data("disk0", queries)),
            );
            let mut want = if listed {
                meta_reply(OPT_LIST_META_CONTEXT, 0)
            } else {
                Vec::new()
            };
            want.extend(rep(OPT_LIST_META_CONTEXT, REP_ACK, &[]));
            assert_eq!(out, want, "{queries:?}");
        }
        // LIST does not select anything.
        let mut h = started(Some(3));
        run(&mut h, &opt(OPT_STRUCTURED_REPLY, &[]));
        run(
            &mut h,
            &opt(
                OPT_LIST_META_CONTEXT,
                &meta_data("disk0", &["base:allocation"]),
            ),
        );
        let (_, outcome) = run(&mut h, &opt(OPT_GO, &go_data("disk0", &[])));
        assert!(matches!(
            outcome,
            Some(Outcome::Transmission {
                meta_context_base_allocation: None,
                ..
            })
        ));
    }

    #[test]
    fn list_meta_context_unknown_export() {
        let mut h = started(Some(3));
        let (out, _) = run(&mut h, &opt(OPT_LIST_META_CONTEXT, &meta_data("nope", &[])));
        assert_eq!(
            out,
            rep(OPT_LIST_META_CONTEXT, REP_ERR_UNKNOWN, b"unknown export")
        );
    }

    #[test]
    fn starttls_without_tls_is_policy() {
        let mut h = started(Some(3));
        let (out, outcome) = run(&mut h, &opt(OPT_STARTTLS, &[]));
        assert_eq!(
            out,
            rep(OPT_STARTTLS, REP_ERR_POLICY, b"TLS is not available")
        );
        assert!(outcome.is_none());
        let (out, _) = run(&mut h, &opt(OPT_STARTTLS, b"x"));
        assert_eq!(
            out,
            rep(OPT_STARTTLS, REP_ERR_INVALID, b"STARTTLS takes no data")
        );
    }

    #[test]
    fn starttls_with_tls_acks_and_resets_state() {
        let mut h = Handshake::new(config(true));
        let mut out = Vec::new();
        h.greeting(&mut out);
        run(&mut h, &3u32.to_be_bytes());
        run(&mut h, &opt(OPT_STRUCTURED_REPLY, &[]));
        assert_eq!(h.tls_established(), Err(HandshakeError::NoTlsPending));
        let mut input = opt(OPT_STARTTLS, &[]);
        input.extend(opt(OPT_LIST, &[])); // must wait for the TLS handshake
        let mut out = Vec::new();
        let (n, outcome) = h.feed(&input, &mut out).unwrap();
        assert_eq!(n, OPTION_HEADER_LEN);
        assert_eq!(outcome, Some(Outcome::StartTls));
        assert_eq!(out, rep(OPT_STARTTLS, REP_ACK, &[]));
        assert_eq!(
            h.feed(&input[n..], &mut out),
            Err(HandshakeError::TlsPending)
        );
        h.tls_established().unwrap();
        assert!(!h.structured_replies(), "negotiated state is forgotten");
        let (out, _) = run(&mut h, &opt(OPT_STARTTLS, &[]));
        assert_eq!(
            out,
            rep(OPT_STARTTLS, REP_ERR_INVALID, b"TLS is already active")
        );
    }

    #[test]
    fn unknown_options_get_unsup_and_the_phase_goes_on() {
        let mut h = started(Some(3));
        for option in [OPT_PEEK_EXPORT, OPT_EXTENDED_HEADERS, 0, 12, 0xdead_beef] {
            let (out, outcome) = run(&mut h, &opt(option, b"some data"));
            assert_eq!(out, rep(option, REP_ERR_UNSUP, b"unsupported option"));
            assert!(outcome.is_none());
        }
        let (_, outcome) = run(&mut h, &opt(OPT_GO, &go_data("disk0", &[])));
        assert!(matches!(outcome, Some(Outcome::Transmission { .. })));
    }

    #[test]
    fn over_long_option_is_skipped_in_pieces_then_refused() {
        let mut h = started(Some(3));
        let mut header = IHAVEOPT.to_be_bytes().to_vec();
        header.extend_from_slice(&OPT_GO.to_be_bytes());
        let len = MAX_OPTION_LEN + 10;
        header.extend_from_slice(&len.to_be_bytes());
        let mut out = Vec::new();
        assert_eq!(h.feed(&header, &mut out).unwrap(), (16, None));
        // The data streams in; every piece is consumed, nothing is replied yet.
        let chunk = vec![0xaa; 4096];
        let mut left = len as usize;
        while left > chunk.len() {
            assert_eq!(h.feed(&chunk, &mut out).unwrap(), (chunk.len(), None));
            left -= chunk.len();
        }
        assert!(out.is_empty());
        // The last piece carries the next option too.
        let mut last = vec![0xaa; left];
        last.extend(opt(OPT_LIST, &[]));
        let (n, outcome) = h.feed(&last, &mut out).unwrap();
        assert_eq!(n, last.len());
        assert!(outcome.is_none());
        let mut want = rep(OPT_GO, REP_ERR_TOO_BIG, b"option data too long");
        want.extend(rep(OPT_LIST, REP_SERVER, &{
            let mut d = 5u32.to_be_bytes().to_vec();
            d.extend_from_slice(b"disk0malloc disk");
            d
        }));
        assert!(out.starts_with(&want));
    }

    #[test]
    fn four_gib_option_allocates_nothing() {
        let mut h = started(Some(3));
        let mut header = IHAVEOPT.to_be_bytes().to_vec();
        header.extend_from_slice(&0x1234u32.to_be_bytes());
        header.extend_from_slice(&u32::MAX.to_be_bytes());
        let mut out = Vec::new();
        assert_eq!(h.feed(&header, &mut out).unwrap(), (16, None));
        assert_eq!(out.capacity(), 0);
        // Skipping a megabyte at a time would take 4096 calls; show the
        // state is a counter by skipping a few and checking nothing grows.
        let chunk = vec![0; 1 << 20];
        for _ in 0..4 {
            assert_eq!(h.feed(&chunk, &mut out).unwrap(), (chunk.len(), None));
        }
        assert_eq!(out.capacity(), 0);
    }

    #[test]
    fn option_waits_for_all_of_its_data() {
        let mut h = started(Some(3));
        let input = opt(OPT_GO, &go_data("disk0", &[INFO_BLOCK_SIZE]));
        let mut out = Vec::new();
        for len in 0..input.len() {
            assert_eq!(
                h.feed(&input[..len], &mut out).unwrap(),
                (0, None),
                "len {len}"
            );
        }
        assert!(out.is_empty());
        let (n, outcome) = h.feed(&input, &mut out).unwrap();
        assert_eq!(n, input.len());
        assert!(outcome.is_some());
    }

    #[test]
    fn bytes_after_go_are_left_for_transmission() {
        let mut h = started(Some(3));
        let mut input = opt(OPT_GO, &go_data("disk0", &[]));
        let go_len = input.len();
        input.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        let (n, outcome) = h.feed(&input, &mut Vec::new()).unwrap();
        assert_eq!(n, go_len);
        assert!(outcome.is_some());
    }

    /// The option phase of a libnbd client (nbdinfo --map): flags,
    /// STRUCTURED_REPLY, SET_META_CONTEXT base:allocation, GO with
    /// INFO_BLOCK_SIZE.
    fn libnbd_session() -> Vec<u8> {
        let mut v = 3u32.to_be_bytes().to_vec();
        v.extend(opt(OPT_STRUCTURED_REPLY, &[]));
        v.extend(opt(
            OPT_SET_META_CONTEXT,
            &meta_data("", &["base:allocation"]),
        ));
        v.extend(opt(OPT_GO, &go_data("", &[INFO_BLOCK_SIZE])));
        v
    }

    #[test]
    fn libnbd_session_byte_by_byte_matches_one_shot() {
        let input = libnbd_session();
        let mut one = started(None);
        let (out_one, outcome_one) = run(&mut one, &input);
        let mut bytewise = started(None);
        let (out_bw, outcome_bw, consumed) = run_bytewise(&mut bytewise, &input);
        assert_eq!(consumed, input.len());
        assert_eq!(out_one, out_bw);
        assert_eq!(outcome_one, outcome_bw);

        let flags = RW_FLAGS | FLAG_SEND_DF;
        let mut want = rep(OPT_STRUCTURED_REPLY, REP_ACK, &[]);
        want.extend(meta_reply(OPT_SET_META_CONTEXT, BASE_ALLOCATION_ID));
        want.extend(rep(OPT_SET_META_CONTEXT, REP_ACK, &[]));
        want.extend(info_export(OPT_GO, 1 << 20, flags));
        want.extend(info_block_size(OPT_GO, 512, 4096, MAX_PAYLOAD));
        want.extend(rep(OPT_GO, REP_ACK, &[]));
        assert_eq!(out_one, want);
        assert_eq!(
            outcome_one,
            Some(Outcome::Transmission {
                export: malloc_export(),
                flags,
                structured_replies: true,
                meta_context_base_allocation: Some(BASE_ALLOCATION_ID),
            })
        );
    }

    #[test]
    fn qemu_style_session_byte_by_byte() {
        // EXTENDED_HEADERS first (refused), then the usual, then LIST.
        let mut input = 3u32.to_be_bytes().to_vec();
        input.extend(opt(OPT_EXTENDED_HEADERS, &[]));
        input.extend(opt(OPT_STRUCTURED_REPLY, &[]));
        input.extend(opt(OPT_LIST, &[]));
        input.extend(opt(OPT_INFO, &go_data("null0", &[INFO_NAME])));
        input.extend(opt(OPT_EXPORT_NAME, b"null0"));
        let mut h = started(None);
        let (out, outcome, consumed) = run_bytewise(&mut h, &input);
        assert_eq!(consumed, input.len());
        assert!(out.starts_with(&rep(
            OPT_EXTENDED_HEADERS,
            REP_ERR_UNSUP,
            b"unsupported option"
        )));
        let mut tail = (1u64 << 30).to_be_bytes().to_vec();
        tail.extend_from_slice(&(RO_FLAGS | FLAG_SEND_DF).to_be_bytes());
        assert!(out.ends_with(&tail), "NO_ZEROES honoured");
        assert!(matches!(
            outcome,
            Some(Outcome::Transmission {
                structured_replies: true,
                ..
            })
        ));
    }

    #[test]
    fn block_limits_are_sanitised() {
        let mut e = malloc_export();
        assert_eq!(
            e.block_limits(),
            BlockLimits {
                minimum: 512,
                preferred: 4096,
                maximum: MAX_PAYLOAD
            }
        );
        e.block_size = 0;
        e.preferred = 0;
        e.max_payload = 0;
        assert_eq!(
            e.block_limits(),
            BlockLimits {
                minimum: 1,
                preferred: 512,
                maximum: MAX_PAYLOAD
            }
        );
        e.block_size = 3000; // not a power of two: rounded up
        e.preferred = 5000;
        e.max_payload = 100_000; // rounded down to a multiple of 4096
        assert_eq!(
            e.block_limits(),
            BlockLimits {
                minimum: 4096,
                preferred: 8192,
                maximum: 98_304
            }
        );
        e.block_size = 1 << 20; // capped at 64 KiB
        e.preferred = u32::MAX;
        e.max_payload = u32::MAX;
        assert_eq!(
            e.block_limits(),
            BlockLimits {
                minimum: 1 << 16,
                preferred: MAX_PAYLOAD,
                maximum: MAX_PAYLOAD
            }
        );
        e.block_size = 512;
        e.max_payload = 100; // below the floor
        assert_eq!(
            e.block_limits(),
            BlockLimits {
                minimum: 512,
                preferred: 512,
                maximum: 512
            }
        );
    }

    #[test]
    fn transmission_flags_follow_the_export() {
        let rw = malloc_export();
        assert_eq!(transmission_flags(&rw, false), RW_FLAGS);
        assert_eq!(transmission_flags(&rw, true), RW_FLAGS | FLAG_SEND_DF);
        let ro = null_export();
        assert_eq!(transmission_flags(&ro, false), RO_FLAGS);
        let mut rw_single = rw.clone();
        rw_single.can_multi_conn = false;
        assert_eq!(
            transmission_flags(&rw_single, false),
            RW_FLAGS & !FLAG_CAN_MULTI_CONN
        );
    }

    #[test]
    fn allocation_flags() {
        assert_eq!(Allocation::Data.block_status_flags(), 0);
        assert_eq!(
            Allocation::Zero.block_status_flags(),
            STATE_HOLE | STATE_ZERO
        );
    }

    /// Checks that `out` is a sequence of well-formed option replies.
    fn well_formed_replies(mut out: &[u8]) -> bool {
        while !out.is_empty() {
            if out.len() < OPTION_REPLY_HEADER_LEN || be_u64(out) != OPTION_REPLY_MAGIC {
                return false;
            }
            let len = be_u32(&out[16..]) as usize;
            if out.len() < OPTION_REPLY_HEADER_LEN + len {
                return false;
            }
            out = &out[OPTION_REPLY_HEADER_LEN + len..];
        }
        true
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(
            input in proptest::collection::vec(any::<u8>(), 0..2048),
            chunk in 1usize..64,
            tls in any::<bool>(),
        ) {
            let mut h = Handshake::new(config(tls));
            let mut out = Vec::new();
            h.greeting(&mut out);
            out.clear();
            let mut buf = Vec::new();
            let mut ended = None;
            for piece in input.chunks(chunk) {
                buf.extend_from_slice(piece);
                match h.feed(&buf, &mut out) {
                    Ok((n, outcome)) => {
                        prop_assert!(n <= buf.len());
                        buf.drain(..n);
                        if let Some(Outcome::StartTls) = outcome {
                            h.tls_established().unwrap();
                        } else if outcome.is_some() {
                            ended = outcome;
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
            if !matches!(ended, Some(Outcome::Transmission { .. })) {
                prop_assert!(well_formed_replies(&out));
            }
        }

        #[test]
        fn options_with_arbitrary_data_never_panic(
            option in 0u32..16,
            data in proptest::collection::vec(any::<u8>(), 0..512),
            structured in any::<bool>(),
        ) {
            let mut h = started(Some(3));
            let mut out = Vec::new();
            if structured {
                h.feed(&opt(OPT_STRUCTURED_REPLY, &[]), &mut out).unwrap();
            }
            let input = opt(option, &data);
            let (n, outcome) = h.feed(&input, &mut out).unwrap();
            prop_assert_eq!(n, input.len());
            if !matches!(outcome, Some(Outcome::Transmission { .. })) || option == OPT_GO {
                prop_assert!(well_formed_replies(&out));
            }
        }
    }
}
