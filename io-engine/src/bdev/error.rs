//! [`BdevError`]: the errors of creating, destroying and opening devices.
//!
//! Thread: any.

use super::quoted::Quoted;
use super::uri::UriError;
use crate::env::dma::DmaError;
use crate::pool::PoolError;

/// Errors of the registry and of opening devices.
#[derive(Debug, thiserror::Error)]
pub enum BdevError {
    /// The URI does not describe a device.
    #[error("invalid device URI: {0}")]
    Uri(#[from] UriError),
    /// A device with that name exists.
    #[error("a device named {} already exists", Quoted(.0))]
    Exists(String),
    /// No device with that name.
    #[error("no device named {}", Quoted(.0))]
    NotFound(String),
    /// The device is open (by a channel, a share, a benchmark).
    #[error(
        "device {} is open ({open} descriptor(s)); close it before destroying it",
        Quoted(.name)
    )]
    Busy {
        /// Device name.
        name: String,
        /// Open descriptors.
        open: usize,
    },
    /// The device's memory could not be had.
    #[error("cannot allocate memory for device {}: {source}", Quoted(.name))]
    NoMemory {
        /// Device name.
        name: String,
        /// Why.
        source: DmaError,
    },
    /// The backing of a `uring` or `aio` device could not be used.
    #[error("cannot create device {}: {source}", Quoted(.name))]
    Backing {
        /// Device name.
        name: String,
        /// Why.
        source: super::file::BackingError,
    },
    /// A channel can only be opened on a reactor thread.
    #[error("IO channels are opened on a reactor thread")]
    NotOnReactor,
    /// The IO pool could not be built.
    #[error(transparent)]
    Pool(#[from] PoolError),
}
