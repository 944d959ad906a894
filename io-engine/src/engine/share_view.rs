//! A share as the control plane shows it: the export registry's entry,
//! what its protocol adds (NVMe-oF: the subsystem's NQN and hosts) and
//! the URI clients open it with.
//!
//! Thread: any; plain data, composed on the caller's thread from the
//! registry and the subsystem table (each read under its own lock).

use crate::export::ShareInfo;

/// A share as the API and the CLI show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareView {
    /// Name, protocol, read-only, connections.
    pub info: ShareInfo,
    /// The URI clients open it with; empty until its protocol's server
    /// listens.
    pub uri: String,
    /// NVMe-oF: the subsystem's NQN; `None` for other protocols.
    pub nqn: Option<String>,
    /// NVMe-oF: the hosts allowed to connect (empty: any host).
    pub allowed_hosts: Vec<String>,
    /// NVMe-oF: the allowed hosts that must authenticate (DH-HMAC-CHAP;
    /// their secrets are never shown).
    pub dhchap_hosts: Vec<String>,
}
