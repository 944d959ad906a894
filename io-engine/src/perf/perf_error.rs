//! Why a perf run could not start or finish.
//!
//! Thread: any; plain data.

use crate::bdev::{BdevError, Quoted};
use crate::pool::BufPoolError;
use crate::reactor::ReactorError;

/// Why a run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// The request itself is wrong.
    #[error("{0}")]
    Invalid(String),
    /// A device could not be opened.
    #[error(transparent)]
    Bdev(#[from] BdevError),
    /// IO buffers could not be had.
    #[error(transparent)]
    Buffers(#[from] BufPoolError),
    /// A reactor did not run its job.
    #[error(transparent)]
    Reactor(#[from] ReactorError),
    /// A job failed to start on its reactor.
    #[error("job on core {core} for {}: {reason}", Quoted(.bdev))]
    Job {
        /// Reactor index.
        core: usize,
        /// Device name.
        bdev: String,
        /// What failed.
        reason: String,
    },
}
