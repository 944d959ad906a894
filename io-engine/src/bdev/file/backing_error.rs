//! [`BackingError`]: why a device's backing (file or block device) could
//! not be opened or used; every message names the path.
//!
//! Thread: any (control path).

use std::path::PathBuf;

/// Why a backing could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum BackingError {
    /// The file does not exist and the URI did not ask to create it.
    #[error("{} does not exist; add size_mb=N to the URI to create a file of N MiB", .0.display())]
    Missing(PathBuf),
    /// The path is neither a regular file nor a block device.
    #[error("{} is neither a regular file nor a block device", .0.display())]
    NotFileOrBlock(PathBuf),
    /// The file system refuses O_DIRECT (tmpfs, for one).
    #[error(
        "{} is on a file system that refuses O_DIRECT (ramfs; tmpfs before Linux 6.6); \
         add direct=false to the URI for buffered IO through the page cache",
        .0.display()
    )]
    NoDirectIo(PathBuf),
    /// `size_mb=` disagrees with an existing file, or was given for a block
    /// device.
    #[error("{}: {reason}", .path.display())]
    Size {
        /// The backing.
        path: PathBuf,
        /// What disagrees.
        reason: String,
    },
    /// The block size asked for does not suit the backing.
    #[error("{}: {reason}", .path.display())]
    BlockSize {
        /// The backing.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// `iopoll=true` for a backing whose IO cannot be polled.
    #[error("{}: iopoll=true cannot be used: {reason}", .path.display())]
    NoPolling {
        /// The backing.
        path: PathBuf,
        /// Why.
        reason: &'static str,
    },
    /// A system call failed.
    #[error("{}: {what}: {source}", .path.display())]
    Io {
        /// The backing.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// The kernel interface the device kind needs is not there (io_uring
    /// disabled, no AIO).
    #[error("{what} is not available: {source}{hint}")]
    Unavailable {
        /// io_uring or AIO.
        what: &'static str,
        /// The error.
        source: std::io::Error,
        /// What to do about it.
        hint: &'static str,
    },
}
