//! [`bump`]: adds to a counter that one thread writes and any thread
//! reads, without a locked instruction on the data path.
//!
//! Thread: the counter's one writer (a channel's thread: the accel
//! channel's stats, an offload driver's counters); readers on any thread
//! load it with `Relaxed`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Adds `n` to `c` (wrapping). Only the counter's one writer calls it: a
/// plain load and store, so a second writer would lose counts.
#[inline]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}
