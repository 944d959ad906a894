//! What building a task asks of the channel it goes to: room for one more
//! task and the limits of the module that runs its opcode. The channel
//! implements it; a staging list builds through it, so that the staging
//! list does not depend on the channel's type (and the two files do not
//! import each other).
//!
//! Thread: the channel's.

use crate::accel::{AccelError, Opcode};

/// A channel as a staging list sees it while it builds a task.
pub(super) trait Room {
    /// `Ok` when one more task may be taken, else why not.
    fn has_room(&self) -> Result<(), AccelError>;
    /// Counts `n` tasks taken.
    fn take_tasks(&self, n: usize);
    /// The largest transfer the module running `op` takes.
    fn max_transfer(&self, op: Opcode) -> usize;
    /// The name of the module running `op` (for errors).
    fn module_for(&self, op: Opcode) -> &'static str;
}
