//! One share as a protocol sees it when a client names it: the device,
//! open, and how it is exported.
//!
//! Thread: any (the descriptor is `Send + Sync`).

use super::Protocol;
use super::nvmf::auth::HostSecrets;
use crate::bdev::BdevDesc;

/// One share, as a protocol's option phase looks it up.
#[derive(Clone)]
pub struct Share {
    /// Export name (the device name).
    pub name: String,
    /// The protocol it is exported over.
    pub protocol: Protocol,
    /// Read-only export.
    pub read_only: bool,
    /// The hosts allowed to attach, by the identity their protocol gives
    /// (NVMe-oF: host NQNs); empty: any host.
    pub allowed_hosts: Vec<String>,
    /// NVMe-oF: the DH-HMAC-CHAP secrets of allowed hosts that must
    /// authenticate (never listed, logged or dumped).
    pub dhchap: HostSecrets,
    /// NVMe-oF: the subsystem's NQN (the one the share gave, or the
    /// default [`nqn_of`](super::nvmf::nqn::nqn_of) its name); `None`
    /// for other protocols.
    pub nqn: Option<String>,
    /// The device, open.
    pub desc: BdevDesc,
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share")
            .field("name", &self.name)
            .field("protocol", &self.protocol)
            .field("read_only", &self.read_only)
            .field("nqn", &self.nqn)
            .field("dhchap", &self.dhchap)
            .finish()
    }
}
