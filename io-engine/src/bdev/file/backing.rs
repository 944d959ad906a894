//! [`Backing`]: a device's open file or block device, and what the engine
//! learns of it when it opens it: kind, size, logical block size, write
//! cache, discard, and the device's resolved spec (block size, block
//! count, uuid).
//!
//! Thread: the control path (the thread creating the device); the open
//! file is then shared by every reactor's channel (`Arc`).
//!
//! The uuid: `uuid=` when the URI gives one; otherwise a name-based (v5)
//! uuid of the backing's path as given, in a namespace of this project, so
//! the same URI gives the same uuid (and NVMe NGUID) on every start. A
//! block device named by a path that can change between boots (`/dev/sdb`)
//! should be given by a stable one (`/dev/disk/by-id/...`) or a `uuid=`.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use super::backing_error::BackingError;
use crate::bdev::uri::{BLOCK_SIZES, BdevSpec, DEFAULT_BLOCK_SIZE, FileSpec};

/// The namespace of the uuids derived from backing paths.
pub const BACKING_UUID_NAMESPACE: Uuid = Uuid::from_u128(0x6a4e_2f1c_9b7d_4e35_a0c8_53d1_e9f2_7b64);

/// What kind of backing a device has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackingKind {
    /// A regular file.
    File,
    /// A block device.
    BlockDevice,
}

impl BackingKind {
    /// `file` or `block_device`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackingKind::File => "file",
            BackingKind::BlockDevice => "block_device",
        }
    }
}

/// A device's opened backing.
#[derive(Debug)]
pub struct Backing {
    /// The open file (or block device), shared with the blocking threads.
    pub file: Arc<File>,
    /// The path it was opened by.
    pub path: PathBuf,
    /// File or block device.
    pub kind: BackingKind,
    /// Opened read-only.
    pub readonly: bool,
    /// Whether writes may sit in a volatile cache until a flush (the page
    /// cache, a file system's metadata, a disk's write-back cache).
    pub write_cache: bool,
    /// Whether the backing can deallocate (punch holes, discard).
    pub discard: bool,
    /// Reads and writes go through the reactor's IOPOLL ring.
    pub iopoll: bool,
}

impl Backing {
    /// Opens `spec`'s backing (creating the file when `size_mb=` asks) and
    /// returns it with the spec resolved.
    pub fn open(spec: &BdevSpec) -> Result<(Backing, BdevSpec), BackingError> {
        let Some(fs) = &spec.backing else {
            return Err(BackingError::NotFileOrBlock(PathBuf::from(&spec.name)));
        };
        let path = fs.path.clone();
        let io = |what: &'static str| {
            let path = path.clone();
            move |source| BackingError::Io { path, what, source }
        };
        let created = create_if_asked(fs)?;
        let mut opts = OpenOptions::new();
        opts.read(true).write(!fs.readonly);
        let mut flags = libc::O_CLOEXEC;
        if fs.direct {
            flags |= libc::O_DIRECT;
        }
        opts.custom_flags(flags);
        let mut file = opts
            .open(&path)
            .map_err(|e| open_error(path.clone(), e, fs.direct))?;
        let meta = file.metadata().map_err(io("stat"))?;
        let kind = if meta.file_type().is_block_device() {
            BackingKind::BlockDevice
        } else if meta.file_type().is_file() {
            BackingKind::File
        } else {
            return Err(BackingError::NotFileOrBlock(path));
        };
        let size = match kind {
            BackingKind::File => meta.len(),
            BackingKind::BlockDevice => file.seek(SeekFrom::End(0)).map_err(io("size"))?,
        };
        if let Some(mb) = fs.create_mb {
            let want = mb.saturating_mul(1 << 20);
            if kind == BackingKind::BlockDevice {
                return Err(BackingError::Size {
                    path,
                    reason: "size_mb= creates a file; a block device's size is its own".into(),
                });
            }
            if !created && size != want {
                return Err(BackingError::Size {
                    path,
                    reason: format!(
                        "the file exists with {size} bytes, size_mb={mb} asks for {want}; \
                         it is left as it is (remove size_mb= to use it at its size)"
                    ),
                });
            }
        }
        let block_size = block_size(&file, fs, kind, &path)?;
        let num_blocks = size / u64::from(block_size);
        if num_blocks == 0 {
            return Err(BackingError::Size {
                path,
                reason: format!("{size} bytes hold no block of {block_size} bytes"),
            });
        }
        if size % u64::from(block_size) != 0 {
            tracing::warn!(
                path = %path.display(),
                "the last {} bytes are not a whole block and are not used",
                size % u64::from(block_size)
            );
        }
        let (write_cache, discard, polls) = match kind {
            BackingKind::File => (true, true, false),
            BackingKind::BlockDevice => queue_limits(meta.rdev()),
        };
        if fs.iopoll && !(polls && fs.direct) {
            return Err(BackingError::NoPolling {
                path,
                reason: if kind == BackingKind::File {
                    "a file's IO is not polled; iopoll=true is for block devices"
                } else if !fs.direct {
                    "polled IO needs O_DIRECT; remove direct=false"
                } else {
                    "its queue does not poll (queue/io_poll is 0: the driver has no poll \
                     queues, e.g. nvme without poll_queues=N)"
                },
            });
        }
        let uuid = spec.uuid.unwrap_or_else(|| path_uuid(&path));
        let resolved = spec.resolved(block_size, num_blocks, uuid);
        Ok((
            Backing {
                file: Arc::new(file),
                path,
                kind,
                readonly: fs.readonly,
                write_cache,
                discard,
                iopoll: fs.iopoll,
            },
            resolved,
        ))
    }
}

/// The error of opening `path` (with O_DIRECT if `direct`).
pub(super) fn open_error(path: PathBuf, e: std::io::Error, direct: bool) -> BackingError {
    match e.raw_os_error() {
        // EINVAL from open with O_DIRECT: the file system has no direct IO.
        Some(libc::EINVAL) if direct => BackingError::NoDirectIo(path),
        Some(libc::ENOENT) => BackingError::Missing(path),
        _ => BackingError::Io {
            path,
            what: "open",
            source: e,
        },
    }
}

/// The uuid a backing at `path` gets without `uuid=`.
pub fn path_uuid(path: &Path) -> Uuid {
    Uuid::new_v5(&BACKING_UUID_NAMESPACE, path.as_os_str().as_encoded_bytes())
}

/// Creates the file when `size_mb=` is given and it does not exist (a
/// sparse file of that size). Returns whether it did.
fn create_if_asked(fs: &FileSpec) -> Result<bool, BackingError> {
    let Some(mb) = fs.create_mb else {
        return Ok(false);
    };
    if fs.readonly {
        return Ok(false);
    }
    let file = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&fs.path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(source) => {
            return Err(BackingError::Io {
                path: fs.path.clone(),
                what: "create",
                source,
            });
        }
    };
    if let Err(source) = file.set_len(mb.saturating_mul(1 << 20)) {
        // Nothing of the user's is in it: it was made just now.
        let _ = std::fs::remove_file(&fs.path);
        return Err(BackingError::Io {
            path: fs.path.clone(),
            what: "size the new file",
            source,
        });
    }
    Ok(true)
}

/// The device's block size: `blk_size=`, or the backing's logical block
/// size (a block device), or 512 (a file) raised to what O_DIRECT needs.
fn block_size(
    file: &File,
    fs: &FileSpec,
    kind: BackingKind,
    path: &Path,
) -> Result<u32, BackingError> {
    // The alignment O_DIRECT needs of offsets and lengths.
    let align = match kind {
        BackingKind::BlockDevice => {
            rustix::fs::ioctl_blksszget(file).map_err(|e| BackingError::Io {
                path: path.to_path_buf(),
                what: "read the logical block size",
                source: e.into(),
            })?
        }
        BackingKind::File => dio_alignment(file).unwrap_or(DEFAULT_BLOCK_SIZE),
    };
    let needed = if fs.direct || kind == BackingKind::BlockDevice {
        align
    } else {
        1
    };
    match fs.block_size {
        Some(b) if b < needed => Err(BackingError::BlockSize {
            path: path.to_path_buf(),
            reason: format!(
                "blk_size={b} is below the {needed}-byte alignment its IO needs \
                 (the logical block size); use blk_size={}",
                needed.max(DEFAULT_BLOCK_SIZE)
            ),
        }),
        Some(b) => Ok(b),
        None => {
            let b = needed.max(DEFAULT_BLOCK_SIZE);
            if BLOCK_SIZES.contains(&b) {
                Ok(b)
            } else {
                Err(BackingError::BlockSize {
                    path: path.to_path_buf(),
                    reason: format!(
                        "its logical block size {b} is not one this engine serves (512, 4096)"
                    ),
                })
            }
        }
    }
}

/// The offset alignment O_DIRECT needs on this file's file system
/// (`statx` `STATX_DIOALIGN`, Linux 6.1), if the kernel says.
fn dio_alignment(file: &File) -> Option<u32> {
    use rustix::fs::{AtFlags, StatxFlags, statx};
    let st = statx(file, "", AtFlags::EMPTY_PATH, StatxFlags::DIOALIGN).ok()?;
    (st.stx_mask & StatxFlags::DIOALIGN.bits() != 0 && st.stx_dio_offset_align != 0)
        .then_some(st.stx_dio_offset_align)
}

/// A block device's write cache, discard and polling support, from its
/// queue in sysfs (a partition's queue is its disk's). Unknown: a write
/// cache (flushes are then sent; they cost little on a disk without one),
/// no discard, no polling.
fn queue_limits(rdev: u64) -> (bool, bool, bool) {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let base = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let read = |name: &str| {
        std::fs::read_to_string(base.join("queue").join(name))
            .or_else(|_| std::fs::read_to_string(base.join("../queue").join(name)))
            .ok()
    };
    let write_cache = read("write_cache").is_none_or(|v| v.trim() != "write through");
    let discard = read("discard_max_bytes")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|v| v > 0);
    let polls = read("io_poll").is_some_and(|v| v.trim() == "1");
    (write_cache, discard, polls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_gives_the_same_uuid_every_time_and_another_path_another() {
        let a = path_uuid(Path::new("/var/lib/io-engine/d0.img"));
        assert_eq!(a, path_uuid(Path::new("/var/lib/io-engine/d0.img")));
        assert_ne!(a, path_uuid(Path::new("/var/lib/io-engine/d1.img")));
        assert_eq!(a.get_version_num(), 5);
    }
}
