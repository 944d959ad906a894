//! One NVMe-oF subsystem: the NQN hosts name in their Connect, the share
//! (device) it exports as namespace 1, the hosts allowed to connect and
//! the secrets of those that must authenticate.
//!
//! Thread: any (plain data; the secrets are shared read-only).

use super::auth::HostSecrets;

/// A shared device's NVMe-oF subsystem. Its `Debug` never shows a secret
/// (that of [`HostSecrets`] lists the host names only).
#[derive(Clone, Debug)]
pub struct Subsystem {
    /// The subsystem's NQN.
    pub nqn: String,
    /// The share it exports (the device name in the export registry).
    pub export: String,
    /// The host NQNs allowed to connect; empty: any host.
    pub allowed_hosts: Vec<String>,
    /// The DH-HMAC-CHAP secrets of the allowed hosts that must
    /// authenticate (never listed, logged or dumped).
    pub dhchap: HostSecrets,
}
