//! Why [`super::Engine::destroy_bdev`] refused or failed.
//!
//! Thread: any; plain data.

use crate::bdev::BdevError;
use crate::export::ExportError;

/// Errors destroying a device.
#[derive(Debug, thiserror::Error)]
pub enum DestroyError {
    /// The device is exported: its clients come first
    /// ([`ExportError::Shared`], which names the protocol).
    #[error(transparent)]
    Shared(ExportError),
    /// The registry refused (no such device, still open).
    #[error(transparent)]
    Bdev(#[from] BdevError),
}
