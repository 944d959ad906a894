//! Why an engine could not start.
//!
//! Thread: any; plain data.

use crate::accel::AccelError;
use crate::bdev::BdevError;
use crate::reactor::ReactorError;

/// Errors starting an engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The reactors could not start.
    #[error(transparent)]
    Reactor(#[from] ReactorError),
    /// The registry (its IO pool) could not be built.
    #[error(transparent)]
    Bdev(#[from] BdevError),
    /// The accel assignment names a module that is missing or unfit.
    #[error(transparent)]
    Accel(#[from] AccelError),
}
