//! Block-device URIs in Mayastor's form: parsing and the canonical form.
//!
//! Thread: any; called by the registry when a device is created. Pure
//! functions over strings (no shared state, no locks); they allocate, so they
//! belong on the control path, never the data path.
//!
//! A bdev is created from a URI such as `null:///n0?size_mb=1024&blk_size=4096`,
//! `malloc:///m0?num_blocks=131072` or `uring:///dev/sdb?blk_size=4096`. This module turns such text into a
//! validated [`BdevSpec`] (kind, name, block size, block count, optional
//! uuid) or a [`UriError`] that says what was wrong, quotes the offending
//! text (through [`Quoted`], so at most 128 characters of it) and says what
//! is accepted. It creates nothing itself.
//!
//! Accepted form: `SCHEME:///NAME?PARAMS` where
//!
//! - `SCHEME` is `null` or `malloc` (case-insensitive);
//! - the three slashes are required: devices are local, so no host is given;
//! - `NAME` is one path segment of ASCII letters, digits, `-`, `_`, `.` and
//!   `:`, at most 255 bytes (percent-escapes are decoded first);
//! - `PARAMS` (percent-decoded) are exactly one of `size_mb=N` or
//!   `num_blocks=N`, then optionally `blk_size=512|4096` (default 512) and
//!   `uuid=UUID`; each at most once, in any order; anything else is an error;
//! - no `#fragment`.
//!
//! Devices with a backing (`uring`, `aio`) take the backing's absolute path
//! in place of the name: `uring:///var/lib/disk0.img`. Their parameters are
//! `blk_size`, `uuid`, `readonly=true|false`, `direct=true|false` (O_DIRECT,
//! default true), `size_mb=N` (create the file at this size if missing),
//! `name=NAME` (default: the path's last component) and, for `uring` only,
//! `iopoll=true|false` (polled completions on a block device that polls); `num_blocks` is not
//! accepted (the size is the backing's). Such a spec is completed
//! ([`BdevSpec::resolved`]) when its backing is opened: block size, block
//! count and uuid come from the backing then (see `file/`).
//!
//! The canonical form, kept in [`BdevSpec::uri`] and printed by its
//! `Display`, is `SCHEME:///NAME?size_mb=N&blk_size=B[&uuid=U]` (or
//! `num_blocks=N` in place of `size_mb`, as given): parameters in a fixed
//! order, numbers without leading zeros, the uuid lowercase and hyphenated,
//! `blk_size` always present. Equal specs print equal URIs, and parsing the
//! canonical form gives back the same spec.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use url::Url;
use uuid::Uuid;

use super::quoted::Quoted;

mod file_spec;

pub use file_spec::FileSpec;
use file_spec::{DIRECT, IOPOLL, NAME, READONLY};

/// Block size used when the URI gives no `blk_size`.
pub const DEFAULT_BLOCK_SIZE: u32 = 512;

/// The block sizes a URI may ask for.
pub const BLOCK_SIZES: [u32; 2] = [512, 4096];

/// Longest accepted device name, in bytes.
pub const MAX_NAME_LEN: usize = 255;

/// The query parameters a URI may carry, in canonical order.
pub const PARAMETERS: [&str; 8] = [
    SIZE_MB, NUM_BLOCKS, BLK_SIZE, UUID, READONLY, DIRECT, NAME, IOPOLL,
];

/// The parameters of a device with a backing (`uring`, `aio`; `iopoll`
/// is `uring`'s only).
pub const FILE_PARAMETERS: [&str; 7] = [BLK_SIZE, UUID, READONLY, DIRECT, SIZE_MB, NAME, IOPOLL];

const SIZE_MB: &str = "size_mb";
const NUM_BLOCKS: &str = "num_blocks";
const BLK_SIZE: &str = "blk_size";
const UUID: &str = "uuid";

/// Bytes in one `size_mb` unit (a MiB, as in Mayastor and SPDK).
const MIB: u64 = 1 << 20;

/// Known schemes, as listed in error messages (kept equal to [`BdevKind::ALL`]
/// by a test).
const KNOWN_SCHEMES: &str = "null, malloc, uring, aio";
/// Accepted parameters, as listed in error messages (kept equal to
/// [`PARAMETERS`] by a test).
const ACCEPTED_PARAMETERS: &str =
    "size_mb, num_blocks, blk_size, uuid, readonly, direct, name, iopoll";
/// The parameters of `null` and `malloc`, as listed in error messages.
const MEMORY_PARAMETERS: &str = "size_mb, num_blocks, blk_size, uuid";
/// The parameters of `uring` and `aio` (kept equal to [`FILE_PARAMETERS`]
/// by a test).
const FILE_PARAMETERS_TEXT: &str = "blk_size, uuid, readonly, direct, size_mb, name, iopoll";
/// Characters allowed in a name, as listed in error messages.
const NAME_CHARS: &str = "ASCII letters, digits, '-', '_', '.', ':'";

/// The kind of block device a URI asks for; its URI scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BdevKind {
    /// `null://`: discards writes, reads leave the buffer untouched; no memory behind it.
    Null,
    /// `malloc://`: a RAM disk in DMA memory.
    Malloc,
    /// `uring://`: a file or block device, through the reactor's io_uring.
    Uring,
    /// `aio://`: a file or block device, through Linux native AIO.
    Aio,
}

impl BdevKind {
    /// Every kind, in the order error messages list them.
    pub const ALL: [BdevKind; 4] = [
        BdevKind::Null,
        BdevKind::Malloc,
        BdevKind::Uring,
        BdevKind::Aio,
    ];

    /// The URI scheme of this kind: `"null"`, `"malloc"`, `"uring"`, `"aio"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            BdevKind::Null => "null",
            BdevKind::Malloc => "malloc",
            BdevKind::Uring => "uring",
            BdevKind::Aio => "aio",
        }
    }

    /// Whether the device has a backing file or block device (its URI
    /// gives a path, not a name and size).
    pub const fn has_backing(self) -> bool {
        matches!(self, BdevKind::Uring | BdevKind::Aio)
    }

    /// The kind whose scheme is `scheme` (ASCII case-insensitive), if any.
    pub fn from_scheme(scheme: &str) -> Option<BdevKind> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str().eq_ignore_ascii_case(scheme))
    }
}

impl fmt::Display for BdevKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A validated request for a block device, parsed from its URI.
///
/// Build one with [`parse`] (or `str::parse`) or [`BdevSpec::new`]; both
/// check every field and fill in [`uri`](BdevSpec::uri). The fields are
/// public for reading; a spec whose fields are changed by hand keeps its old
/// `uri`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BdevSpec {
    /// The device kind (the URI scheme).
    pub kind: BdevKind,
    /// The device name: 1 to 255 bytes of ASCII letters, digits, `-_.:`.
    pub name: String,
    /// Bytes per block: 512 or 4096.
    pub block_size: u32,
    /// Number of blocks; at least 1, and `num_blocks * block_size` fits u64.
    pub num_blocks: u64,
    /// The device uuid, if the URI gave one (never the nil uuid).
    pub uuid: Option<Uuid>,
    /// The canonical URI (see the module documentation).
    pub uri: String,
    /// The backing of a `uring` or `aio` device. Until the spec is
    /// [`resolved`](BdevSpec::resolved), such a spec's `block_size` is the
    /// `blk_size=` asked for (0: the backing's) and `num_blocks` is 0.
    pub backing: Option<FileSpec>,
}

impl BdevSpec {
    /// A spec from its parts, checked as [`parse`] checks a URI; its `uri`
    /// gives the size as `num_blocks`.
    pub fn new(
        kind: BdevKind,
        name: impl Into<String>,
        block_size: u32,
        num_blocks: u64,
        uuid: Option<Uuid>,
    ) -> Result<BdevSpec, UriError> {
        let name = name.into();
        if name.is_empty() {
            return Err(UriError::MissingName {
                uri: format!("{kind}:///"),
                kind,
            });
        }
        check_name(&name)?;
        if !BLOCK_SIZES.contains(&block_size) {
            return Err(UriError::UnsupportedBlockSize {
                value: block_size.to_string(),
            });
        }
        if num_blocks == 0 {
            return Err(UriError::ZeroSize { param: NUM_BLOCKS });
        }
        size_from_blocks(num_blocks, block_size)?;
        if let Some(uuid) = uuid
            && uuid.is_nil()
        {
            return Err(UriError::InvalidUuid {
                value: uuid.to_string(),
                reason: NIL_UUID.to_owned(),
            });
        }
        let uri = canonical_uri(kind, &name, Size::Blocks(num_blocks), block_size, uuid);
        Ok(BdevSpec {
            kind,
            name,
            block_size,
            num_blocks,
            uuid,
            uri,
            backing: None,
        })
    }

    /// A backed device's spec completed from its opened backing: its block
    /// size, block count and uuid, and the canonical URI naming them (so
    /// that a restart from the URI gets the same device).
    pub fn resolved(&self, block_size: u32, num_blocks: u64, uuid: Uuid) -> BdevSpec {
        let mut spec = self.clone();
        spec.block_size = block_size;
        spec.num_blocks = num_blocks;
        spec.uuid = Some(uuid);
        if let Some(backing) = &self.backing {
            spec.uri = backing.canonical_uri(self.kind.as_str(), block_size, Some(uuid));
        }
        spec
    }

    /// The device size in bytes: `num_blocks * block_size` (saturating at
    /// `u64::MAX`, which a checked spec never reaches).
    pub fn size_bytes(&self) -> u64 {
        self.num_blocks.saturating_mul(u64::from(self.block_size))
    }
}

impl fmt::Display for BdevSpec {
    /// Prints the canonical URI.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.uri)
    }
}

impl FromStr for BdevSpec {
    type Err = UriError;

    fn from_str(uri: &str) -> Result<BdevSpec, UriError> {
        parse(uri)
    }
}

/// Why a text is not an acceptable block-device URI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UriError {
    /// The text is not a URI at all.
    #[error(
        "{} is not a URI ({source}); expected SCHEME:///NAME?PARAMS, \
         e.g. \"malloc:///m0?size_mb=64\"",
        Quoted(.uri)
    )]
    Syntax {
        /// The text as given.
        uri: String,
        /// What the URL parser objected to.
        #[source]
        source: url::ParseError,
    },

    /// The scheme names no known device kind.
    #[error("unknown bdev scheme {}; known schemes: {KNOWN_SCHEMES}", Quoted(.scheme))]
    UnknownScheme {
        /// The scheme as the URL parser read it (lowercase).
        scheme: String,
    },

    /// The `//` after the scheme is missing (`null:n0`, `null:/n0`).
    #[error(
        "{} lacks the three slashes after the scheme; write {}",
        Quoted(.uri),
        Quoted(.suggestion)
    )]
    MissingSlashes {
        /// The text as given.
        uri: String,
        /// The same URI with three slashes.
        suggestion: String,
    },

    /// A host (or port, or user) was given; devices are local.
    #[error(
        "host {} given, but block devices are local and take no host; \
         use three slashes: {}",
        Quoted(.host),
        Quoted(.suggestion)
    )]
    HostGiven {
        /// The authority part as given: `[user@]host[:port]`.
        host: String,
        /// The URI with the host dropped (or moved into the name when there
        /// was no path, as in `malloc://m0`).
        suggestion: String,
    },

    /// A `#fragment` was given.
    #[error(
        "fragment {} is not accepted in a bdev URI; remove it",
        Quoted(&format!("#{}", .fragment))
    )]
    Fragment {
        /// The fragment, without the `#`.
        fragment: String,
    },

    /// The path is empty: no device name.
    #[error(
        "no device name in {}; put it after the three slashes, as in \"{kind}:///dev0\"",
        Quoted(.uri)
    )]
    MissingName {
        /// The text as given.
        uri: String,
        /// The kind the URI asked for.
        kind: BdevKind,
    },

    /// The name holds a character outside the allowed set.
    #[error("device name {} contains {ch:?}; allowed: {NAME_CHARS}", Quoted(.name))]
    InvalidNameChar {
        /// The name, percent-decoded.
        name: String,
        /// The first character not allowed.
        ch: char,
    },

    /// The name is `.` or `..`: path components, not names (an export
    /// name or a file named after the device would mean something else).
    #[error(
        "device name {} is reserved: `.` and `..` name directories, not devices",
        Quoted(.name)
    )]
    ReservedName {
        /// The name, percent-decoded.
        name: String,
    },

    /// The name is longer than [`MAX_NAME_LEN`] bytes.
    #[error(
        "device name {} is {len} bytes long; at most {MAX_NAME_LEN} are allowed",
        Quoted(.name)
    )]
    NameTooLong {
        /// The name, percent-decoded.
        name: String,
        /// Its length in bytes.
        len: usize,
    },

    /// The path has more than one segment (`null:///a/b`).
    #[error(
        "path {} has more than one segment; a bdev name is a single \
         segment without '/', as in \"null:///dev0\"",
        Quoted(.path)
    )]
    NestedPath {
        /// The path as given, with its leading '/'.
        path: String,
    },

    /// A query parameter that no bdev accepts.
    #[error("unknown parameter {}; accepted: {ACCEPTED_PARAMETERS}", Quoted(.param))]
    UnknownParameter {
        /// The parameter name, percent-decoded.
        param: String,
    },

    /// A parameter given more than once.
    #[error("parameter {param:?} given more than once; give it once")]
    DuplicateParameter {
        /// The parameter name.
        param: &'static str,
    },

    /// Both `size_mb` and `num_blocks` were given.
    #[error(
        "both size_mb={} and num_blocks={} given; give exactly one of them",
        Quoted(.size_mb),
        Quoted(.num_blocks)
    )]
    ConflictingSize {
        /// The `size_mb` value as given.
        size_mb: String,
        /// The `num_blocks` value as given.
        num_blocks: String,
    },

    /// Neither `size_mb` nor `num_blocks` was given.
    #[error("no size in {}; add size_mb=N (MiB) or num_blocks=N", Quoted(.uri))]
    MissingSize {
        /// The text as given.
        uri: String,
    },

    /// The size is zero.
    #[error("{param}=0 gives an empty device; give at least 1")]
    ZeroSize {
        /// `size_mb` or `num_blocks`.
        param: &'static str,
    },

    /// A numeric parameter that is not a decimal u64.
    #[error(
        "parameter {param}={} is {reason}; expected a decimal integer \
         (digits only, at most {max})",
        Quoted(.value),
        max = u64::MAX
    )]
    InvalidNumber {
        /// The parameter name.
        param: &'static str,
        /// The value, percent-decoded.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A block size other than 512 or 4096.
    #[error("blk_size={} is not supported; accepted: 512, 4096", Quoted(.value))]
    UnsupportedBlockSize {
        /// The value as given.
        value: String,
    },

    /// The device would hold more than `u64::MAX` bytes.
    #[error(
        "{param}={value} makes the device larger than {max_bytes} bytes; with \
         blk_size={block_size} the largest {param} is {max}",
        max_bytes = u64::MAX
    )]
    SizeOverflow {
        /// `size_mb` or `num_blocks`.
        param: &'static str,
        /// The value given.
        value: u64,
        /// The block size in effect.
        block_size: u32,
        /// The largest value of `param` that fits.
        max: u64,
    },

    /// A `uuid` that does not parse, or the nil uuid.
    #[error(
        "uuid={} is not a usable uuid ({reason}); expected e.g. \
         \"3f2a5c4e-8d1b-4e6f-9a7c-1b2d3e4f5a6b\"",
        Quoted(.value)
    )]
    InvalidUuid {
        /// The value, percent-decoded.
        value: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A parameter that exists, but not for this kind of device.
    #[error("parameter {param:?} does not apply to {kind} devices; accepted: {accepted}")]
    NotForKind {
        /// The parameter.
        param: &'static str,
        /// The device kind.
        kind: BdevKind,
        /// What the kind accepts.
        accepted: &'static str,
    },

    /// A boolean parameter that is neither `true` nor `false`.
    #[error("parameter {param}={} is not a boolean; expected true or false", Quoted(.value))]
    InvalidBool {
        /// The parameter.
        param: &'static str,
        /// The value, percent-decoded.
        value: String,
    },

    /// A backing path that cannot be used.
    #[error("backing path {} cannot be used: {reason}", Quoted(.path))]
    InvalidPath {
        /// The path, percent-decoded.
        path: String,
        /// Why.
        reason: &'static str,
    },
}

/// The parameters a kind accepts, as error messages list them.
fn accepted_for(kind: BdevKind) -> &'static str {
    if kind.has_backing() {
        FILE_PARAMETERS_TEXT
    } else {
        MEMORY_PARAMETERS
    }
}

const NIL_UUID: &str = "the nil uuid cannot identify a device";

/// Parses a block-device URI into a checked [`BdevSpec`].
///
/// See the module documentation for the accepted form. Checks run in this
/// order, and the first failure is returned: URI syntax, scheme, slashes and
/// host, fragment, name, parameter names (unknown, repeated), size choice,
/// numbers, block size, overflow, uuid.
pub fn parse(uri: &str) -> Result<BdevSpec, UriError> {
    let url = Url::parse(uri).map_err(|source| UriError::Syntax {
        uri: uri.to_owned(),
        source,
    })?;
    let kind = BdevKind::from_scheme(url.scheme()).ok_or_else(|| UriError::UnknownScheme {
        scheme: url.scheme().to_owned(),
    })?;

    // The URL parser reads `null:/n0` and `null:///n0` alike, and resolves
    // `.`/`..` segments, so the slashes and the path are read from the text
    // itself, cleaned the way the parser cleans it first (outer C0 controls
    // and spaces trimmed, tabs and newlines dropped).
    let cleaned: String = uri
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let after_scheme = cleaned.split_once(':').map_or("", |(_, rest)| rest);
    let Some(after_slashes) = after_scheme.strip_prefix("//") else {
        return Err(UriError::MissingSlashes {
            uri: uri.to_owned(),
            suggestion: format!("{kind}:///{}", after_scheme.trim_start_matches('/')),
        });
    };

    let host = url.host_str().unwrap_or("");
    if !host.is_empty() || url.port().is_some() || !url.username().is_empty() {
        return Err(host_given(&url, kind, host));
    }
    if let Some(fragment) = url.fragment() {
        return Err(UriError::Fragment {
            fragment: fragment.to_owned(),
        });
    }

    // With an empty authority the path runs from here to `?` or `#`.
    let path_end = after_slashes
        .find(['?', '#'])
        .unwrap_or(after_slashes.len());
    let path = after_slashes.get(..path_end).unwrap_or(after_slashes);
    if kind.has_backing() {
        return parse_backed(uri, &url, kind, path);
    }
    let segment = path.strip_prefix('/').unwrap_or(path);
    if segment.is_empty() {
        return Err(UriError::MissingName {
            uri: uri.to_owned(),
            kind,
        });
    }
    if segment.contains('/') {
        return Err(UriError::NestedPath {
            path: path.to_owned(),
        });
    }
    let name = percent_decode(segment);
    check_name(&name)?;

    let params = collect_params(&url)?;
    for (param, given) in [
        (READONLY, &params.readonly),
        (DIRECT, &params.direct),
        (NAME, &params.name),
        (IOPOLL, &params.iopoll),
    ] {
        if given.is_some() {
            return Err(UriError::NotForKind {
                param,
                kind,
                accepted: accepted_for(kind),
            });
        }
    }
    let size_text = match (params.size_mb, params.num_blocks) {
        (Some(size_mb), Some(num_blocks)) => {
            return Err(UriError::ConflictingSize {
                size_mb,
                num_blocks,
            });
        }
        (Some(text), None) => Size::Mib(parse_number(SIZE_MB, &text)?),
        (None, Some(text)) => Size::Blocks(parse_number(NUM_BLOCKS, &text)?),
        (None, None) => {
            return Err(UriError::MissingSize {
                uri: uri.to_owned(),
            });
        }
    };
    if size_text.value() == 0 {
        return Err(UriError::ZeroSize {
            param: size_text.param(),
        });
    }
    let block_size = match params.blk_size {
        None => DEFAULT_BLOCK_SIZE,
        Some(text) => parse_block_size(text)?,
    };
    let num_blocks = match size_text {
        Size::Mib(mib) => {
            let bytes = mib.checked_mul(MIB).ok_or(UriError::SizeOverflow {
                param: SIZE_MB,
                value: mib,
                block_size,
                max: u64::MAX / MIB,
            })?;
            // A MiB is a whole number of blocks of every accepted size.
            bytes / u64::from(block_size)
        }
        Size::Blocks(blocks) => {
            size_from_blocks(blocks, block_size)?;
            blocks
        }
    };
    let uuid = match params.uuid {
        None => None,
        Some(text) => Some(parse_uuid(text)?),
    };

    Ok(BdevSpec {
        kind,
        uri: canonical_uri(kind, &name, size_text, block_size, uuid),
        name,
        block_size,
        num_blocks,
        uuid,
        backing: None,
    })
}

/// `blk_size=`: one of [`BLOCK_SIZES`].
fn parse_block_size(text: String) -> Result<u32, UriError> {
    let value = parse_number(BLK_SIZE, &text)?;
    BLOCK_SIZES
        .into_iter()
        .find(|&size| u64::from(size) == value)
        .ok_or(UriError::UnsupportedBlockSize { value: text })
}

/// The rest of a `uring` or `aio` URI, whose path is its backing's.
fn parse_backed(uri: &str, url: &Url, kind: BdevKind, path: &str) -> Result<BdevSpec, UriError> {
    if path.trim_start_matches('/').is_empty() {
        return Err(UriError::InvalidPath {
            path: uri.to_owned(),
            reason: "it names no file; write e.g. \"uring:///dev/sdb\"",
        });
    }
    let path = check_path(&percent_decode(path))?;
    let params = collect_params(url)?;
    if params.num_blocks.is_some() {
        return Err(UriError::NotForKind {
            param: NUM_BLOCKS,
            kind,
            accepted: accepted_for(kind),
        });
    }
    let create_mb = match params.size_mb {
        None => None,
        Some(text) => match parse_number(SIZE_MB, &text)? {
            0 => return Err(UriError::ZeroSize { param: SIZE_MB }),
            mib if mib > u64::MAX / MIB => {
                return Err(UriError::SizeOverflow {
                    param: SIZE_MB,
                    value: mib,
                    block_size: DEFAULT_BLOCK_SIZE,
                    max: u64::MAX / MIB,
                });
            }
            mib => Some(mib),
        },
    };
    let block_size = params.blk_size.map(parse_block_size).transpose()?;
    let readonly = match params.readonly {
        None => false,
        Some(text) => parse_bool(READONLY, &text)?,
    };
    let direct = match params.direct {
        None => true,
        Some(text) => parse_bool(DIRECT, &text)?,
    };
    if let Some(name) = &params.name {
        check_name(name)?;
    }
    let iopoll = match params.iopoll {
        None => false,
        Some(_) if kind != BdevKind::Uring => {
            return Err(UriError::NotForKind {
                param: IOPOLL,
                kind,
                accepted: "blk_size, uuid, readonly, direct, size_mb, name",
            });
        }
        Some(text) => parse_bool(IOPOLL, &text)?,
    };
    let uuid = params.uuid.map(parse_uuid).transpose()?;
    let backing = FileSpec {
        path,
        block_size,
        readonly,
        direct,
        create_mb,
        name: params.name,
        iopoll,
    };
    let name = backing.device_name();
    check_name(&name)?;
    Ok(BdevSpec {
        kind,
        uri: backing.canonical_uri(kind.as_str(), block_size.unwrap_or(0), uuid),
        name,
        block_size: block_size.unwrap_or(0),
        num_blocks: 0,
        uuid,
        backing: Some(backing),
    })
}

/// `true` or `false` (any case).
fn parse_bool(param: &'static str, value: &str) -> Result<bool, UriError> {
    if value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(UriError::InvalidBool {
            param,
            value: value.to_owned(),
        })
    }
}

/// Checks a backing path (percent-decoded): absolute, with a last
/// component, no NUL, no `.` or `..` component (a path that says where it
/// goes, not one resolved through the daemon's view).
fn check_path(path: &str) -> Result<PathBuf, UriError> {
    let bad = |reason: &'static str| UriError::InvalidPath {
        path: path.to_owned(),
        reason,
    };
    if path.contains('\0') {
        return Err(bad("it contains a NUL byte"));
    }
    if path.len() > 4095 {
        return Err(bad("it is longer than 4095 bytes"));
    }
    let p = Path::new(path);
    if !p.is_absolute() || p.file_name().is_none() || path.ends_with('/') {
        return Err(bad("it names no file"));
    }
    if path.split('/').any(|c| c == "." || c == "..") {
        return Err(bad("it has a '.' or '..' component"));
    }
    Ok(p.to_path_buf())
}

/// How the URI gave the size; the canonical form keeps the same choice.
#[derive(Debug, Clone, Copy)]
enum Size {
    /// `size_mb=N`.
    Mib(u64),
    /// `num_blocks=N`.
    Blocks(u64),
}

impl Size {
    fn param(self) -> &'static str {
        match self {
            Size::Mib(_) => SIZE_MB,
            Size::Blocks(_) => NUM_BLOCKS,
        }
    }

    fn value(self) -> u64 {
        match self {
            Size::Mib(value) | Size::Blocks(value) => value,
        }
    }
}

/// The raw (percent-decoded) values of the accepted parameters.
#[derive(Default)]
struct Params {
    size_mb: Option<String>,
    num_blocks: Option<String>,
    blk_size: Option<String>,
    uuid: Option<String>,
    readonly: Option<String>,
    direct: Option<String>,
    name: Option<String>,
    iopoll: Option<String>,
}

fn collect_params(url: &Url) -> Result<Params, UriError> {
    let mut params = Params::default();
    for (key, value) in url.query_pairs() {
        let (param, slot) = match key.as_ref() {
            SIZE_MB => (SIZE_MB, &mut params.size_mb),
            NUM_BLOCKS => (NUM_BLOCKS, &mut params.num_blocks),
            BLK_SIZE => (BLK_SIZE, &mut params.blk_size),
            UUID => (UUID, &mut params.uuid),
            READONLY => (READONLY, &mut params.readonly),
            DIRECT => (DIRECT, &mut params.direct),
            NAME => (NAME, &mut params.name),
            IOPOLL => (IOPOLL, &mut params.iopoll),
            _ => {
                return Err(UriError::UnknownParameter {
                    param: key.into_owned(),
                });
            }
        };
        if slot.is_some() {
            return Err(UriError::DuplicateParameter { param });
        }
        *slot = Some(value.into_owned());
    }
    Ok(params)
}

/// The error for a URI with an authority, suggesting the three-slash form.
fn host_given(url: &Url, kind: BdevKind, host: &str) -> UriError {
    let mut authority = String::new();
    if !url.username().is_empty() {
        authority.push_str(url.username());
        if let Some(password) = url.password() {
            authority.push(':');
            authority.push_str(password);
        }
        authority.push('@');
    }
    authority.push_str(host);
    if let Some(port) = url.port() {
        authority.push_str(&format!(":{port}"));
    }
    // `malloc://m0?..` most likely meant `m0` as the name.
    let name = match url.path().trim_start_matches('/') {
        "" => host,
        path => path,
    };
    let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
    UriError::HostGiven {
        host: authority,
        suggestion: format!("{kind}:///{name}{query}"),
    }
}

fn check_name(name: &str) -> Result<(), UriError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
    if let Some(ch) = name.chars().find(|&c| !allowed(c)) {
        return Err(UriError::InvalidNameChar {
            name: name.to_owned(),
            ch,
        });
    }
    if name == "." || name == ".." {
        return Err(UriError::ReservedName {
            name: name.to_owned(),
        });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(UriError::NameTooLong {
            name: name.to_owned(),
            len: name.len(),
        });
    }
    Ok(())
}

/// Decodes `%XX` escapes; a `%` not followed by two hex digits stays as is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_number(param: &'static str, value: &str) -> Result<u64, UriError> {
    let invalid = |reason| UriError::InvalidNumber {
        param,
        value: value.to_owned(),
        reason,
    };
    if value.is_empty() {
        return Err(invalid("empty"));
    }
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid("not a decimal integer"));
    }
    value.parse().map_err(|_| invalid("too large for 64 bits"))
}

/// Checks that `num_blocks` blocks of `block_size` bytes fit in u64 bytes.
fn size_from_blocks(num_blocks: u64, block_size: u32) -> Result<u64, UriError> {
    num_blocks
        .checked_mul(u64::from(block_size))
        .ok_or(UriError::SizeOverflow {
            param: NUM_BLOCKS,
            value: num_blocks,
            block_size,
            max: u64::MAX / u64::from(block_size),
        })
}

fn parse_uuid(value: String) -> Result<Uuid, UriError> {
    match Uuid::parse_str(&value) {
        Ok(uuid) if uuid.is_nil() => Err(UriError::InvalidUuid {
            value,
            reason: NIL_UUID.to_owned(),
        }),
        Ok(uuid) => Ok(uuid),
        Err(err) => Err(UriError::InvalidUuid {
            value,
            reason: err.to_string(),
        }),
    }
}

fn canonical_uri(
    kind: BdevKind,
    name: &str,
    size: Size,
    block_size: u32,
    uuid: Option<Uuid>,
) -> String {
    let mut uri = format!(
        "{kind}:///{name}?{}={}&{BLK_SIZE}={block_size}",
        size.param(),
        size.value()
    );
    if let Some(uuid) = uuid {
        uri.push_str(&format!("&{UUID}={}", uuid.hyphenated()));
    }
    uri
}

#[cfg(test)]
mod tests;
