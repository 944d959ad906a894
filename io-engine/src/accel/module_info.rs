//! What the API shows of a registered module.
//!
//! Thread: any; made by [`Accel::modules`](super::Accel::modules) for the
//! control plane.

use super::Opcode;

/// What the API shows of a module.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModuleInfo {
    /// Its name.
    pub name: &'static str,
    /// The opcodes it executes.
    pub opcodes: Vec<Opcode>,
    /// Most tasks per submission.
    pub max_batch: usize,
    /// Longest copy it takes, in bytes.
    pub max_transfer: usize,
    /// What runs its tasks ([`Module::implementation`](super::Module::implementation)).
    pub implementation: String,
}
