//! The module seam, first half: what an accel engine (software, I/OAT)
//! is and what it offers; its per-thread half is [`ModuleChannel`].
//!
//! Thread: a [`Module`] is shared by every thread and only describes the
//! engine and makes channels.

use super::{ModuleChannel, Opcode};

/// An accel engine.
pub trait Module: Send + Sync {
    /// Short name, as in `--accel-assign copy=NAME` and metrics labels.
    fn name(&self) -> &'static str;

    /// Whether the module executes `op`.
    fn supports(&self, op: Opcode) -> bool;

    /// The longest task of `op` it takes, in bytes (it splits longer
    /// transfers internally up to this).
    fn max_transfer(&self, op: Opcode) -> usize;

    /// The most tasks it takes in one [`ModuleChannel::submit`].
    fn max_batch(&self) -> usize;

    /// What runs its tasks, in a few words, for ListModules: the software
    /// module's kernel ISA, the I/OAT module's channels.
    fn implementation(&self) -> String;

    /// A channel for the calling thread, or `None` when the module has no
    /// channel to give it (I/OAT: every hardware channel is taken); the
    /// framework then runs that thread's tasks on the software module.
    fn create_channel(&self) -> Option<Box<dyn ModuleChannel>>;

    /// What the module found when it was made (devices used or left out,
    /// and why), one line each, for GetInfo and the log.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Engine-specific counters (I/OAT: descriptors, doorbell writes), by
    /// name.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

impl std::fmt::Debug for dyn Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
