//! What a share over NVMe-oF sets beyond what every protocol has: its
//! subsystem's NQN, the hosts allowed to connect and the secrets of those
//! that must authenticate, as a request or a `--share` flag gives them.
//!
//! Thread: any (plain data).

use super::auth::HostSecrets;
use super::nqn::nqn_of;
use super::{Subsystem, SubsystemError};
use crate::export::Protocol;

/// A share's NVMe-oF options; the default sets none.
#[derive(Clone, Debug, Default)]
pub struct ShareOptions {
    /// The subsystem's NQN; `None`: [`nqn_of`] the device name.
    pub nqn: Option<String>,
    /// The host NQNs allowed to connect; empty: any host.
    pub allowed_hosts: Vec<String>,
    /// The DH-HMAC-CHAP secrets of the allowed hosts that must
    /// authenticate.
    pub dhchap: HostSecrets,
}

impl ShareOptions {
    /// The subsystem that exports device `export` with these options.
    pub fn subsystem(self, export: &str) -> Subsystem {
        Subsystem {
            nqn: self.nqn.unwrap_or_else(|| nqn_of(export)),
            export: export.to_string(),
            allowed_hosts: self.allowed_hosts,
            dhchap: self.dhchap,
        }
    }

    /// Refuses these options for a share over `protocol`, which has no
    /// subsystem, unless they set nothing.
    pub fn ensure_unset(&self, protocol: Protocol) -> Result<(), SubsystemError> {
        if self.nqn.is_some() {
            return Err(SubsystemError::NqnNotForProtocol(protocol));
        }
        if !self.allowed_hosts.is_empty() || self.dhchap.hosts().next().is_some() {
            return Err(SubsystemError::HostsNotForProtocol(protocol));
        }
        Ok(())
    }
}
