//! The accel framework's errors, at submission or configuration.
//!
//! Thread: any; a plain value.

use super::Opcode;

/// Errors of the accel framework, at submission or configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccelError {
    /// The request is malformed; nothing was queued.
    #[error("invalid {op} request: {reason}")]
    Invalid {
        /// The operation asked for.
        op: Opcode,
        /// What is wrong with it.
        reason: String,
    },
    /// Every task of the channel is in flight or unreaped; retry after a
    /// reap.
    #[error("all {capacity} accel tasks of this channel are in flight")]
    NoTask {
        /// Tasks per channel.
        capacity: usize,
    },
    /// A batch already holds as many tasks for a module as it takes.
    #[error("batch full: module {module} takes at most {max} tasks per batch")]
    BatchFull {
        /// The module.
        module: &'static str,
        /// Its batch limit.
        max: usize,
    },
    /// No module of that name is registered.
    #[error("unknown accel module {0:?}")]
    UnknownModule(String),
    /// The module cannot run that opcode.
    #[error("accel module {module} does not support {op}")]
    Unsupported {
        /// The module.
        module: String,
        /// The opcode.
        op: Opcode,
    },
    /// An assignment that is not `OPCODE=MODULE`.
    #[error("bad accel assignment {0:?}: expected OPCODE=MODULE, e.g. copy=software")]
    BadAssignment(String),
}
