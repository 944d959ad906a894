//! Environment: what every layer stands on. Core sets and CPU pinning,
//! hugepage-backed DMA memory and its IOVA, and the cycle clock.
//!
//! Thread: any. Nothing here keeps per-core state.

pub mod affinity;
pub mod core_slot;
pub mod cores;
pub mod dma;
pub mod tsc;
