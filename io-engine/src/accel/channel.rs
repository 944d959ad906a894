//! A thread's accel channel: its task pool, its channel to each module it
//! routes to, submission (single tasks and batches) and completion.
//!
//! Thread: the one that made it ([`Accel::channel`](super::Accel::channel));
//! `AccelChannel` is `!Send`. Every callback runs on it, from
//! [`AccelChannel::poll`], never from inside a submission.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use super::stats::ChannelStats;
use super::task::{Done, IoVec, Meta, Task, TaskId};
use super::{AccelError, Completion, Module, ModuleChannel, Opcode};

/// The six submission calls, written once for [`Batch`] (through `add`)
/// and for [`AccelChannel`] (through `single`, a batch of one).
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
            done: &Rc<dyn Done>,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Copy, len, tag, done, |t| {
                t.dst = dst;
                t.src = src;
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
            done: &Rc<dyn Done>,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Fill, len, tag, done, |t| {
                t.dst = dst;
                t.fill = byte;
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
            done: &Rc<dyn Done>,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Compare, len, tag, done, |t| {
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
            done: &Rc<dyn Done>,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Dualcast, len, tag, done, |t| {
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
            done: &Rc<dyn Done>,
        ) -> Result<(), AccelError> {
            let len = srcs.iter().map(|v| v.len).sum();
            self.$via(Opcode::Crc32c, len, tag, done, |t| {
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
            done: &Rc<dyn Done>,
        ) -> Result<(), AccelError> {
            let len = srcs.iter().map(|v| v.len).sum();
            self.$via(Opcode::CopyCrc32c, len, tag, done, |t| {
                t.dst = dst;
                t.set_sources(srcs);
                t.seed = seed;
            })
        }
    };
}

/// Dualcast destinations must be aligned to this (SPDK's rule).
pub const DUALCAST_ALIGN: usize = 4096;

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
    inner: RefCell<Inner>,
}

struct Inner {
    tasks: Vec<Task>,
    meta: Vec<Meta>,
    free: Vec<TaskId>,
    chans: Vec<Option<Box<dyn ModuleChannel>>>,
    /// Finished tasks whose callbacks are due at the next poll.
    ready: Vec<(TaskId, Completion)>,
    /// `ready`'s other buffer, swapped in while a poll delivers.
    spare_ready: Vec<(TaskId, Completion)>,
    /// Spare task-id lists for batches.
    spare: Vec<Vec<TaskId>>,
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
        AccelChannel {
            modules,
            route,
            max_len,
            max_batch,
            stats,
            inner: RefCell::new(Inner {
                tasks: (0..tasks).map(|_| Task::empty()).collect(),
                meta: (0..tasks).map(|_| Meta::empty()).collect(),
                free: (0..tasks as TaskId).rev().collect(),
                chans,
                ready: Vec::with_capacity(tasks),
                spare_ready: Vec::with_capacity(tasks),
                spare: Vec::new(),
            }),
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

    /// Tasks submitted and not yet completed (callback not yet run).
    pub fn in_flight(&self) -> usize {
        let inner = self.inner.borrow();
        inner.tasks.len() - inner.free.len()
    }

    /// Tasks in this channel's pool.
    pub fn capacity(&self) -> usize {
        self.inner.borrow().tasks.len()
    }

    /// An empty batch.
    pub fn batch(&self) -> Batch<'_> {
        let ids = self
            .inner
            .borrow_mut()
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BATCH_PREALLOC));
        Batch {
            ch: self,
            ids,
            per_module: [0; MAX_MODULES],
        }
    }

    /// Polls every module with work and runs the callbacks of finished
    /// tasks. Returns how many completed.
    pub fn poll(&self) -> usize {
        let mut ready = {
            let mut inner = self.inner.borrow_mut();
            let inner = &mut *inner;
            for chan in inner.chans.iter_mut().flatten() {
                if chan.in_flight() > 0 {
                    chan.poll(&mut inner.ready);
                }
            }
            if inner.ready.is_empty() {
                return 0;
            }
            // Callbacks may submit (and software completes at once): they
            // fill the other list while this one is delivered.
            let spare = std::mem::take(&mut inner.spare_ready);
            std::mem::replace(&mut inner.ready, spare)
        };
        let n = ready.len();
        for (id, c) in ready.drain(..) {
            let (done, tag) = {
                let mut inner = self.inner.borrow_mut();
                let inner = &mut *inner;
                let m = &mut inner.meta[id as usize];
                self.stats.finished(m.route as usize, m.op, c.status, m.len);
                let d = (m.done.take(), m.tag);
                inner.free.push(id);
                d
            };
            if let Some(d) = done {
                d.done(tag, c);
            }
        }
        let mut inner = self.inner.borrow_mut();
        if inner.spare_ready.capacity() < ready.capacity() {
            inner.spare_ready = ready;
        }
        n
    }

    /// Takes a free task and fills it with `fill`, after validating it.
    ///
    /// # Safety
    ///
    /// See [`Batch`]: the buffers stay valid until the task completes.
    #[inline]
    fn prepare(
        &self,
        op: Opcode,
        len: usize,
        tag: u64,
        done: &Rc<dyn Done>,
        fill: impl FnOnce(&mut Task),
    ) -> Result<(TaskId, usize), AccelError> {
        let mut inner = self.inner.borrow_mut();
        let capacity = inner.tasks.len();
        let Some(&id) = inner.free.last() else {
            return Err(AccelError::NoTask { capacity });
        };
        let module = self.route[op.index()];
        let inner = &mut *inner;
        let t = &mut inner.tasks[id as usize];
        t.set(op, len);
        fill(t);
        if let Err(reason) = validate(t, self.max_len[op.index()]) {
            return Err(AccelError::Invalid {
                op,
                reason: reason.describe(self.modules[module].name()),
            });
        }
        inner.meta[id as usize] = Meta {
            done: Some(done.clone()),
            tag,
            len,
            route: module as u8,
            op,
        };
        inner.free.pop();
        Ok((id, module))
    }

    fn hand_off(&self, module: usize, ids: &[TaskId]) {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let chan = inner.chans[module]
            .as_mut()
            .expect("a routed module has a channel");
        chan.submit(&inner.tasks, ids, &mut inner.ready);
        self.stats.batch(module);
    }

    fn release(&self, ids: &[TaskId]) {
        let mut inner = self.inner.borrow_mut();
        for &id in ids {
            inner.meta[id as usize].done = None;
            inner.free.push(id);
        }
    }

    /// Submits one task at once (a batch of one).
    #[inline]
    fn single(
        &self,
        op: Opcode,
        len: usize,
        tag: u64,
        done: &Rc<dyn Done>,
        fill: impl FnOnce(&mut Task),
    ) -> Result<(), AccelError> {
        let (id, module) = self.prepare(op, len, tag, done, fill)?;
        self.hand_off(module, &[id]);
        Ok(())
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
#[inline]
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
/// hand-off (for I/OAT, one doorbell). Each task completes on its own, at
/// a later [`AccelChannel::poll`]. Dropping a batch without submitting it
/// returns its tasks unrun, and no callback runs.
///
/// # Safety of the operations
///
/// Every operation is an `unsafe fn` with one contract: each buffer it
/// names is valid for its length (readable sources; writable destinations
/// that nothing else reads or writes), and stays so, unmoved and
/// untouched by the caller, until the task's callback has run. For the
/// vectored sources, the `IoVec` array itself is part of the contract.
pub struct Batch<'a> {
    ch: &'a AccelChannel,
    ids: Vec<TaskId>,
    per_module: [u32; MAX_MODULES],
}

impl Batch<'_> {
    /// Tasks in the batch.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    #[inline]
    fn add(
        &mut self,
        op: Opcode,
        len: usize,
        tag: u64,
        done: &Rc<dyn Done>,
        fill: impl FnOnce(&mut Task),
    ) -> Result<(), AccelError> {
        let module = self.ch.route[op.index()];
        let max = self.ch.max_batch[module];
        if self.per_module[module] as usize >= max {
            return Err(AccelError::BatchFull {
                module: self.ch.modules[module].name(),
                max,
            });
        }
        let (id, module) = self.ch.prepare(op, len, tag, done, fill)?;
        self.per_module[module] += 1;
        self.ids.push(id);
        Ok(())
    }

    submissions!(add, "Adds", mut);

    /// Hands the batch over: one submission per module it addresses.
    pub fn submit(mut self) {
        let ids = std::mem::take(&mut self.ids);
        let mut modules = self
            .per_module
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(m, _)| m);
        match (modules.next(), modules.next()) {
            (None, _) => {}
            (Some(m), None) => self.ch.hand_off(m, &ids),
            (Some(_), Some(_)) => {
                let mut part = self
                    .ch
                    .inner
                    .borrow_mut()
                    .spare
                    .pop()
                    .unwrap_or_else(|| Vec::with_capacity(BATCH_PREALLOC));
                for (m, &n) in self.per_module.iter().enumerate() {
                    if n == 0 {
                        continue;
                    }
                    part.clear();
                    {
                        let inner = self.ch.inner.borrow();
                        part.extend(
                            ids.iter()
                                .copied()
                                .filter(|&id| inner.meta[id as usize].route as usize == m),
                        );
                    }
                    self.ch.hand_off(m, &part);
                }
                part.clear();
                self.ch.inner.borrow_mut().spare.push(part);
            }
        }
        let mut ids = ids;
        ids.clear();
        self.ch.inner.borrow_mut().spare.push(ids);
        self.per_module = [0; MAX_MODULES];
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if !self.ids.is_empty() {
            self.ch.release(&self.ids);
            self.ids.clear();
        }
        let ids = std::mem::take(&mut self.ids);
        if ids.capacity() > 0 {
            self.ch.inner.borrow_mut().spare.push(ids);
        }
    }
}

impl AccelChannel {
    submissions!(single, "Submits (as a batch of one)");
}
