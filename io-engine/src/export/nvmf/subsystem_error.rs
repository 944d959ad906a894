//! Why a device could not be shared over NVMe-oF, or NVMe-oF options
//! were given for another protocol.
//!
//! Thread: any (plain data).

use crate::bdev::Quoted;
use crate::export::Protocol;

/// Errors of the subsystem table and the NVMe-oF share options.
#[derive(Debug, thiserror::Error)]
pub enum SubsystemError {
    /// An NQN was given for a share over a protocol other than NVMe-oF.
    #[error("an NQN names an NVMe-oF subsystem: it is for protocol nvmf only, not {0}")]
    NqnNotForProtocol(Protocol),
    /// Allowed hosts (or their secrets) were given for a share over a
    /// protocol other than NVMe-oF.
    #[error(
        "allowed hosts are the host NQNs of an NVMe-oF subsystem: they are for protocol nvmf \
         only, not {0}"
    )]
    HostsNotForProtocol(Protocol),
    /// The NQN breaks a rule of NVMe Qualified Names.
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
}
