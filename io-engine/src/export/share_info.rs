//! A share as the registry lists it: what every protocol has in common.
//!
//! Thread: any (plain data).

use super::Protocol;

/// A share as the registry lists it (the engine adds what its protocol
/// keeps, for the control plane).
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
}
