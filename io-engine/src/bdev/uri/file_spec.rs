//! [`FileSpec`]: what a `uring://` or `aio://` URI says of the device's
//! backing (a regular file or a block device), and its canonical URI (the
//! parsing is `uri.rs`'s).
//!
//! Thread: any; pure functions over strings, on the control path.

use std::path::{Path, PathBuf};

use uuid::Uuid;

/// `readonly=true|false`.
pub(super) const READONLY: &str = "readonly";
/// `direct=true|false`.
pub(super) const DIRECT: &str = "direct";
/// `name=NAME`.
pub(super) const NAME: &str = "name";
/// `iopoll=true|false` (`uring` only).
pub(super) const IOPOLL: &str = "iopoll";

/// What a URI says of a device's backing, before the backing is opened.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileSpec {
    /// Absolute path of the regular file or block device, percent-decoded.
    pub path: PathBuf,
    /// `blk_size=`, if given; otherwise the backing's logical block size
    /// (a block device) or 512 (a file).
    pub block_size: Option<u32>,
    /// `readonly=true`: opened read-only; writes, zeroes, unmaps, copies and
    /// flushes are refused as unsupported.
    pub readonly: bool,
    /// `direct=` (default `true`): O_DIRECT, no page cache between the
    /// engine and the disk. `false` asks for buffered IO (a file system
    /// such as tmpfs that refuses O_DIRECT).
    pub direct: bool,
    /// `size_mb=`: create the file with this size (MiB) if it does not
    /// exist; an existing file must already have it.
    pub create_mb: Option<u64>,
    /// `name=`, if given; otherwise the device is named after the path's
    /// last component.
    pub name: Option<String>,
    /// `iopoll=true` (`uring` only): reads and writes through the reactor's
    /// IOPOLL ring, completions polled from the device's poll queues; only
    /// for a block device whose queue polls (`queue/io_poll` is 1), with
    /// O_DIRECT.
    pub iopoll: bool,
}

impl FileSpec {
    /// The device name this spec gives: `name=` or the path's last
    /// component.
    pub(super) fn device_name(&self) -> String {
        match &self.name {
            Some(name) => name.clone(),
            None => self
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    /// The URI of this backing with everything resolved: `blk_size` and
    /// `uuid` always, then whichever of `name`, `readonly`, `direct` and
    /// `size_mb` differ from their defaults.
    pub(super) fn canonical_uri(&self, kind: &str, block_size: u32, uuid: Option<Uuid>) -> String {
        let mut uri = format!("{kind}://{}", encode_path(&self.path));
        let mut sep = '?';
        let mut push = |key: &str, value: &str| {
            uri.push(sep);
            uri.push_str(key);
            uri.push('=');
            uri.push_str(value);
            sep = '&';
        };
        if block_size != 0 {
            push("blk_size", &block_size.to_string());
        }
        if let Some(uuid) = uuid {
            push("uuid", &uuid.hyphenated().to_string());
        }
        if let Some(name) = &self.name {
            push(NAME, name);
        }
        if self.readonly {
            push(READONLY, "true");
        }
        if !self.direct {
            push(DIRECT, "false");
        }
        if let Some(mb) = self.create_mb {
            push("size_mb", &mb.to_string());
        }
        if self.iopoll {
            push(IOPOLL, "true");
        }
        uri
    }
}

/// Percent-encodes what a URI path cannot hold as is, and `,` (the
/// daemon's `--bdev` flag takes a comma-separated list of URIs).
fn encode_path(path: &Path) -> String {
    let mut out = String::new();
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~:@+=".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
