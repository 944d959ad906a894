//! A staging list: the tasks of one submission to one module, built in
//! place with their tags beside them, where the module reads them and,
//! when it holds them, where they stay until it reports them.
//!
//! Thread: the channel's. A stage is parked in its channel's table while
//! idle or held by a module, and taken out by a [`Batch`](super::Batch)
//! while it is built (so building touches no shared channel state but the
//! count of tasks taken); a single task is built in a parked stage in
//! place.

use super::room::Room;
use super::validate::validate;
use crate::accel::{AccelError, Opcode, Task, TaskId};

/// Bits of a [`TaskId`] that name the task within its stage; the rest
/// name the stage.
const INDEX_BITS: u32 = 16;

/// Most tasks one stage holds: a module's batch limit is capped to it.
pub(super) const MAX_STAGE: usize = 1 << INDEX_BITS;

/// Most stages a channel has (idle, being built, or held by a module).
const MAX_STAGES: usize = 1 << (TaskId::BITS - INDEX_BITS);

/// The id of task 0 of stage `no`; task `k` is `first_id(no) + k`.
#[inline(always)]
pub(super) fn first_id(no: usize) -> TaskId {
    (no as TaskId) << INDEX_BITS
}

/// The stage a reported task belongs to.
#[inline(always)]
pub(super) fn stage_of(id: TaskId) -> usize {
    (id >> INDEX_BITS) as usize
}

/// The task's place in its stage.
#[inline(always)]
pub(super) fn index_of(id: TaskId) -> usize {
    (id & (MAX_STAGE as TaskId - 1)) as usize
}

/// The tasks of one submission to one module.
#[derive(Default)]
pub(super) struct Stage {
    /// Its number: its slot in the channel's table, the upper bits of its
    /// tasks' ids.
    pub(super) no: usize,
    /// Only grows; the first `len` are the stage's.
    pub(super) tasks: Vec<Task>,
    /// The submitters' tags of `tasks`, by place; as long as `tasks`.
    pub(super) tags: Vec<u64>,
    pub(super) len: usize,
    /// Tasks handed to the module and not yet reported.
    pub(super) held: usize,
    /// The module its tasks are routed to.
    pub(super) module: usize,
    /// The submitter's queue, where its records go.
    pub(super) queue: u16,
}

impl Stage {
    /// An empty stage numbered `no`.
    pub(super) fn new(no: usize) -> Stage {
        assert!(
            no < MAX_STAGES,
            "at most {MAX_STAGES} accel stages on one channel"
        );
        Stage {
            no,
            ..Stage::default()
        }
    }

    /// Builds the next task, `op` of `len` bytes for the submitter's
    /// `tag`, with `fill` setting the fields its opcode reads, and
    /// validates it: the one place a task is built. Takes one of the
    /// channel's tasks; on a refusal the stage is as it was.
    #[inline(always)]
    pub(super) fn push(
        &mut self,
        ch: &impl Room,
        op: Opcode,
        len: usize,
        tag: u64,
        fill: impl FnOnce(&mut Task),
    ) -> Result<(), AccelError> {
        ch.has_room()?;
        if self.len == self.tasks.len() {
            self.grow();
        }
        let t = &mut self.tasks[self.len];
        t.set(op, len);
        fill(t);
        if let Err(reason) = validate(t, ch.max_transfer(op)) {
            return Err(reason.into_error(op, ch.module_for(op)));
        }
        self.tags[self.len] = tag;
        self.len += 1;
        ch.take_tasks(1);
        Ok(())
    }

    /// Room for one more task (and its tag).
    #[cold]
    fn grow(&mut self) {
        self.tasks.push(Task::empty());
        self.tags.push(0);
    }

    /// Empty again, keeping its lists' room.
    #[inline]
    pub(super) fn clear(&mut self) {
        self.len = 0;
    }
}
