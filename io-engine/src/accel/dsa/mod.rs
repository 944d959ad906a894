//! The Intel DSA (Data Streaming Accelerator) accel module: copy, fill,
//! compare, compare pattern, dualcast, crc32c and copy+crc32c on DSA work
//! queues, batched.
//!
//! Thread: see each part; the seam ([`WorkQueue`]) is `Send + Sync`.
//!
//! The parts, each behind a seam so the driver runs unchanged on real
//! hardware and on the model:
//!
//! - [`spec`]: descriptor, completion record, opcodes, status codes,
//!   registers and portals, per the DSA specification;
//! - [`portal`]: the seam the driver sees a work queue through
//!   ([`WorkQueue`], [`WqInfo`], [`Retry`]) and the real submission path
//!   ([`Portal`]: MOVDIR64B / ENQCMD);
//! - `model`: a software DSA device whose work queues implement the seam,
//!   for tests and demos, built only with the `dsa-model` cargo feature
//!   (and in the unit tests).

#[cfg(any(test, feature = "dsa-model"))]
pub mod model;
pub mod portal;
pub mod spec;

pub use portal::{Portal, Retry, WorkQueue, WqInfo, WqMode};
