//! Errors of the export registry.
//!
//! Thread: any (plain data).

use super::Protocol;
use crate::bdev::{BdevError, Quoted};

/// Errors of the export registry.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The device could not be opened.
    #[error(transparent)]
    Bdev(#[from] BdevError),
    /// The device is shared already.
    #[error("device {} is already shared", Quoted(.0))]
    AlreadyShared(String),
    /// The device is not shared.
    #[error("device {} is not shared", Quoted(.0))]
    NotShared(String),
    /// The device is shared, so it may not be destroyed.
    #[error(
        "device {} is shared over {}; unshare it before destroying it",
        Quoted(.name),
        protocol.title()
    )]
    Shared {
        /// The device.
        name: String,
        /// What it is shared over.
        protocol: Protocol,
    },
}
