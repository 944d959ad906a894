//! Why [`super::Engine::destroy_bdev`] refused or failed.
//!
//! Thread: any; plain data.

use crate::bdev::BdevError;

/// Errors destroying a device.
#[derive(Debug, thiserror::Error)]
pub enum DestroyError {
    /// The device is exported: its clients come first.
    #[error("device {0:?} is shared over NBD; unshare it before destroying it")]
    Shared(String),
    /// The registry refused (no such device, still open).
    #[error(transparent)]
    Bdev(#[from] BdevError),
}
