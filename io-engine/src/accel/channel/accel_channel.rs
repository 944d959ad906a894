//! The channel itself: its routes and limits, its count of tasks taken,
//! its table of stages, the hand-over of a stage to its module, and the
//! filing of what modules report as records in the submitters' queues.
//!
//! Thread: the one that made it; `!Send` (`Rc`, `RefCell`).

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use super::queue_state::{QueueState, Reaped};
use super::room::Room;
use super::stage::{MAX_STAGE, Stage, first_id, index_of, stage_of};
use super::tally::Tally;
use crate::accel::stats::ChannelStats;
use crate::accel::{
    AccelError, Completion, Module, ModuleChannel, Opcode, Submission, Task, TaskId,
};

/// Most modules one channel routes to (offload engines plus software).
pub(super) const MAX_MODULES: usize = 8;

/// Records a new queue holds before it grows.
const QUEUE_PREALLOC: usize = 1024;

/// One thread's accel channel.
pub struct AccelChannel {
    modules: Vec<Arc<dyn Module>>,
    /// Module index per opcode on this channel (software where the
    /// assigned module had no channel for this thread).
    route: [usize; Opcode::COUNT],
    /// Longest task per opcode, from the routed module.
    max_len: [usize; Opcode::COUNT],
    max_batch: Vec<usize>,
    stats: Arc<ChannelStats>,
    /// The most tasks taken and not yet reaped.
    capacity: usize,
    /// Tasks taken (submitted, or in a batch being built) and not yet
    /// reaped, at most `capacity`: unreaped records count against it, so a
    /// queue that is not drained stops its submitter (`NoTask`) instead of
    /// growing.
    outstanding: Cell<usize>,
    state: RefCell<State>,
}

struct State {
    chans: Vec<Option<Box<dyn ModuleChannel>>>,
    /// Every stage, by number: idle, or held by a module. A stage out in
    /// a batch leaves an empty placeholder here.
    stages: Vec<Stage>,
    /// Numbers of the idle stages.
    idle: Vec<usize>,
    /// Tasks modules hold (handed over, not yet reported).
    in_modules: usize,
    /// What a module just reported; filed into queues at once.
    reported: Vec<(TaskId, Completion)>,
    queues: Vec<QueueState>,
    /// Closed queues with nothing in flight, to reuse.
    free_queues: Vec<u16>,
    /// Spare lists of stages for batches.
    spare_lists: Vec<Vec<Stage>>,
}

impl AccelChannel {
    pub(in crate::accel) fn new(
        modules: Vec<Arc<dyn Module>>,
        chans: Vec<Option<Box<dyn ModuleChannel>>>,
        route: [usize; Opcode::COUNT],
        stats: Arc<ChannelStats>,
        tasks: usize,
    ) -> AccelChannel {
        assert!(
            modules.len() <= MAX_MODULES,
            "at most {MAX_MODULES} accel modules"
        );
        let mut max_len = [0; Opcode::COUNT];
        for op in Opcode::ALL {
            max_len[op.index()] = modules[route[op.index()]].max_transfer(op);
        }
        let max_batch = modules
            .iter()
            .map(|m| m.max_batch().clamp(1, MAX_STAGE))
            .collect();
        AccelChannel {
            modules,
            route,
            max_len,
            max_batch,
            stats,
            capacity: tasks,
            outstanding: Cell::new(0),
            state: RefCell::new(State {
                chans,
                stages: Vec::new(),
                idle: Vec::new(),
                in_modules: 0,
                reported: Vec::with_capacity(tasks),
                queues: Vec::new(),
                free_queues: Vec::new(),
                spare_lists: Vec::new(),
            }),
        }
    }

    /// Opens a completion queue's state (a free one again, or a new one)
    /// and returns its number; [`AccelChannel::queue`] wraps it.
    pub(super) fn open_queue(&self) -> u16 {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        match state.free_queues.pop() {
            Some(id) => {
                state.queues[id as usize].open = true;
                id
            }
            None => {
                let id = u16::try_from(state.queues.len())
                    .expect("at most 65536 accel queues on one channel");
                state.queues.push(QueueState {
                    records: Vec::with_capacity(QUEUE_PREALLOC.min(self.capacity)),
                    in_flight: 0,
                    open: true,
                });
                id
            }
        }
    }

    /// The module that runs `op` on this channel.
    pub fn module_for(&self, op: Opcode) -> &'static str {
        self.modules[self.route[op.index()]].name()
    }

    /// The most tasks a batch takes for `op`'s module.
    pub fn max_batch(&self, op: Opcode) -> usize {
        self.max_batch[self.route[op.index()]]
    }

    /// The longest `op` task this channel takes, in bytes.
    pub fn max_transfer(&self, op: Opcode) -> usize {
        self.max_len[op.index()]
    }

    /// Tasks submitted on any queue and not yet reaped.
    pub fn in_flight(&self) -> usize {
        self.outstanding.get()
    }

    /// The most tasks that can be submitted and not yet reaped, over all
    /// this channel's queues (its task pool).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Polls every module that holds tasks and files what finished in the
    /// submitters' queues. Returns how many tasks the modules reported.
    /// [`Queue::reap`] does this first; a submitter never needs to.
    pub fn poll(&self) -> usize {
        let mut state = self.state.borrow_mut();
        self.poll_modules(&mut state)
    }

    /// The module index `op` is routed to.
    #[inline(always)]
    pub(super) fn route(&self, op: Opcode) -> usize {
        self.route[op.index()]
    }

    /// Refuses one more task for `module` in a batch that holds `held`
    /// of its tasks, when that is its batch limit.
    #[inline(always)]
    pub(super) fn batch_room(&self, module: usize, held: usize) -> Result<(), AccelError> {
        let max = self.max_batch[module];
        if held < max {
            Ok(())
        } else {
            Err(AccelError::BatchFull {
                module: self.modules[module].name(),
                max,
            })
        }
    }

    /// Whether one more task may be taken: fewer than `capacity` are
    /// taken and not yet reaped.
    #[inline(always)]
    pub(super) fn has_room(&self) -> Result<(), AccelError> {
        if self.outstanding.get() < self.capacity {
            Ok(())
        } else {
            Err(AccelError::NoTask {
                capacity: self.capacity,
            })
        }
    }

    /// Counts `n` tasks taken.
    #[inline(always)]
    pub(super) fn take_tasks(&self, n: usize) {
        self.outstanding.set(self.outstanding.get() + n);
    }

    /// Counts `n` tasks given back (reaped, forgotten or never submitted).
    #[inline(always)]
    fn give_back_tasks(&self, n: usize) {
        self.outstanding.set(self.outstanding.get() - n);
    }

    /// Submits one task at once: a stage of one, built in an idle stage in
    /// place.
    #[inline]
    pub(super) fn single(
        &self,
        queue: u16,
        op: Opcode,
        len: usize,
        tag: u64,
        fill: impl FnOnce(&mut Task),
    ) -> Result<(), AccelError> {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let no = state.idle_stage();
        let st = &mut state.stages[no];
        if let Err(e) = st.push(self, op, len, tag, fill) {
            state.idle.push(no);
            return Err(e);
        }
        st.module = self.route(op);
        st.queue = queue;
        self.hand_over(state, no);
        Ok(())
    }

    /// An idle stage for a batch's tasks of `module` on `queue`, taken out
    /// of the table.
    pub(super) fn take_stage(&self, module: usize, queue: u16) -> Stage {
        let mut state = self.state.borrow_mut();
        let no = state.idle_stage();
        let mut st = std::mem::take(&mut state.stages[no]);
        st.module = module;
        st.queue = queue;
        st
    }

    /// An empty list for a batch's stages.
    pub(super) fn stage_list(&self) -> Vec<Stage> {
        self.state
            .borrow_mut()
            .spare_lists
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(MAX_MODULES))
    }

    /// Hands a batch's stages to their modules, one submission each, and
    /// keeps `list` (empty) for another batch.
    pub(super) fn submit_stages(&self, mut list: Vec<Stage>) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        for st in list.drain(..) {
            let (no, len) = (st.no, st.len);
            state.stages[no] = st;
            if len == 0 {
                state.idle.push(no);
            } else {
                self.hand_over(state, no);
            }
        }
        state.spare_lists.push(list);
    }

    /// Returns a batch's stages unsubmitted: their tasks are given back
    /// unrun, and no record is made.
    pub(super) fn drop_stages(&self, mut list: Vec<Stage>) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        for mut st in list.drain(..) {
            self.give_back_tasks(st.len);
            st.clear();
            let no = st.no;
            state.stages[no] = st;
            state.idle.push(no);
        }
        state.spare_lists.push(list);
    }

    /// Hands stage `no` to its module in one call and files what the
    /// module finished in it. The stage stays parked, held, until its
    /// module has reported every task.
    #[inline(always)]
    fn hand_over(&self, state: &mut State, no: usize) {
        let State {
            chans,
            stages,
            reported,
            queues,
            in_modules,
            ..
        } = &mut *state;
        let st = &mut stages[no];
        let n = st.len;
        st.held = n;
        queues[st.queue as usize].in_flight += n;
        let chan = chans[st.module]
            .as_mut()
            .expect("a routed module has a channel");
        let how = chan.submit(&st.tasks[..n], first_id(no), reported);
        self.stats.batch(st.module);
        match how {
            Submission::Executed => {
                debug_assert_eq!(
                    reported.len(),
                    n,
                    "an executed submission reports every task"
                )
            }
            Submission::Submitted => *in_modules += n - reported.len(),
        }
        self.file(state);
    }

    #[inline]
    fn poll_modules(&self, state: &mut State) -> usize {
        if state.in_modules == 0 {
            return 0;
        }
        for chan in state.chans.iter_mut().flatten() {
            if chan.in_flight() > 0 {
                chan.poll(&mut state.reported);
            }
        }
        let n = state.reported.len();
        state.in_modules -= n;
        self.file(state);
        n
    }

    /// Files what a module reported as records in the submitters' queues,
    /// counts it, and makes stages whose every task is reported idle: the
    /// one place a finished task is handled.
    #[inline(always)]
    fn file(&self, state: &mut State) {
        let State {
            stages,
            idle,
            reported,
            queues,
            free_queues,
            ..
        } = state;
        // Reports come in runs of one stage (a whole submission, for a
        // module that finishes at once).
        for run in reported.chunk_by(|a, b| stage_of(a.0) == stage_of(b.0)) {
            let no = stage_of(run[0].0);
            let st = &mut stages[no];
            let q = &mut queues[st.queue as usize];
            let mut tally = Tally::new(&self.stats, st.module);
            for &(id, c) in run {
                let i = index_of(id);
                q.records.push((st.tags[i], c));
                let t = &st.tasks[i];
                tally.count(t.op, t.len, c.status);
            }
            tally.flush();
            st.held -= run.len();
            if st.held == 0 {
                st.clear();
                idle.push(no);
            }
            if !q.open {
                // Its submitter is gone; nobody reaps these.
                let n = q.records.len();
                q.records.clear();
                q.in_flight -= n;
                self.give_back_tasks(n);
                if q.in_flight == 0 {
                    free_queues.push(st.queue);
                }
            }
        }
        reported.clear();
    }

    /// Moves queue `id`'s records to `out`.
    #[inline]
    pub(super) fn reap(&self, id: u16, out: &mut Vec<Reaped>) -> usize {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        self.poll_modules(state);
        let q = &mut state.queues[id as usize];
        let n = q.records.len();
        if n == 0 {
            return 0;
        }
        if out.is_empty() {
            // The two lists trade places: no copy.
            std::mem::swap(out, &mut q.records);
        } else {
            out.append(&mut q.records);
        }
        q.in_flight -= n;
        self.give_back_tasks(n);
        n
    }

    /// Tasks submitted through queue `id` and not yet reaped.
    pub(super) fn queue_in_flight(&self, id: u16) -> usize {
        self.state.borrow().queues[id as usize].in_flight
    }

    /// Closes queue `id`: its records are forgotten, and it is reused once
    /// the modules have reported its tasks.
    pub(super) fn close(&self, id: u16) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let q = &mut state.queues[id as usize];
        let n = q.records.len();
        q.records.clear();
        q.in_flight -= n;
        q.open = false;
        self.give_back_tasks(n);
        if q.in_flight == 0 {
            state.free_queues.push(id);
        }
    }
}

impl State {
    /// Takes an idle stage (a new one when none is); returns its number.
    #[inline(always)]
    fn idle_stage(&mut self) -> usize {
        match self.idle.pop() {
            Some(no) => no,
            None => self.add_stage(),
        }
    }

    #[cold]
    fn add_stage(&mut self) -> usize {
        let no = self.stages.len();
        self.stages.push(Stage::new(no));
        no
    }
}

impl Room for AccelChannel {
    #[inline(always)]
    fn has_room(&self) -> Result<(), AccelError> {
        AccelChannel::has_room(self)
    }
    #[inline(always)]
    fn take_tasks(&self, n: usize) {
        AccelChannel::take_tasks(self, n)
    }
    #[inline(always)]
    fn max_transfer(&self, op: Opcode) -> usize {
        AccelChannel::max_transfer(self, op)
    }
    #[inline(always)]
    fn module_for(&self, op: Opcode) -> &'static str {
        AccelChannel::module_for(self, op)
    }
}
