//! The channel itself: its routes and limits, its count of tasks taken,
//! its table of stages, the hand-over of a stage to its module, and the
//! filing of what modules report as records in the submitters' queues.
//!
//! Thread: the one that made it; `!Send` (`Rc`, `RefCell`).

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Instant;

use super::queue_state::{QueueState, Reaped};
use super::room::Room;
use super::stage::{MAX_STAGE, Stage, first_id, index_of, stage_of};
use super::tally::Tally;
use crate::accel::stats::ChannelStats;
use crate::accel::{
    AccelError, Completion, Module, ModuleChannel, OFFLOAD_DRAIN_TIMEOUT, Opcode, Submission, Task,
    TaskId, poll_until,
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
    /// Every stage, by number: idle, or held by a module. A stage out of
    /// the table (in a batch being built, or the singles' stage) leaves an
    /// empty placeholder here.
    stages: Vec<Stage>,
    /// Numbers of the idle stages in the table.
    idle: Vec<usize>,
    /// The stage single tasks are built in, out of the table: a single
    /// task goes to its module in it, and is filed at once when the module
    /// executed it; when the module holds the task, the stage is parked in
    /// the table until it is reported, and another idle stage takes its
    /// place here.
    solo: Stage,
    /// Spare lists of stages for batches.
    spare_lists: Vec<Vec<Stage>>,
    ledger: Ledger,
}

/// What handing a stage over touches besides the stage itself: the
/// modules' channels, what they report and the submitters' queues.
struct Ledger {
    chans: Vec<Option<Box<dyn ModuleChannel>>>,
    /// Tasks modules hold (handed over, not yet reported).
    in_modules: usize,
    /// What a module just reported; filed into queues at once.
    reported: Vec<(TaskId, Completion)>,
    queues: Vec<QueueState>,
    /// Closed queues with nothing in flight, to reuse.
    free_queues: Vec<u16>,
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
                // Stage 0 starts as the singles' stage.
                stages: vec![Stage::default()],
                idle: Vec::new(),
                solo: Stage::new(0),
                spare_lists: Vec::new(),
                ledger: Ledger {
                    chans,
                    in_modules: 0,
                    reported: Vec::with_capacity(tasks),
                    queues: Vec::new(),
                    free_queues: Vec::new(),
                },
            }),
        }
    }

    /// Opens a completion queue's state (a free one again, or a new one)
    /// and returns its number; [`AccelChannel::queue`] wraps it.
    pub(super) fn open_queue(&self) -> u16 {
        let mut state = self.state.borrow_mut();
        let state = &mut state.ledger;
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

    /// Whether `op` runs on an offload engine on this channel (the
    /// software module, always the framework's last, runs it otherwise).
    pub fn offloads(&self, op: Opcode) -> bool {
        self.route[op.index()] + 1 != self.modules.len()
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

    /// Submits one task at once: a stage of one, built in place in the
    /// singles' stage.
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
        let st = &mut state.solo;
        st.push(self, op, len, tag, fill)?;
        st.module = self.route(op);
        st.queue = queue;
        if self.hand_over(st, &mut state.ledger) == Submission::Submitted {
            // The module holds the task: the stage is parked until it
            // reports it, and an idle one takes its place.
            let fresh = state.take_idle();
            let held = std::mem::replace(&mut state.solo, fresh);
            self.park(state, held);
        }
        Ok(())
    }

    /// An idle stage for a batch's tasks of `module` on `queue`, taken out
    /// of the table.
    pub(super) fn take_stage(&self, module: usize, queue: u16) -> Stage {
        let mut st = self.state.borrow_mut().take_idle();
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
        for mut st in list.drain(..) {
            if st.len == 0 || self.hand_over(&mut st, &mut state.ledger) == Submission::Executed {
                state.put_idle(st);
            } else {
                self.park(state, st);
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
            state.put_idle(st);
        }
        state.spare_lists.push(list);
    }

    /// Hands stage `st` to its module in one call. A submission the
    /// module executed is filed at once, by position, and the stage is
    /// empty again; a stage the module holds tasks of must then be parked
    /// ([`AccelChannel::park`]) before anything else is filed.
    #[inline(always)]
    fn hand_over(&self, st: &mut Stage, l: &mut Ledger) -> Submission {
        let n = st.len;
        let q = &mut l.queues[st.queue as usize];
        q.in_flight += n;
        let chan = l.chans[st.module]
            .as_mut()
            .expect("a routed module has a channel");
        let (tasks, tags) = (&st.tasks[..n], &st.tags[..n]);
        let how = chan.submit(tasks, first_id(st.no), &mut l.reported);
        self.stats.batch(st.module);
        match how {
            Submission::Executed => {
                let done = &l.reported;
                debug_assert!(
                    done.len() == n && done.iter().zip(first_id(st.no)..).all(|(r, id)| r.0 == id),
                    "an executed submission reports every task, in order"
                );
                // The submitter is submitting through it: it is open.
                debug_assert!(q.open);
                let done = &done[..n];
                if let ([t], [tag], [(_, c)]) = (tasks, tags, done) {
                    // A single task: no run to tally.
                    q.records.push((*tag, *c));
                    Tally::one(&self.stats, st.module, t, c.status);
                } else {
                    let mut tally = Tally::new(&self.stats, st.module);
                    for k in 0..n {
                        file_one(&mut q.records, &mut tally, &tasks[k], tags[k], done[k].1);
                    }
                    tally.flush();
                }
                l.reported.clear();
                st.clear();
            }
            Submission::Submitted => {
                st.held = n;
                l.in_modules += n - l.reported.len();
            }
        }
        how
    }

    /// Parks stage `st`, whose module holds tasks of it, in the table
    /// until they are reported, and files what the module reported at
    /// submission.
    fn park(&self, state: &mut State, st: Stage) {
        let no = st.no;
        state.stages[no] = st;
        self.file(state);
    }

    #[inline]
    fn poll_modules(&self, state: &mut State) -> usize {
        let l = &mut state.ledger;
        if l.in_modules == 0 {
            return 0;
        }
        for chan in l.chans.iter_mut().flatten() {
            if chan.in_flight() > 0 {
                chan.poll(&mut l.reported);
            }
        }
        let n = l.reported.len();
        l.in_modules -= n;
        self.file(state);
        n
    }

    /// Files what a module holding tasks reported as records in the
    /// submitters' queues, counts it, and makes stages whose every task is
    /// reported idle. (A submission the module executed at once is filed
    /// by position in [`AccelChannel::hand_over`].)
    #[inline]
    fn file(&self, state: &mut State) {
        let State {
            stages,
            idle,
            ledger:
                Ledger {
                    reported,
                    queues,
                    free_queues,
                    ..
                },
            ..
        } = state;
        // Reports come in runs of one stage.
        for run in reported.chunk_by(|a, b| stage_of(a.0) == stage_of(b.0)) {
            let no = stage_of(run[0].0);
            let st = &mut stages[no];
            let q = &mut queues[st.queue as usize];
            let mut tally = Tally::new(&self.stats, st.module);
            for &(id, c) in run {
                let i = index_of(id);
                file_one(&mut q.records, &mut tally, &st.tasks[i], st.tags[i], c);
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
        let q = &mut state.ledger.queues[id as usize];
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

    /// Polls the modules until none holds a task of queue `id`, every one
    /// still holding tasks is stuck ([`ModuleChannel::stuck`]), or
    /// `deadline` passes; returns how many they still hold then.
    pub(super) fn drain_queue(&self, id: u16, deadline: Instant) -> usize {
        let mut left = 0;
        poll_until(deadline, || {
            let mut state = self.state.borrow_mut();
            self.poll_modules(&mut state);
            let l = &state.ledger;
            let q = &l.queues[id as usize];
            left = q.in_flight - q.records.len();
            // Nothing more will come when every module channel still
            // holding tasks is stuck.
            let mut holding = l.chans.iter().flatten().filter(|c| c.in_flight() > 0);
            left == 0 || (holding.clone().next().is_some() && holding.all(|c| c.stuck()))
        });
        left
    }

    /// Tasks submitted through queue `id` and not yet reaped.
    pub(super) fn queue_in_flight(&self, id: u16) -> usize {
        self.state.borrow().ledger.queues[id as usize].in_flight
    }

    /// Closes queue `id`: its records are forgotten, and it is reused once
    /// the modules have reported its tasks.
    pub(super) fn close(&self, id: u16) {
        let mut state = self.state.borrow_mut();
        let state = &mut state.ledger;
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

impl Drop for AccelChannel {
    /// Every queue holds the channel, so it goes once they are all closed;
    /// a module may still hold tasks of a queue whose drain gave up. The
    /// modules' channels are drained (bounded) before they go; a module
    /// channel that still holds tasks past the deadline is leaked (not
    /// dropped, which would wait again), and so are the stages, which it
    /// may still read (the tasks' buffers are their submitters' to leak).
    fn drop(&mut self) {
        let state = self.state.get_mut();
        let l = &mut state.ledger;
        if l.in_modules == 0 {
            return;
        }
        let deadline = Instant::now() + OFFLOAD_DRAIN_TIMEOUT;
        let mut left = 0;
        for (m, slot) in l.chans.iter_mut().enumerate() {
            let Some(chan) = slot else { continue };
            let n = chan.drain(&mut l.reported, deadline);
            l.reported.clear();
            if n > 0 {
                tracing::error!(
                    "accel channel dropped while module {} still holds {n} tasks after \
                     {OFFLOAD_DRAIN_TIMEOUT:?}; its channel and the staging lists are leaked",
                    self.modules[m].name()
                );
                std::mem::forget(slot.take());
                left += n;
            }
        }
        if left > 0 {
            std::mem::forget(std::mem::take(&mut state.stages));
        }
    }
}

/// Files one finished task: its record in its queue, counted: the one
/// place a finished task is handled.
#[inline(always)]
fn file_one(records: &mut Vec<Reaped>, tally: &mut Tally<'_>, t: &Task, tag: u64, c: Completion) {
    records.push((tag, c));
    tally.count(t.op, t.len, c.status);
}

impl State {
    /// Takes an idle stage (a new one when none is) out of the table.
    #[inline]
    fn take_idle(&mut self) -> Stage {
        match self.idle.pop() {
            Some(no) => std::mem::take(&mut self.stages[no]),
            None => self.add_stage(),
        }
    }

    #[cold]
    fn add_stage(&mut self) -> Stage {
        let no = self.stages.len();
        self.stages.push(Stage::default());
        Stage::new(no)
    }

    /// Puts an empty stage back in the table, idle.
    #[inline]
    fn put_idle(&mut self, st: Stage) {
        debug_assert_eq!(st.len, 0);
        let no = st.no;
        self.stages[no] = st;
        self.idle.push(no);
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
