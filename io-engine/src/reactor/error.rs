//! [`ReactorError`]: the errors of the reactor group and of work sent to it.
//!
//! Thread: any.

/// Errors of the reactor group.
#[derive(Debug, thiserror::Error)]
pub enum ReactorError {
    /// A reactor thread could not be started.
    #[error("cannot start reactor on core {cpu}: {reason}")]
    Start {
        /// OS CPU id.
        cpu: u32,
        /// What failed.
        reason: String,
    },
    /// No reactor with that index.
    #[error("no reactor {index}: this engine runs {count} reactors")]
    NoSuchCore {
        /// Requested reactor index.
        index: usize,
        /// Reactors running.
        count: usize,
    },
    /// The reactor stopped, or the work panicked, before replying.
    #[error("reactor {0} dropped the request (stopped, or the work panicked)")]
    Canceled(usize),
}
