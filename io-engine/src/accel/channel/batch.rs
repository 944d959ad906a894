//! A batch: tasks gathered for one submission, each module's in its own
//! stage, handed over together.
//!
//! Thread: the channel's; `!Send`.

use super::accel_channel::{AccelChannel, MAX_MODULES};
use super::queue::Queue;
use super::stage::Stage;
use super::submissions::submissions;
use crate::accel::{AccelError, IoVec, Opcode, Placement, Task};

/// No stage yet for a module, in [`Batch`]'s slots.
const NONE: u8 = u8::MAX;

/// Tasks gathered for one submission: each module gets its share in one
/// hand-off (for I/OAT, one doorbell). Each task completes on its own, as
/// a record of the batch's [`Queue`]. Dropping a batch without submitting
/// it returns its tasks unrun, and no record is made.
///
/// # Safety of the operations
///
/// Every operation is an `unsafe fn` with one contract: each buffer it
/// names is valid for its length (readable sources; writable destinations
/// that nothing else reads or writes), and stays so, unmoved and
/// untouched by the caller, until the task's record has been reaped (for
/// a task whose queue was dropped first: until the module finished it).
/// For the vectored sources, the `IoVec` array itself is part of the
/// contract.
pub struct Batch<'a> {
    q: &'a Queue,
    /// One stage per module the batch addresses, in the order first
    /// addressed.
    stages: Vec<Stage>,
    /// Each module's place in `stages`, or [`NONE`].
    slot: [u8; MAX_MODULES],
}

impl Queue {
    /// An empty batch whose tasks complete on this queue.
    pub fn batch(&self) -> Batch<'_> {
        Batch::new(self)
    }
}

impl<'a> Batch<'a> {
    fn new(q: &'a Queue) -> Batch<'a> {
        Batch {
            q,
            stages: q.channel().stage_list(),
            slot: [NONE; MAX_MODULES],
        }
    }

    /// Tasks in the batch.
    pub fn len(&self) -> usize {
        self.stages.iter().map(|s| s.len).sum()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn add(
        &mut self,
        op: Opcode,
        len: usize,
        tag: u64,
        fill: impl FnOnce(&mut Task),
    ) -> Result<(), AccelError> {
        let q: &'a Queue = self.q;
        let ch: &'a AccelChannel = q.channel();
        let module = ch.route(op);
        let s = match self.slot[module] {
            NONE => self.open(module),
            s => s as usize,
        };
        let st = &mut self.stages[s];
        ch.batch_room(module, st.len)?;
        st.push(ch, op, len, tag, fill)
    }

    /// A stage for `module`'s tasks; returns its place.
    #[cold]
    fn open(&mut self, module: usize) -> usize {
        let s = self.stages.len();
        self.stages
            .push(self.q.channel().take_stage(module, self.q.id()));
        self.slot[module] = s as u8;
        s
    }

    submissions!(add, "Adds", mut);

    /// Hands the batch over: one submission per module it addresses.
    pub fn submit(mut self) {
        let stages = std::mem::take(&mut self.stages);
        self.q.channel().submit_stages(stages);
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if self.stages.capacity() > 0 {
            let stages = std::mem::take(&mut self.stages);
            self.q.channel().drop_stages(stages);
        }
    }
}
