//! The software module: every opcode, executed by the CPU with the best
//! SIMD kernels it has ([`kernels`]), at submission time. Copies and fills
//! placed in memory ([`Placement::Memory`](super::Placement::Memory)) stream their stores, with one
//! fence per submission.
//!
//! Thread: the submitting thread runs the kernels inside
//! `ModuleChannel::submit`; completions are reported at once, and their
//! submitters reap them from their queues later, on that same thread.

mod channel;
pub mod kernels;
mod module;

pub use module::{MAX_BATCH, Software};
