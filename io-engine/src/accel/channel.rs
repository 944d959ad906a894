//! A thread's accel channel: its task pool, its channel to each module it
//! routes to, the submitters' completion queues, submission (single tasks
//! and batches) and completion.
//!
//! Thread: the one that made it ([`Accel::channel`](super::Accel::channel));
//! `AccelChannel` and [`Queue`] are `!Send`. A submitter owns a [`Queue`]
//! on its thread's channel, submits through it with a `u64` tag per task,
//! and drains `(tag, completion)` records from it with [`Queue::reap`], as
//! io_uring's CQEs carry `user_data`: no callback per task. A submission
//! only appends records (the software module finishes at once); they are
//! handed to the submitter at its next reap, never inside the submission.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use super::stats::ChannelStats;
use super::task::{IoVec, Meta, Placement, Task, TaskId};
use super::{AccelError, Completion, Module, ModuleChannel, Opcode, Status};

/// The six submission calls, written once for [`Batch`] (through `add`)
/// and for [`Queue`] (through `single`, a batch of one).
macro_rules! submissions {
    ($via:ident, $verb:literal $(, $m:tt)?) => {
        #[doc = concat!($verb, " a copy of `len` bytes from `src` to `dst`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn copy(
            &$($m)? self,
            dst: *mut u8,
            src: *const u8,
            len: usize,
            tag: u64,
        ) -> Result<(), AccelError> {
            // SAFETY: the caller's contract, passed on.
            unsafe { self.copy_placed(dst, src, len, Placement::Cache, tag) }
        }

        #[doc = concat!($verb, " a copy of `len` bytes from `src` to `dst`, its stores landing where `placement` asks.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn copy_placed(
            &$($m)? self,
            dst: *mut u8,
            src: *const u8,
            len: usize,
            placement: Placement,
            tag: u64,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Copy, len, tag, |t| {
                t.dst = dst;
                t.src = src;
                t.placement = placement;
            })
        }

        #[doc = concat!($verb, " a fill of `len` bytes at `dst` with `byte`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn fill(
            &$($m)? self,
            dst: *mut u8,
            byte: u8,
            len: usize,
            tag: u64,
        ) -> Result<(), AccelError> {
            // SAFETY: the caller's contract, passed on.
            unsafe { self.fill_placed(dst, byte, len, Placement::Cache, tag) }
        }

        #[doc = concat!($verb, " a fill of `len` bytes at `dst` with `byte`, its stores landing where `placement` asks.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn fill_placed(
            &$($m)? self,
            dst: *mut u8,
            byte: u8,
            len: usize,
            placement: Placement,
            tag: u64,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Fill, len, tag, |t| {
                t.dst = dst;
                t.fill = byte;
                t.placement = placement;
            })
        }

        #[doc = concat!($verb, " a compare of `len` bytes at `a` and `b`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn compare(
            &$($m)? self,
            a: *const u8,
            b: *const u8,
            len: usize,
            tag: u64,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Compare, len, tag, |t| {
                t.src = a;
                t.src2 = b;
            })
        }

        #[doc = concat!($verb, " a dualcast of `len` bytes from `src` to `dst1` and `dst2`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn dualcast(
            &$($m)? self,
            dst1: *mut u8,
            dst2: *mut u8,
            src: *const u8,
            len: usize,
            tag: u64,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Dualcast, len, tag, |t| {
                t.dst = dst1;
                t.dst2 = dst2;
                t.src = src;
            })
        }

        #[doc = concat!($verb, " a CRC-32C of `srcs`, continuing from `seed`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`]; a vector of more than one entry must itself stay
        /// valid too (a single entry is copied into the task).
        pub unsafe fn crc32c(
            &$($m)? self,
            srcs: &[IoVec],
            seed: u32,
            tag: u64,
        ) -> Result<(), AccelError> {
            let len = srcs.iter().map(|v| v.len).sum();
            self.$via(Opcode::Crc32c, len, tag, |t| {
                t.set_sources(srcs);
                t.seed = seed;
            })
        }

        #[doc = concat!($verb, " a copy of `srcs` to `dst` with their CRC-32C from `seed`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`]; a vector of more than one entry must itself stay
        /// valid too (a single entry is copied into the task).
        pub unsafe fn copy_crc32c(
            &$($m)? self,
            dst: *mut u8,
            srcs: &[IoVec],
            seed: u32,
            tag: u64,
        ) -> Result<(), AccelError> {
            let len = srcs.iter().map(|v| v.len).sum();
            self.$via(Opcode::CopyCrc32c, len, tag, |t| {
                t.dst = dst;
                t.set_sources(srcs);
                t.seed = seed;
            })
        }
    };
}

/// Dualcast destinations must be aligned to this (SPDK's rule).
pub const DUALCAST_ALIGN: usize = 4096;

/// A finished task as its submitter reaps it: the tag it was submitted
/// with, and how it ended.
pub type Reaped = (u64, Completion);

/// One thread's accel channel.
pub struct AccelChannel {
    modules: Vec<Arc<dyn Module>>,
    /// Module index per opcode on this channel (software where the
    /// assigned module had no channel for this thread).
    route: [usize; Opcode::COUNT],
    /// Longest task per opcode, from the routed module.
    max_len: [usize; Opcode::COUNT],
    max_batch: Vec<usize>,
    /// Per module: it finishes tasks inside the submission
    /// ([`ModuleChannel::completes_at_submit`]).
    at_submit: Vec<bool>,
    stats: Arc<ChannelStats>,
    /// Tasks in the pool.
    capacity: usize,
    /// Tasks taken (submitted, or in a batch being built) and not yet
    /// reaped, at most `capacity`: unreaped records count against the
    /// pool, so a queue that is not drained stops its submitter (`NoTask`)
    /// instead of growing.
    outstanding: Cell<usize>,
    inner: RefCell<Inner>,
}

struct Inner {
    tasks: Vec<Task>,
    /// The task a single submission to a module that finishes at
    /// submission is built in: no pool task, no metadata.
    scratch: Task,
    meta: Vec<Meta>,
    /// Tasks neither filled nor held by a module. A task goes back here as
    /// soon as its module reports it, before its record is reaped.
    free: Vec<TaskId>,
    /// Tasks modules hold (handed over, not yet reported).
    in_modules: usize,
    chans: Vec<Option<Box<dyn ModuleChannel>>>,
    /// What a module just reported; filed into queues at once.
    reported: Vec<(TaskId, Completion)>,
    queues: Vec<QueueState>,
    /// Closed queues with nothing in flight, to reuse.
    free_queues: Vec<u16>,
    /// Spare task-id lists for batches.
    spare: Vec<Vec<TaskId>>,
    /// Spare staging areas for batches.
    spare_staged: Vec<Staged>,
}

/// A batch's tasks for modules that finish at submission: built here
/// rather than in pool tasks, with their tags beside them.
#[derive(Default)]
struct Staged {
    /// Only grows; the first `len` are the batch's.
    tasks: Vec<Task>,
    len: usize,
    tags: Vec<u64>,
    /// Tasks and bytes per opcode.
    tally: [(u64, u64); Opcode::COUNT],
}

impl Staged {
    /// Empty again, keeping its lists' room.
    fn clear(&mut self) {
        self.len = 0;
        self.tags.clear();
        self.tally = Default::default();
    }
}

/// One submitter's completion queue.
struct QueueState {
    records: Vec<Reaped>,
    /// Tasks submitted through it and not yet reaped.
    in_flight: usize,
    open: bool,
}

impl AccelChannel {
    pub(super) fn new(
        modules: Vec<Arc<dyn Module>>,
        chans: Vec<Option<Box<dyn ModuleChannel>>>,
        route: [usize; Opcode::COUNT],
        stats: Arc<ChannelStats>,
        tasks: usize,
    ) -> AccelChannel {
        let mut max_len = [0; Opcode::COUNT];
        for op in Opcode::ALL {
            max_len[op.index()] = modules[route[op.index()]].max_transfer(op);
        }
        let max_batch = modules.iter().map(|m| m.max_batch().max(1)).collect();
        let at_submit = chans
            .iter()
            .map(|c| c.as_ref().is_some_and(|c| c.completes_at_submit()))
            .collect();
        AccelChannel {
            modules,
            route,
            max_len,
            max_batch,
            at_submit,
            stats,
            capacity: tasks,
            outstanding: Cell::new(0),
            inner: RefCell::new(Inner {
                tasks: (0..tasks).map(|_| Task::empty()).collect(),
                scratch: Task::empty(),
                meta: (0..tasks).map(|_| Meta::empty()).collect(),
                free: (0..tasks as TaskId).rev().collect(),
                in_modules: 0,
                chans,
                reported: Vec::with_capacity(tasks),
                queues: Vec::new(),
                free_queues: Vec::new(),
                spare: Vec::new(),
                spare_staged: Vec::new(),
            }),
        }
    }

    /// A new completion queue on this channel, for one submitter.
    pub fn queue(self: &Rc<Self>) -> Queue {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let id = match inner.free_queues.pop() {
            Some(id) => {
                inner.queues[id as usize].open = true;
                id
            }
            None => {
                let id = u16::try_from(inner.queues.len())
                    .expect("at most 65536 accel queues on one channel");
                inner.queues.push(QueueState {
                    records: Vec::with_capacity(QUEUE_PREALLOC.min(self.capacity)),
                    in_flight: 0,
                    open: true,
                });
                id
            }
        };
        Queue {
            ch: self.clone(),
            id,
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

    /// Tasks in this channel's pool: the most that can be submitted and
    /// not yet reaped, over all its queues.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Polls every module that holds tasks and files what finished in the
    /// submitters' queues. Returns how many tasks the modules reported.
    /// [`Queue::reap`] does this first; a submitter never needs to.
    pub fn poll(&self) -> usize {
        let mut inner = self.inner.borrow_mut();
        self.poll_modules(&mut inner)
    }

    #[inline]
    fn poll_modules(&self, inner: &mut Inner) -> usize {
        if inner.in_modules == 0 {
            return 0;
        }
        for chan in inner.chans.iter_mut().flatten() {
            if chan.in_flight() > 0 {
                chan.poll(&mut inner.reported);
            }
        }
        let n = inner.reported.len();
        self.file(inner);
        n
    }

    /// Files what a module reported as records in the submitters' queues,
    /// counts it, and frees the tasks.
    #[inline]
    fn file(&self, inner: &mut Inner) {
        let Inner {
            tasks,
            meta,
            free,
            in_modules,
            reported,
            queues,
            free_queues,
            ..
        } = inner;
        *in_modules -= reported.len();
        // Successes are counted once per run of one module and opcode:
        // once per batch, for a batch of one kind.
        let (mut run, mut count, mut bytes) = ((0u8, Opcode::Copy), 0u64, 0u64);
        for &(id, c) in reported.iter() {
            let m = &meta[id as usize];
            let len = tasks[id as usize].len;
            if c.status == Status::Success {
                if run != (m.route, m.op) {
                    if count > 0 {
                        self.stats.succeeded(run.0 as usize, run.1, count, bytes);
                    }
                    (run, count, bytes) = ((m.route, m.op), 0, 0);
                }
                count += 1;
                bytes += len as u64;
            } else {
                self.stats.finished(m.route as usize, m.op, c.status, len);
            }
            let q = &mut queues[m.queue as usize];
            if q.open {
                q.records.push((m.tag, c));
            } else {
                // Its submitter is gone; nobody reaps this.
                q.in_flight -= 1;
                self.outstanding.set(self.outstanding.get() - 1);
                if q.in_flight == 0 {
                    free_queues.push(m.queue);
                }
            }
            free.push(id);
        }
        if count > 0 {
            self.stats.succeeded(run.0 as usize, run.1, count, bytes);
        }
        reported.clear();
    }

    /// Moves queue `id`'s records to `out`.
    #[inline]
    fn reap(&self, id: u16, out: &mut Vec<Reaped>) -> usize {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        self.poll_modules(inner);
        let q = &mut inner.queues[id as usize];
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
        self.outstanding.set(self.outstanding.get() - n);
        n
    }

    fn close(&self, id: u16) {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let q = &mut inner.queues[id as usize];
        let n = q.records.len();
        q.records.clear();
        q.in_flight -= n;
        q.open = false;
        self.outstanding.set(self.outstanding.get() - n);
        if q.in_flight == 0 {
            inner.free_queues.push(id);
        }
    }

    /// Takes a free task and fills it with `fill`, after validating it.
    #[inline(always)]
    fn prepare(
        &self,
        inner: &mut Inner,
        queue: u16,
        op: Opcode,
        len: usize,
        tag: u64,
        fill: impl FnOnce(&mut Task),
    ) -> Result<(TaskId, usize), AccelError> {
        self.has_room()?;
        // Pool tasks out of `free` are among the `outstanding` ones, so
        // with room there is a free task; the check costs nothing.
        let Some(&id) = inner.free.last() else {
            return Err(AccelError::NoTask {
                capacity: self.capacity,
            });
        };
        let module = self.route[op.index()];
        let t = &mut inner.tasks[id as usize];
        t.set(op, len);
        fill(t);
        if let Err(reason) = validate(t, self.max_len[op.index()]) {
            return Err(self.refuse(op, module, reason));
        }
        let m = &mut inner.meta[id as usize];
        m.tag = tag;
        m.queue = queue;
        m.route = module as u8;
        m.op = op;
        inner.free.pop();
        self.outstanding.set(self.outstanding.get() + 1);
        Ok((id, module))
    }

    /// Whether one more task may be taken: fewer than the pool's size are
    /// taken and not yet reaped.
    #[inline(always)]
    fn has_room(&self) -> Result<(), AccelError> {
        if self.outstanding.get() < self.capacity {
            Ok(())
        } else {
            Err(AccelError::NoTask {
                capacity: self.capacity,
            })
        }
    }

    #[cold]
    fn refuse(&self, op: Opcode, module: usize, reason: Refusal) -> AccelError {
        AccelError::Invalid {
            op,
            reason: reason.describe(self.modules[module].name()),
        }
    }

    /// Hands `ids` to `module` in one call and files what it finished at
    /// once.
    #[inline]
    fn hand_off(&self, inner: &mut Inner, module: usize, ids: &[TaskId]) {
        let chan = inner.chans[module]
            .as_mut()
            .expect("a routed module has a channel");
        chan.submit(&inner.tasks, ids, &mut inner.reported);
        inner.in_modules += ids.len();
        self.stats.batch(module);
        self.file(inner);
    }

    /// Hands a batch's staged tasks (`ids` index `st.tasks`) to `module`,
    /// which finishes them in the call, and files their records in queue
    /// `queue`.
    #[inline]
    fn hand_off_staged(
        &self,
        inner: &mut Inner,
        module: usize,
        queue: u16,
        st: &Staged,
        ids: &[TaskId],
    ) {
        let (tasks, tags, tally) = (&st.tasks[..st.len], &st.tags, &st.tally);
        let chan = inner.chans[module]
            .as_mut()
            .expect("a routed module has a channel");
        chan.submit(tasks, ids, &mut inner.reported);
        debug_assert_eq!(inner.reported.len(), ids.len());
        self.stats.batch(module);
        // Successes are counted from the batch's tallies, once per opcode;
        // the loop only looks at the tasks that did not succeed.
        let mut short = [(0u64, 0u64); Opcode::COUNT];
        let q = &mut inner.queues[queue as usize];
        for &(i, c) in inner.reported.iter() {
            q.records.push((tags[i as usize], c));
            if c.status != Status::Success {
                let t = &tasks[i as usize];
                self.stats.finished(module, t.op, c.status, t.len);
                let s = &mut short[t.op.index()];
                s.0 += 1;
                s.1 += t.len as u64;
            }
        }
        inner.reported.clear();
        for op in Opcode::ALL {
            let (n, bytes) = tally[op.index()];
            if n > 0 && self.route[op.index()] == module {
                let (fails, lost) = short[op.index()];
                if n > fails {
                    self.stats.succeeded(module, op, n - fails, bytes - lost);
                }
            }
        }
    }

    /// Returns the tasks of a batch that was not submitted.
    fn release(&self, ids: &[TaskId]) {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        inner.free.extend_from_slice(ids);
        self.outstanding.set(self.outstanding.get() - ids.len());
    }

    /// Submits one task at once (a batch of one).
    #[inline]
    fn single(
        &self,
        queue: u16,
        op: Opcode,
        len: usize,
        tag: u64,
        fill: impl FnOnce(&mut Task),
    ) -> Result<(), AccelError> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let module = self.route[op.index()];
        if !self.at_submit[module] {
            let (id, module) = self.prepare(inner, queue, op, len, tag, fill)?;
            inner.queues[queue as usize].in_flight += 1;
            self.hand_off(inner, module, &[id]);
            return Ok(());
        }
        // The module finishes the task inside the call: build it in the
        // scratch slot and file its record here, without a pool task.
        self.has_room()?;
        let t = &mut inner.scratch;
        t.set(op, len);
        fill(t);
        if let Err(reason) = validate(t, self.max_len[op.index()]) {
            return Err(self.refuse(op, module, reason));
        }
        let chan = inner.chans[module]
            .as_mut()
            .expect("a routed module has a channel");
        chan.submit(
            std::slice::from_ref(&inner.scratch),
            &[0],
            &mut inner.reported,
        );
        let (_, c) = inner
            .reported
            .pop()
            .expect("a module that completes at submission reports the task");
        debug_assert!(inner.reported.is_empty());
        self.stats.batch(module);
        if c.status == Status::Success {
            self.stats.succeeded(module, op, 1, len as u64);
        } else {
            self.stats.finished(module, op, c.status, len);
        }
        let q = &mut inner.queues[queue as usize];
        q.records.push((tag, c));
        q.in_flight += 1;
        self.outstanding.set(self.outstanding.get() + 1);
        Ok(())
    }
}

/// Records a new queue holds before it grows.
const QUEUE_PREALLOC: usize = 1024;

/// A submitter's completion queue on its thread's [`AccelChannel`]
/// ([`AccelChannel::queue`]): tasks submitted through it (alone, or in a
/// [`Batch`]) end as `(tag, completion)` records that only
/// [`Queue::reap`] hands back, in bulk. Dropping the queue forgets its
/// unreaped records; tasks still in a module then finish unreported.
///
/// The submission calls are `unsafe`, with the contract given at
/// [`Batch`].
pub struct Queue {
    ch: Rc<AccelChannel>,
    id: u16,
}

impl Queue {
    /// The channel the queue submits to (its modules, limits and pool).
    pub fn channel(&self) -> &Rc<AccelChannel> {
        &self.ch
    }

    /// An empty batch whose tasks complete on this queue.
    pub fn batch(&self) -> Batch<'_> {
        let mut inner = self.ch.inner.borrow_mut();
        let ids = inner
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BATCH_PREALLOC));
        let staged = inner.spare_staged.pop().unwrap_or_default();
        Batch {
            q: self,
            ids,
            staged,
            per_module: [0; MAX_MODULES],
        }
    }

    /// Polls the channel's modules, then moves every record of this queue
    /// to the end of `out` (when `out` is empty the two lists swap, so
    /// reuse one `out` and clear it after each reap). Returns how many.
    /// The tasks are then complete: their buffers are the caller's again.
    #[inline]
    pub fn reap(&self, out: &mut Vec<Reaped>) -> usize {
        self.ch.reap(self.id, out)
    }

    /// Tasks submitted through this queue (alone, or in batches that were
    /// submitted) and not yet reaped.
    pub fn in_flight(&self) -> usize {
        self.ch.inner.borrow().queues[self.id as usize].in_flight
    }

    #[inline]
    fn single(
        &self,
        op: Opcode,
        len: usize,
        tag: u64,
        fill: impl FnOnce(&mut Task),
    ) -> Result<(), AccelError> {
        self.ch.single(self.id, op, len, tag, fill)
    }

    submissions!(single, "Submits (as a batch of one)");
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.ch.close(self.id);
    }
}

/// Task ids a new batch list holds before it grows (lists are reused, so
/// a steady state allocates nothing).
const BATCH_PREALLOC: usize = 1024;

/// Most modules one batch can address (offload engines plus software).
const MAX_MODULES: usize = 8;

/// Why a request is refused; made into a message only when it is.
enum Refusal {
    Zero,
    Null,
    Overlap,
    Unaligned,
    EmptyVector,
    VectorTotal { total: usize, len: usize },
    TooLong { len: usize, max: usize },
}

impl Refusal {
    fn describe(&self, module: &str) -> String {
        match self {
            Refusal::Zero => "zero length".into(),
            Refusal::Null => "null buffer".into(),
            Refusal::Overlap => "source and destination overlap".into(),
            Refusal::Unaligned => {
                format!("destinations must be {DUALCAST_ALIGN}-byte aligned")
            }
            Refusal::EmptyVector => "a source vector is null or empty".into(),
            Refusal::VectorTotal { total, len } => {
                format!("source vectors hold {total} bytes, not the {len} asked")
            }
            Refusal::TooLong { len, max } => {
                format!("length {len} is above the {max}-byte limit of module {module}")
            }
        }
    }
}

/// Checks what the framework can check before any module sees a task.
#[inline(always)]
fn validate(t: &Task, max_len: usize) -> Result<(), Refusal> {
    if t.len == 0 {
        return Err(Refusal::Zero);
    }
    if t.len > max_len {
        return Err(Refusal::TooLong {
            len: t.len,
            max: max_len,
        });
    }
    let overlaps = |a: usize, alen: usize, b: usize, blen: usize| a < b + blen && b < a + alen;
    match t.op {
        Opcode::Copy => {
            if t.dst.is_null() || t.src.is_null() {
                return Err(Refusal::Null);
            }
            if overlaps(t.dst as usize, t.len, t.src as usize, t.len) {
                return Err(Refusal::Overlap);
            }
        }
        Opcode::Fill => {
            if t.dst.is_null() {
                return Err(Refusal::Null);
            }
        }
        Opcode::Compare => {
            if t.src.is_null() || t.src2.is_null() {
                return Err(Refusal::Null);
            }
        }
        Opcode::Dualcast => {
            if t.dst.is_null() || t.dst2.is_null() || t.src.is_null() {
                return Err(Refusal::Null);
            }
            if !(t.dst as usize).is_multiple_of(DUALCAST_ALIGN)
                || !(t.dst2 as usize).is_multiple_of(DUALCAST_ALIGN)
            {
                return Err(Refusal::Unaligned);
            }
            let (d1, d2, s, n) = (t.dst as usize, t.dst2 as usize, t.src as usize, t.len);
            if overlaps(d1, n, d2, n) || overlaps(d1, n, s, n) || overlaps(d2, n, s, n) {
                return Err(Refusal::Overlap);
            }
        }
        Opcode::Crc32c | Opcode::CopyCrc32c => {
            let copy = t.op == Opcode::CopyCrc32c;
            if copy && t.dst.is_null() {
                return Err(Refusal::Null);
            }
            let mut total = 0usize;
            for v in t.sources().iter() {
                if v.base.is_null() || v.len == 0 {
                    return Err(Refusal::EmptyVector);
                }
                total += v.len;
                if copy && overlaps(t.dst as usize, t.len, v.base as usize, v.len) {
                    return Err(Refusal::Overlap);
                }
            }
            if total != t.len {
                return Err(Refusal::VectorTotal { total, len: t.len });
            }
        }
    }
    Ok(())
}

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
    /// Pool tasks, for modules that finish later.
    ids: Vec<TaskId>,
    /// Tasks for modules that finish at submission.
    staged: Staged,
    per_module: [u32; MAX_MODULES],
}

impl Batch<'_> {
    /// Tasks in the batch.
    pub fn len(&self) -> usize {
        self.ids.len() + self.staged.len
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
        let ch = &*self.q.ch;
        let module = ch.route[op.index()];
        let max = ch.max_batch[module];
        if self.per_module[module] as usize >= max {
            return Err(AccelError::BatchFull {
                module: ch.modules[module].name(),
                max,
            });
        }
        if !ch.at_submit[module] {
            let mut inner = ch.inner.borrow_mut();
            let (id, module) = ch.prepare(&mut inner, self.q.id, op, len, tag, fill)?;
            self.per_module[module] += 1;
            self.ids.push(id);
            return Ok(());
        }
        // Staged: no pool task, and nothing of the channel's but the count
        // of tasks taken (the queue counts them when they are submitted).
        ch.has_room()?;
        let st = &mut self.staged;
        if st.len == st.tasks.len() {
            st.tasks.push(Task::empty());
        }
        let t = &mut st.tasks[st.len];
        t.set(op, len);
        fill(t);
        if let Err(reason) = validate(t, ch.max_len[op.index()]) {
            return Err(ch.refuse(op, module, reason));
        }
        st.len += 1;
        st.tags.push(tag);
        let n = &mut st.tally[op.index()];
        n.0 += 1;
        n.1 += len as u64;
        ch.outstanding.set(ch.outstanding.get() + 1);
        self.per_module[module] += 1;
        Ok(())
    }

    submissions!(add, "Adds", mut);

    /// Hands the batch over: one submission per module it addresses.
    pub fn submit(mut self) {
        let ch = &*self.q.ch;
        let mut inner = ch.inner.borrow_mut();
        let inner = &mut *inner;
        let addressed = || self.per_module.iter().enumerate().filter(|(_, n)| **n > 0);
        let pooled = addressed().filter(|(m, _)| !ch.at_submit[*m]).count();
        let staged = addressed().filter(|(m, _)| ch.at_submit[*m]).count();
        inner.queues[self.q.id as usize].in_flight += self.ids.len() + self.staged.len;
        let mut part = inner
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BATCH_PREALLOC));
        for (m, _) in addressed() {
            part.clear();
            if ch.at_submit[m] {
                let st = &self.staged;
                let tasks = &st.tasks[..st.len];
                if staged == 1 {
                    part.extend(0..st.len as TaskId);
                } else {
                    part.extend(
                        (0..st.len as TaskId)
                            .filter(|&i| ch.route[tasks[i as usize].op.index()] == m),
                    );
                }
                ch.hand_off_staged(inner, m, self.q.id, st, &part);
            } else if pooled == 1 {
                ch.hand_off(inner, m, &self.ids);
            } else {
                part.extend(
                    self.ids
                        .iter()
                        .copied()
                        .filter(|&id| inner.meta[id as usize].route as usize == m),
                );
                ch.hand_off(inner, m, &part);
            }
        }
        part.clear();
        inner.spare.push(part);
        self.ids.clear();
        self.staged.clear();
        self.per_module = [0; MAX_MODULES];
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        let ch = &*self.q.ch;
        if !self.ids.is_empty() {
            ch.release(&self.ids);
            self.ids.clear();
        }
        let mut inner = ch.inner.borrow_mut();
        let inner = &mut *inner;
        if self.staged.len > 0 {
            ch.outstanding.set(ch.outstanding.get() - self.staged.len);
            self.staged.clear();
        }
        let ids = std::mem::take(&mut self.ids);
        if ids.capacity() > 0 {
            inner.spare.push(ids);
        }
        inner.spare_staged.push(std::mem::take(&mut self.staged));
    }
}
