//! What every connection of a run shares: the workload, the command size
//! and depth, the namespace, how writes carry their data, the digests and
//! whether reads are verified.
//!
//! Thread: `main` makes it; each worker's connections copy it.

use io_engine::export::nvmf::pdu::Digests;

use super::workload::Workload;

/// What every connection of the run shares.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// The workload.
    pub workload: Workload,
    /// Percentage of reads (randrw).
    pub read_percent: u32,
    /// Commands kept in flight.
    pub depth: u16,
    /// Bytes per command.
    pub io_size: usize,
    /// The namespace.
    pub nsid: u32,
    /// Block size in bytes.
    pub block_size: usize,
    /// Most write data sent in the capsule.
    pub in_capsule: usize,
    /// Digests in use.
    pub digests: Digests,
    /// Check reads against what was written.
    pub verify: bool,
}
