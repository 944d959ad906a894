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
    /// An NQN was given for a share over a protocol other than NVMe-oF.
    #[error("an NQN names an NVMe-oF subsystem: it is for protocol nvmf only, not {0}")]
    NqnNotForProtocol(Protocol),
    /// The NQN given breaks a rule of NVMe Qualified Names.
    #[error("NQN {nqn} {why}")]
    InvalidNqn {
        /// The NQN, quoted (in part if long).
        nqn: String,
        /// The rule broken.
        why: &'static str,
    },
    /// Another share's subsystem has this NQN.
    #[error("NQN {nqn} is already the NQN of device {device:?}'s share")]
    NqnInUse {
        /// The NQN, quoted (in part if long).
        nqn: String,
        /// The device shared under it.
        device: String,
    },
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
