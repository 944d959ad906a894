//! A loom model of the driver <-> device protocol: every interleaving of
//! a driver thread and a device thread (up to a preemption bound), over
//! loom atomics for DMACOUNT, CHANCMD, CHANSTS and the completion word,
//! loom `UnsafeCell`s for the ring's descriptor slots and the data
//! buffers (so the driver writing a slot the device reads, or a buffer
//! handed back while the device writes it, is a data race loom reports),
//! and a loom `RwLock` for the device's IOVA map.
//!
//! It is not the driver's code (`driver.rs` and `model.rs` use std
//! atomics, volatile ring memory and a thread per device; rewriting them
//! over loom is another piece of work): it is a compact restatement of the
//! protocol's rules as they stand after issue 18, each beside the rule it
//! replaced ([`Rules`](rules::Rules)), and a test per rule that passes on
//! the rule and fails on the old one, so the model demonstrably detects
//! the bug:
//!
//! - completions come from the completion word only, accepted only when it
//!   names a flushed batch end at or after the tail; CHANSTS (which names
//!   a descriptor when it starts) is read for halts only. The old rule
//!   (retire through CHANSTS once the word stands still, accept any word
//!   naming a slot in flight) is caught twice: CHANSTS named at the start
//!   hands back a buffer being written, and, with CHANSTS named only when
//!   done (the model before issue 18), a word landing after the driver's
//!   CHANSTS read (held back by a fault, or merely written between the
//!   driver's two reads) retires the ring past the wrap;
//! - the doorbell (DMACOUNT) is a release store after the descriptors;
//! - a restart (suspend, then reset) rewrites the ring and hands buffers
//!   back only once the reset is confirmed (CHANCMD's reset bit clear); a
//!   reset never confirmed hands nothing back;
//! - the device holds its IOVA map across a descriptor's execution, so an
//!   unmap waits for the copy in progress.
//!
//! What it does not cover: rings larger than 4 slots or more than one
//! wrap (a scenario builds at most 5 descriptors), descriptor splitting,
//! halts
//! and their resubmission, CHANERR, timing (every wait is a bounded
//! number of polls), the fences of volatile memory (loom has none; the
//! driver's release store and the device's acquire load stand for them),
//! and anything the hardware does that the model does not.
//!
//! Thread: each test's own; loom runs the model's threads on it.

mod checks;
mod descriptor;
mod device;
mod driver;
mod rules;
mod system;
