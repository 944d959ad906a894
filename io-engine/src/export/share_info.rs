//! A share as the control plane shows it.
//!
//! Thread: any (plain data).

use super::Protocol;

/// A share as the control plane shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ShareInfo {
    /// Export name (the device name).
    pub name: String,
    /// The protocol it is exported over.
    pub protocol: Protocol,
    /// Read-only export.
    pub read_only: bool,
    /// Connections attached now.
    pub connections: usize,
    /// The hosts allowed to attach (empty: any host).
    pub allowed_hosts: Vec<String>,
    /// NVMe-oF: the allowed hosts that must authenticate (DH-HMAC-CHAP;
    /// their secrets are never shown).
    pub dhchap_hosts: Vec<String>,
    /// NVMe-oF: the subsystem's NQN; `None` for other protocols.
    pub nqn: Option<String>,
}
