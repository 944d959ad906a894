//! [`Ring`]: the one io_uring of a reactor, shared by every `uring`
//! channel on it. Channels queue submission entries; the ring's poller
//! submits them (one `io_uring_enter` a round for all of them) and hands
//! each completion to the channel that queued it (its id is in the upper
//! half of the entry's user data, the channel's slot in the lower).
//!
//! In adaptive mode the ring's eventfd is registered with the reactor, so
//! a completion wakes a sleeping reactor; in busy mode the poller finds
//! completions in the shared completion queue without a system call.
//!
//! Made on a reactor when its first `uring` channel opens, dropped when
//! its last one goes.
//!
//! Thread: one reactor; `!Send`.

use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::{Rc, Weak};
use std::sync::Arc;

use io_uring::{IoUring, squeue};

use super::backing_error::BackingError;
use super::fixed_buffers::RingBuffers;
use super::wake_fd::WakeFd;
use crate::reactor::{self, Poll, PollerHandle};

/// Submission queue entries of a ring (the completion queue has twice as
/// many): room for every IO a reactor's channels hold at their usual
/// depths; a channel that finds the queue full keeps its IO until the next
/// round.
const ENTRIES: u32 = 1024;

/// Registered file slots of a ring: one per `uring` channel on it.
const FILES: u32 = 4096;

/// Completions of one channel: (slot, result).
pub(super) type Completions = Rc<RefCell<Vec<(u32, i32)>>>;

/// A reactor's io_uring.
pub(super) struct Ring {
    uring: RefCell<IoUring>,
    /// Each channel's completions, by channel id.
    channels: RefCell<Vec<Option<Completions>>>,
    free_ids: RefCell<Vec<u32>>,
    /// The ring's fixed buffers (`None`: the kernel registers none).
    buffers: RefCell<Option<RingBuffers>>,
    /// The ring's registered files, by slot: in use or not (`None`: the
    /// kernel registers none). Each channel registers its backing's fd,
    /// sparing the kernel a file lookup and reference per IO.
    files: RefCell<Option<Vec<bool>>>,
    /// Entries pushed whose completion has not been reaped.
    in_flight: Cell<u64>,
    /// An IOPOLL ring: completions are found only by entering the kernel
    /// with GETEVENTS, every round while IO is in flight.
    polled: bool,
    /// The eventfd the kernel signals on completion (adaptive mode); also
    /// written by the blocking threads when they finish a job of a channel
    /// on this ring.
    wake: Option<WakeFd>,
    poller: RefCell<Option<PollerHandle>>,
}

/// Which of a reactor's rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RingKind {
    /// Completions by interrupt (every operation).
    Interrupt,
    /// `IORING_SETUP_IOPOLL`: reads and writes of block devices whose queue
    /// polls, completions found by polling the device (`iopoll=true`).
    Polled,
}

thread_local! {
    static RINGS: RefCell<[Weak<Ring>; 2]> = const { RefCell::new([Weak::new(), Weak::new()]) };
}

/// Lets the ring's kernel workers (io-wq: IO the kernel cannot start
/// without blocking, such as a write that must update a file's times) run
/// where the process's main thread may, which in the daemon is off the
/// reactors' CPUs, rather than on the reactor that made the ring.
fn confine_workers(uring: &IoUring) {
    let Ok(cpus) = crate::env::cores::allowed_cpus() else {
        return;
    };
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for cpu in cpus.iter() {
        // SAFETY: CPU_SET bounds-checks the index against the set's size
        // (an id past it is ignored); `set` is a valid cpu_set_t.
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    }
    if let Err(e) = uring.submitter().register_iowq_aff(&set) {
        tracing::debug!("uring: kernel workers keep the reactor's affinity: {e}");
    }
}

impl Ring {
    /// The calling reactor's ring of that kind, made if it has none.
    pub(super) fn current(kind: RingKind) -> Result<Rc<Ring>, BackingError> {
        let i = kind as usize;
        if let Some(ring) = RINGS.with(|r| r.borrow().get(i).and_then(Weak::upgrade)) {
            return Ok(ring);
        }
        let ring = Rc::new(Ring::new(kind)?);
        let weak = Rc::downgrade(&ring);
        *ring.poller.borrow_mut() = Some(reactor::register_poller("uring", move || {
            weak.upgrade().map_or(Poll::Idle, |r| r.poll())
        }));
        RINGS.with(|r| {
            if let Some(slot) = r.borrow_mut().get_mut(i) {
                *slot = Rc::downgrade(&ring);
            }
        });
        Ok(ring)
    }

    /// Checks that this process may make an io_uring (a device's create
    /// fails with the reason, rather than its IOs later).
    pub(super) fn probe(kind: RingKind) -> Result<(), BackingError> {
        Self::build(2, kind).map(drop)
    }

    fn build(entries: u32, kind: RingKind) -> Result<IoUring, BackingError> {
        let builder = |cooperative: bool| {
            let mut b = IoUring::builder();
            b.setup_cqsize(entries * 2);
            if kind == RingKind::Polled {
                b.setup_iopoll();
            }
            if cooperative {
                // Completions do not interrupt the reactor (no IPI to run
                // their task work while it spins in user space): the
                // kernel raises IORING_SQ_TASKRUN instead, and the
                // poller enters the kernel for them, once for all those
                // pending. Only the reactor submits (single issuer).
                // Measured (bdev-perf, 4 KiB randwrite QD32, one core,
                // Intel Xeon): 120k IOPS with, 99k without (fio's
                // io_uring engine: 103k).
                b.setup_coop_taskrun()
                    .setup_taskrun_flag()
                    .setup_single_issuer();
            }
            b.build(entries)
        };
        // A kernel before 6.0 refuses these flags: without them.
        builder(true)
            .or_else(|_| builder(false))
            .map_err(|source| BackingError::Unavailable {
                what: "io_uring",
                source,
                hint: if std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
                    .is_ok_and(|v| v.trim() != "0")
                {
                    " (io_uring is disabled by /proc/sys/kernel/io_uring_disabled; use aio://)"
                } else {
                    " (use aio:// where io_uring is not allowed)"
                },
            })
    }

    /// Whether the calling reactor has a ring of that kind now.
    #[cfg(test)]
    pub(super) fn exists(kind: RingKind) -> bool {
        RINGS.with(|r| {
            r.borrow()
                .get(kind as usize)
                .and_then(Weak::upgrade)
                .is_some()
        })
    }

    fn new(kind: RingKind) -> Result<Ring, BackingError> {
        let uring = Self::build(ENTRIES, kind)?;
        confine_workers(&uring);
        if kind == RingKind::Polled {
            // Polled completions signal nothing: the reactor polls them.
            return Ok(Ring::with(uring, None, kind));
        }
        let wake = WakeFd::new();
        if let Some(w) = &wake
            && let Err(e) = uring.submitter().register_eventfd(w.fd().as_raw_fd())
        {
            tracing::warn!("uring: eventfd not registered, completions polled: {e}");
            return Ok(Ring::with(uring, None, kind));
        }
        Ok(Ring::with(uring, wake, kind))
    }

    fn with(uring: IoUring, wake: Option<WakeFd>, kind: RingKind) -> Ring {
        let buffers = RingBuffers::new(&uring.submitter());
        let files = match uring.submitter().register_files_sparse(FILES) {
            Ok(()) => Some(vec![false; FILES as usize]),
            Err(e) => {
                tracing::info!("uring: no registered files ({e}); each IO looks its file up");
                None
            }
        };
        Ring {
            buffers: RefCell::new(buffers),
            files: RefCell::new(files),
            uring: RefCell::new(uring),
            channels: RefCell::new(Vec::new()),
            free_ids: RefCell::new(Vec::new()),
            in_flight: Cell::new(0),
            polled: kind == RingKind::Polled,
            wake,
            poller: RefCell::new(None),
        }
    }

    /// Whether a sleeping reactor is woken by this ring's completions.
    pub(super) fn wakes_reactor(&self) -> bool {
        self.wake.is_some()
    }

    /// The eventfd that wakes this ring's reactor, if it sleeps.
    pub(super) fn eventfd(&self) -> Option<Arc<OwnedFd>> {
        self.wake.as_ref().map(|w| w.fd().clone())
    }

    /// The fixed buffer slot of `len` bytes at `ptr`, if they lie in a
    /// registered region (the registration synced first if the table
    /// moved).
    #[inline]
    pub(super) fn buffer_index(&self, ptr: *const u8, len: usize) -> Option<u16> {
        let mut buffers = self.buffers.borrow_mut();
        let b = buffers.as_mut()?;
        if b.stale() {
            b.sync(&self.uring.borrow().submitter());
        }
        b.index_of(ptr, len)
    }

    /// Registers `fd` with the ring: its slot, for `types::Fixed`; `None`
    /// if the ring has no free slot (the channel then names its fd).
    pub(super) fn register_file(&self, fd: std::os::fd::RawFd) -> Option<u32> {
        let mut files = self.files.borrow_mut();
        let table = files.as_mut()?;
        let slot = table.iter().position(|used| !used)?;
        match self
            .uring
            .borrow()
            .submitter()
            .register_files_update(slot as u32, &[fd])
        {
            Ok(_) => {
                *table.get_mut(slot)? = true;
                Some(slot as u32)
            }
            Err(e) => {
                tracing::debug!("uring: file not registered: {e}");
                None
            }
        }
    }

    /// Unregisters the file in `slot` (its channel goes; no IO of it is in
    /// flight, and one that were would keep its own file reference).
    pub(super) fn unregister_file(&self, slot: u32) {
        let mut files = self.files.borrow_mut();
        if let Some(used) = files.as_mut().and_then(|t| t.get_mut(slot as usize)) {
            let _ = self
                .uring
                .borrow()
                .submitter()
                .register_files_update(slot, &[-1]);
            *used = false;
        }
    }

    /// Adds a channel: its id and the list its completions land in.
    pub(super) fn attach(&self) -> (u32, Completions) {
        let done: Completions = Rc::new(RefCell::new(Vec::with_capacity(256)));
        let mut channels = self.channels.borrow_mut();
        let id = match self.free_ids.borrow_mut().pop() {
            Some(id) => {
                if let Some(entry) = channels.get_mut(id as usize) {
                    *entry = Some(done.clone());
                }
                id
            }
            None => {
                channels.push(Some(done.clone()));
                (channels.len() - 1) as u32
            }
        };
        (id, done)
    }

    /// Removes channel `id`: completions still to come for it are dropped.
    pub(super) fn detach(&self, id: u32) {
        if let Some(entry) = self.channels.borrow_mut().get_mut(id as usize) {
            *entry = None;
            self.free_ids.borrow_mut().push(id);
        }
    }

    /// Queues `entry` for channel `id`'s `slot`. False if the submission
    /// queue is full even after submitting what it held.
    ///
    /// # Safety
    /// Every buffer `entry` names stays valid, and is not otherwise used,
    /// until its completion is reaped (or forever, if it never is).
    pub(super) unsafe fn push(&self, entry: squeue::Entry, id: u32, slot: u32) -> bool {
        let entry = entry.user_data(u64::from(id) << 32 | u64::from(slot));
        let mut uring = self.uring.borrow_mut();
        for _ in 0..2 {
            // SAFETY: the caller keeps the entry's buffers valid until its
            // completion (this function's contract).
            if unsafe { uring.submission().push(&entry) }.is_ok() {
                self.in_flight.set(self.in_flight.get() + 1);
                return true;
            }
            // Full: hand the kernel what is queued, then try once more.
            if let Err(e) = uring.submit() {
                tracing::warn!("uring: submit failed: {e}");
                return false;
            }
        }
        false
    }

    /// The ring's poller: submits what is queued and hands out completions.
    fn poll(&self) -> Poll {
        let mut busy = false;
        let mut uring = self.uring.borrow_mut();
        // Enter the kernel with entries to submit; with completions it
        // holds back (a completion queue that overflowed, task work to
        // run); and on a polled ring whenever IO is in flight, which is
        // how its completions are found.
        // What the kernel has not taken is read from the submission
        // queue itself, not counted here: a submission may take fewer
        // entries than it was given (the kernel short of requests), and
        // those left must go in at the next round, not wait for a new
        // entry to come (at the end of a burst, none would).
        let (unsubmitted, held_back) = {
            let sq = uring.submission();
            (sq.len(), sq.cq_overflow() || sq.taskrun())
        };
        let enter = unsubmitted > 0 || held_back || (self.polled && self.in_flight.get() > 0);
        if enter {
            match uring.submit() {
                Ok(_) => {}
                // EBUSY/EAGAIN: the completion queue is full; completions
                // are reaped below and the entries go in next round.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN)) => {}
                Err(e) => tracing::warn!("uring: submit failed: {e}"),
            }
            // Entries still unsubmitted keep the reactor polling.
            busy = unsubmitted > 0 || !uring.submission().is_empty();
        }
        let channels = self.channels.borrow();
        for cqe in uring.completion() {
            busy = true;
            self.in_flight.set(self.in_flight.get().saturating_sub(1));
            let (id, slot) = ((cqe.user_data() >> 32) as u32, cqe.user_data() as u32);
            if let Some(Some(done)) = channels.get(id as usize) {
                done.borrow_mut().push((slot, cqe.result()));
            }
        }
        // A polled ring with IO in flight keeps the reactor awake: nothing
        // else would tell it of the completions.
        if busy || (self.polled && self.in_flight.get() > 0) {
            Poll::Busy
        } else {
            Poll::Idle
        }
    }
}
