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
    /// An NQN was given for a share over a protocol other than NVMe-oF.
    #[error("an NQN names an NVMe-oF subsystem: it is for protocol nvmf only, not {0}")]
    NqnNotForProtocol(Protocol),
    /// The NQN given breaks a rule of NVMe Qualified Names.
    #[error("NQN {} {why}", Quoted(.nqn))]
    InvalidNqn {
        /// The NQN as given.
        nqn: String,
        /// The rule broken.
        why: &'static str,
    },
    /// Another share's subsystem has this NQN.
    #[error(
        "NQN {} is already the NQN of device {}'s share",
        Quoted(.nqn),
        Quoted(.device)
    )]
    NqnInUse {
        /// The NQN as given.
        nqn: String,
        /// The device shared under it.
        device: String,
    },
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
