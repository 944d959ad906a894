//! What a metrics scrape reads of the NVMe/TCP target.
//!
//! Thread: taken on the scraping thread (atomics and the registries'
//! locks, never a reactor).

use crate::export::nvmf::NvmfStats;

/// The NVMe/TCP target at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvmfSnapshot {
    /// Connections open (admin and I/O queues, and ones not connected
    /// yet).
    pub connections: usize,
    /// Per NVMe-oF export: (export, I/O queues attached, controllers).
    pub exports: Vec<(String, usize, usize)>,
    /// Commands, errors, bytes.
    pub stats: NvmfStats,
}
