//! Why [`super::Engine::share`] refused: the export registry's refusal,
//! or the NVMe-oF subsystem table's.
//!
//! Thread: any; plain data.

use crate::export::ExportError;
use crate::export::nvmf::SubsystemError;

/// Errors sharing a device.
#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    /// The registry refused (no such device, shared already).
    #[error(transparent)]
    Export(#[from] ExportError),
    /// The NVMe-oF options were refused (a bad NQN or one in use, options
    /// for another protocol).
    #[error(transparent)]
    Nvmf(#[from] SubsystemError),
}
