//! Environment: what every layer stands on. Core sets and CPU pinning,
//! core slots (a unique number per data-path thread), hugepage-backed DMA
//! memory, its IOVA and the memory check before mapping it, and the cycle
//! clock.
//!
//! Thread: any. Nothing here keeps per-core state.

pub mod affinity;
pub mod core_slot;
pub mod cores;
pub mod dma;
pub mod tsc;
