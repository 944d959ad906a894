//! io-engine: a userspace I/O engine.
//!
//! Thread: the library spans them all; each module's doc says which thread
//! runs its code (`docs/threading.md` has the whole map).
//!
//! One process owns a set of pinned CPU cores; each runs a [`reactor`] that
//! polls its messages, pollers and tasks. Block devices ([`bdev`]) take their
//! IO objects from per-core [`pool`] caches and complete on the submitting
//! core. [`env`] holds what the layers above stand on: core sets, pinning,
//! DMA memory and the cycle clock.
//!
//! Layers, lowest first: `env` < `pool` < `reactor` < `accel` < `bdev` <
//! `export`, `perf` < `engine` < `control`, `metrics`. A layer only imports
//! the layers below it (layers named together import neither each other),
//! and the files of a layer import each other in one direction;
//! `tests/layering.rs` reads this sentence and enforces both. See
//! `docs/architecture.md`.

pub mod accel;
pub mod bdev;
pub mod control;
pub mod engine;
pub mod env;
pub mod export;
pub mod metrics;
pub mod perf;
pub mod pool;
pub mod reactor;
