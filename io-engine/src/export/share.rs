//! One share as a protocol sees it when a client names it: the device,
//! open, and how it is exported.
//!
//! Thread: any (the descriptor is `Send + Sync`).

use super::Protocol;
use crate::bdev::BdevDesc;

/// One share, as a protocol's option phase looks it up. What a protocol
/// adds to a share is its own to keep (NVMe-oF: `nvmf::Subsystems`).
#[derive(Clone)]
pub struct Share {
    /// Export name (the device name).
    pub name: String,
    /// The protocol it is exported over.
    pub protocol: Protocol,
    /// Read-only export.
    pub read_only: bool,
    /// The device, open.
    pub desc: BdevDesc,
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share")
            .field("name", &self.name)
            .field("protocol", &self.protocol)
            .field("read_only", &self.read_only)
            .finish()
    }
}
