//! The software module: every opcode, on the CPU, with the kernels picked
//! for it at start.
//!
//! Thread: [`Software`] is shared by every thread; each thread's
//! channel ([`SoftwareChannel`]) runs on that thread.

use super::channel::SoftwareChannel;
use super::kernels::Kernels;
use crate::accel::{Module, ModuleChannel, Opcode};

/// The software module.
pub struct Software {
    k: &'static Kernels,
}

/// Most tasks per submission: a bound for the batch API, not a cost.
pub const MAX_BATCH: usize = 4096;

impl Software {
    /// The module, with the kernels picked for this CPU.
    pub fn new() -> Software {
        Software { k: Kernels::get() }
    }

    /// The instruction set its kernels use (`avx512`, `avx2`, `scalar`).
    pub fn isa(&self) -> &'static str {
        self.k.name()
    }
}

impl Default for Software {
    fn default() -> Self {
        Software::new()
    }
}

impl Module for Software {
    fn name(&self) -> &'static str {
        "software"
    }
    fn supports(&self, _op: Opcode) -> bool {
        true
    }
    fn max_transfer(&self, _op: Opcode) -> usize {
        isize::MAX as usize
    }
    fn max_batch(&self) -> usize {
        MAX_BATCH
    }
    fn implementation(&self) -> String {
        format!("{} kernels", self.isa())
    }
    fn create_channel(&self) -> Option<Box<dyn ModuleChannel>> {
        Some(Box::new(SoftwareChannel::new(self.k)))
    }
}
