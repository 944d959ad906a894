//! Errors of the export registry.
//!
//! Thread: any (plain data).

use super::Protocol;
use crate::bdev::BdevError;

/// Errors of the export registry.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The device could not be opened.
    #[error(transparent)]
    Bdev(#[from] BdevError),
    /// The device is shared already.
    #[error("device {0:?} is already shared")]
    AlreadyShared(String),
    /// The device is not shared.
    #[error("device {0:?} is not shared")]
    NotShared(String),
    /// The device is shared, so it may not be destroyed.
    #[error(
        "device {name:?} is shared over {}; unshare it before destroying it",
        protocol.title()
    )]
    Shared {
        /// The device.
        name: String,
        /// What it is shared over.
        protocol: Protocol,
    },
}
