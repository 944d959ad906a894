//! The DH-HMAC-CHAP secrets of one allowed host: the host's, which it
//! proves it holds, and optionally the controller's, which the target
//! proves it holds when the host asks (bidirectional authentication).
//!
//! Thread: any (read-only once made).

use super::secret::{Secret, SecretError};

/// One host's secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct DhchapKeys {
    /// The host's secret (`nvme connect --dhchap-secret`).
    pub host: Secret,
    /// The controller's secret (`nvme connect --dhchap-ctrl-secret`).
    pub ctrl: Option<Secret>,
}

impl DhchapKeys {
    /// Parses the host's secret and the controller's (if any), both in
    /// the `DHHC-1` representation.
    pub fn parse(host: &str, ctrl: Option<&str>) -> Result<DhchapKeys, SecretError> {
        Ok(DhchapKeys {
            host: Secret::parse(host)?,
            ctrl: ctrl.map(Secret::parse).transpose()?,
        })
    }
}

impl std::fmt::Debug for DhchapKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DhchapKeys")
            .field("host", &"REDACTED")
            .field("ctrl", &self.ctrl.as_ref().map(|_| "REDACTED"))
            .finish()
    }
}
