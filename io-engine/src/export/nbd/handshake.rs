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
//! - TLS ([`TlsMode`]): with `off`, `STARTTLS` gets `ERR_POLICY`. With
//!   `allow` and `require` it gets `ACK` and the outcome
//!   [`Outcome::StartTls`]; the phase goes on inside TLS, with structured
//!   replies and meta contexts negotiated in the clear forgotten, as the
//!   spec asks; a second `STARTTLS` gets `ERR_INVALID`. With `require`,
//!   before `STARTTLS` every option but `ABORT` gets `ERR_TLS_REQD`
//!   (`INFO` and `GO` included, whatever the export), and `EXPORT_NAME`,
//!   which has no error reply, a disconnect.

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use super::proto::*;
use super::{ExportInfo, ExportLookup, TlsMode};

/// Longest option data handled; longer options are skipped and refused.
pub const MAX_OPTION_LEN: u32 = 64 << 10;

/// The message of `ERR_TLS_REQD`.
const TLS_REQUIRED: &str = "TLS is required: send STARTTLS first";

/// Context id that `SET_META_CONTEXT` assigns to `base:allocation`.
pub const BASE_ALLOCATION_ID: u32 = 1;

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

/// What the option phase needs from the server.
#[derive(Clone)]
pub struct HandshakeConfig {
    /// The exports clients may choose from.
    pub exports: Arc<dyn ExportLookup>,
    /// Whether `STARTTLS` is offered, or required before anything else.
    pub tls: TlsMode,
}

impl fmt::Debug for HandshakeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandshakeConfig")
            .field("tls", &self.tls)
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
    /// `STARTTLS` accepted: send the `ACK` in the output in the clear, then
    /// run the TLS handshake; the option phase goes on inside TLS (feed it
    /// the decrypted bytes). Nothing the client sent after `STARTTLS` may
    /// be left in the clear: it must wait for the `ACK`.
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
    Done,
}

/// The option phase of one connection.
pub struct Handshake {
    config: HandshakeConfig,
    state: State,
    greeted: bool,
    no_zeroes: bool,
    structured: bool,
    /// `STARTTLS` was accepted: the options come through TLS.
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

/// A bounds-checked reader over one option's data.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.buf.split_at_checked(n)?;
        self.buf = tail;
        Some(head)
    }

    /// The next `N` bytes, as an array.
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, tail) = self.buf.split_first_chunk::<N>()?;
        self.buf = tail;
        Some(*head)
    }

    fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_be_bytes)
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

/// Appends an INFO reply; a payload too long for the reply's `u32`
/// length (never, in practice) is cut to fit.
fn put_info(out: &mut Vec<u8>, option: u32, info: u16, payload: &[u8]) {
    let payload = at_most(payload, u32::MAX as usize - 2);
    put_option_reply_header(out, option, REP_INFO, (2 + payload.len()) as u32);
    out.extend_from_slice(&info.to_be_bytes());
    out.extend_from_slice(payload);
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

    /// Whether `STARTTLS` was accepted.
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// Whether `option` must wait for TLS: the server requires it and the
    /// client has not started it; only `STARTTLS` and `ABORT` may come
    /// first (`EXPORT_NAME`, which cannot fail, is a disconnect).
    fn tls_required(&self, option: u32) -> bool {
        self.config.tls == TlsMode::Require
            && !self.tls
            && !matches!(option, OPT_STARTTLS | OPT_ABORT)
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
        // What is left of `input`, always a tail of it: the bytes consumed
        // are `input.len() - rest.len()`.
        let mut rest = input;
        loop {
            let pos = input.len() - rest.len();
            match self.state {
                State::Done => return Err(HandshakeError::Finished),
                State::ClientFlags => {
                    let Some((flags, tail)) = rest.split_first_chunk::<4>() else {
                        return Ok((pos, None));
                    };
                    let flags = u32::from_be_bytes(*flags);
                    if flags & !KNOWN_CLIENT_FLAGS != 0 {
                        self.state = State::Done;
                        return Err(HandshakeError::UnknownClientFlags(flags));
                    }
                    self.no_zeroes = flags & FLAG_C_NO_ZEROES != 0;
                    rest = tail;
                    self.state = State::Options;
                }
                State::Options => {
                    let Some(magic) = rest.first_chunk::<8>() else {
                        return Ok((pos, None));
                    };
                    let magic = u64::from_be_bytes(*magic);
                    if magic != IHAVEOPT {
                        self.state = State::Done;
                        return Err(HandshakeError::BadOptionMagic(magic));
                    }
                    let Some((h, tail)) = rest.split_first_chunk::<OPTION_HEADER_LEN>() else {
                        return Ok((pos, None));
                    };
                    let option = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
                    let len = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
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
                        rest = tail;
                        self.state = State::Discard {
                            option,
                            remaining: len,
                            reply,
                        };
                        continue;
                    }
                    let Some((data, tail)) = tail.split_at_checked(len as usize) else {
                        return Ok((pos, None));
                    };
                    rest = tail;
                    if let Some(outcome) = self.handle_option(option, data, out) {
                        if outcome != Outcome::StartTls {
                            self.state = State::Done;
                        }
                        return Ok((input.len() - rest.len(), Some(outcome)));
                    }
                }
                State::Discard {
                    option,
                    remaining,
                    reply,
                } => {
                    // At most `remaining`, a u32, and at most what is there.
                    let n = rest.len().min(remaining as usize);
                    rest = rest.get(n..).unwrap_or_default();
                    let remaining = remaining - n as u32;
                    if remaining > 0 {
                        self.state = State::Discard {
                            option,
                            remaining,
                            reply,
                        };
                        return Ok((input.len() - rest.len(), None));
                    }
                    self.state = State::Options;
                    let (reply, message) = if self.tls_required(option) {
                        (REP_ERR_TLS_REQD, TLS_REQUIRED)
                    } else if reply == REP_ERR_UNSUP {
                        (reply, "unsupported option")
                    } else {
                        (reply, "option data too long")
                    };
                    reply_error(out, option, reply, message);
                }
            }
        }
    }

    /// Handles one whole option; `Some` ends (or suspends) the phase.
    fn handle_option(&mut self, option: u32, data: &[u8], out: &mut Vec<u8>) -> Option<Outcome> {
        if self.tls_required(option) {
            if option == OPT_EXPORT_NAME {
                tracing::debug!("nbd: EXPORT_NAME before STARTTLS, TLS is required: disconnecting");
                return Some(Outcome::Disconnect);
            }
            reply_error(out, option, REP_ERR_TLS_REQD, TLS_REQUIRED);
            return None;
        }
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
            OPT_STARTTLS => self.starttls(data, out),
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

    fn starttls(&mut self, data: &[u8], out: &mut Vec<u8>) -> Option<Outcome> {
        let option = OPT_STARTTLS;
        if !data.is_empty() {
            reply_error(out, option, REP_ERR_INVALID, "STARTTLS takes no data");
            return None;
        }
        if self.config.tls == TlsMode::Off {
            // A client that requires TLS goes away.
            reply_error(out, option, REP_ERR_POLICY, "TLS is not available");
            return None;
        }
        if self.tls {
            // The spec: STARTTLS once TLS is negotiated is invalid.
            reply_error(out, option, REP_ERR_INVALID, "TLS is already negotiated");
            return None;
        }
        reply_ack(out, option);
        self.tls = true;
        // The spec: nothing negotiated in the clear carries over into TLS.
        self.structured = false;
        self.meta = None;
        Some(Outcome::StartTls)
    }

    /// Why attaching to `name` is refused now, if it is (the server or
    /// the export is at its connection limit): `GO` gets `ERR_POLICY` with
    /// it, `EXPORT_NAME` a disconnect (it has no error reply).
    fn refusal(&self, name: &str) -> Option<String> {
        self.config.exports.refusal(name)
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
mod tests;
