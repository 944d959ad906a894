//! The poll loop and what lives on one reactor: pollers and local tasks.
//!
//! Thread: a reactor thread only. The state here sits in a thread-local and
//! is `!Send`; code running on the reactor (pollers, tasks, message jobs)
//! registers pollers and fds and spawns tasks through the free functions
//! below.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::os::fd::AsFd;
use std::panic::AssertUnwindSafe;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::Duration;

use super::fd_handler::FdHandler;
use super::fd_registration::FdRegistration;
use super::fds::Fds;
use super::interest::Interest;
use super::message::Message;
use super::panic::panic_message;
use super::poll::Poll;
use super::poll_mode::PollMode;
use super::poller::{Poller, PollerHandle};
use super::shared::Shared;
use crate::env::core_slot::SlotClaim;
use crate::env::tsc;

struct Local {
    shared: Arc<Shared>,
    /// Shared with the fd registrations made on this reactor.
    fds: Rc<Fds>,
    /// Pollers run each round. Taken out while they run, so a poller may
    /// register another; additions land in `added`.
    pollers: RefCell<Vec<Poller>>,
    added: RefCell<Vec<Poller>>,
    ready: RefCell<VecDeque<async_task::Runnable>>,
    /// The earliest [`wake_by`] deadline asked for this round (TSC ticks;
    /// `u64::MAX`: none). Reset at the start of every round.
    deadline: Cell<u64>,
}

thread_local! {
    static LOCAL: RefCell<Option<Rc<Local>>> = const { RefCell::new(None) };
}

fn with_local<R>(f: impl FnOnce(&Rc<Local>) -> R) -> Option<R> {
    // `try_with`: a waker may fire while the thread-local is torn down.
    LOCAL
        .try_with(|l| l.borrow().as_ref().map(f))
        .ok()
        .flatten()
}

/// The index of the reactor running the calling thread, if it is one.
pub fn current_core() -> Option<usize> {
    with_local(|l| l.shared.index)
}

/// Whether the calling reactor may sleep (adaptive mode): a source of
/// work that can signal an fd (an io_uring's eventfd) then registers it
/// to be woken; a busy reactor polls and needs no fd. False off a reactor.
pub fn may_sleep() -> bool {
    with_local(|l| matches!(l.shared.mode, PollMode::Adaptive { .. })).unwrap_or(false)
}

/// Registers a poller on the calling reactor: `f` runs once per round until
/// the handle drops. Panics off a reactor thread (a programming error: data
/// path code runs on reactors).
pub fn register_poller(name: &'static str, f: impl FnMut() -> Poll + 'static) -> PollerHandle {
    let (poller, handle) = Poller::new(name, f);
    with_local(|l| l.added.borrow_mut().push(poller))
        .expect("register_poller called off a reactor thread");
    handle
}

/// Registers `source` on the calling reactor: `handler` is told when it is
/// ready for `interest`. The registration keeps `source` open; the handler
/// is held weakly (it usually owns the registration).
pub fn register_fd(
    source: Rc<dyn AsFd>,
    interest: Interest,
    handler: Weak<dyn FdHandler>,
) -> std::io::Result<FdRegistration> {
    let fds = with_local(|l| l.fds.clone())
        .ok_or_else(|| std::io::Error::other("register_fd called off a reactor thread"))?;
    FdRegistration::new(fds, source, interest, handler)
}

/// Asks the calling reactor to be awake again by `at` (a [`tsc::now`]
/// timestamp): the next sleep ends by then. It holds for the current round
/// only, so a poller waiting for a time asks again every round until it is
/// reached (pollers run every round, so the poller itself then sees the
/// time has come). A no-op in busy mode, which never sleeps, and off a
/// reactor.
pub fn wake_by(at: u64) {
    with_local(|l| l.deadline.set(l.deadline.get().min(at)));
}

/// Spawns a `!Send` future on the calling reactor. Panics off a reactor.
pub fn spawn_local<F>(fut: F) -> async_task::Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let shared = with_local(|l| l.shared.clone()).expect("spawn_local called off a reactor thread");
    let schedule = move |runnable: async_task::Runnable| {
        // Woken on its own reactor: straight onto the local ready queue.
        // Woken elsewhere: a message to the owning reactor.
        let mut pending = Some(runnable);
        with_local(|l| {
            if Arc::ptr_eq(&l.shared, &shared) {
                l.ready.borrow_mut().extend(pending.take());
            }
        });
        if let Some(r) = pending {
            shared.post(Message::Wake(r));
        }
    };
    // A panic inside the task is logged here, then kept by async-task for
    // whoever awaits the task: the reactor itself goes on.
    let index = shared_index();
    let mut fut = Box::pin(fut);
    let logged = std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(p) => p,
            Err(panic) => {
                tracing::error!(reactor = index, "task panicked: {}", panic_message(&*panic));
                std::panic::resume_unwind(panic)
            }
        }
    });
    let (runnable, task) = async_task::Builder::new()
        .propagate_panic(true)
        .spawn_local(move |()| logged, schedule);
    runnable.schedule();
    task
}

fn shared_index() -> usize {
    with_local(|l| l.shared.index).unwrap_or(usize::MAX)
}

/// Lets the reactor run one round before the calling task continues.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

/// Most messages handled per round, so pollers keep running under a flood.
const MESSAGES_PER_ROUND: usize = 128;

/// Timer slack of adaptive reactors: how late a timed sleep may end.
const TIMER_SLACK_NS: u64 = 1_000;

/// In adaptive mode, how long busy rounds go without asking the fds.
const BUSY_FD_POLL_INTERVAL_NS: u64 = 20_000;

/// The reactor loop; returns when the group asks it to stop.
pub(super) fn run(shared: Arc<Shared>, slot: SlotClaim, fds: Fds) {
    let local = Rc::new(Local {
        shared: shared.clone(),
        fds: Rc::new(fds),
        pollers: RefCell::new(Vec::new()),
        added: RefCell::new(Vec::new()),
        ready: RefCell::new(VecDeque::new()),
        deadline: Cell::new(u64::MAX),
    });
    LOCAL.with(|l| *l.borrow_mut() = Some(local.clone()));
    let (idle_before_sleep, sleep_for) = match shared.mode {
        PollMode::Busy => (None, Duration::ZERO),
        PollMode::Adaptive {
            idle_before_sleep,
            sleep,
        } => (
            Some(tsc::ns_to_ticks(idle_before_sleep.as_nanos() as u64)),
            sleep,
        ),
    };
    if idle_before_sleep.is_some() {
        // Sleeps end at the time asked for (`wake_by`), not up to 50 µs
        // later (the default slack): a hold of 100 µs should not be 150.
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(TIMER_SLACK_NS));
    }
    let fd_poll_interval = tsc::ns_to_ticks(BUSY_FD_POLL_INTERVAL_NS);
    let counters = &shared.counters;
    let mut last = tsc::now();
    let mut last_busy = last;
    let mut last_fd_poll = last;
    while !shared.stop.load(Ordering::Acquire) {
        let mut busy = false;
        local.deadline.set(u64::MAX);

        let mut handled = 0;
        while handled < MESSAGES_PER_ROUND {
            let Some(msg) = shared.queue.pop() else { break };
            handled += 1;
            // Counted before it runs: whoever gets the job's reply sees it.
            counters.add_messages(1);
            msg.run(shared.index);
        }
        busy |= handled > 0;
        busy |= local.run_pollers();
        busy |= local.run_ready();

        // The fds are polled last, so that an idle round waits for them in
        // the same epoll_wait that asks whether they are ready: one system
        // call per idle round, not two.
        let now = tsc::now();
        let idle_long_enough = match idle_before_sleep {
            Some(threshold) => !busy && now - last_busy >= threshold,
            None => false,
        };
        let deadline = local.deadline.get();
        if idle_long_enough && deadline > now {
            counters.round(false, now - last);

            let timeout = if deadline == u64::MAX {
                sleep_for
            } else {
                sleep_for.min(Duration::from_nanos(tsc::ticks_to_ns(deadline - now)))
            };
            let woke_for_fd = sleep(&local, timeout);
            let woke = tsc::now();
            counters.slept(woke - now);
            last = woke;
            last_fd_poll = woke;
            if woke_for_fd {
                // The handlers ran inside the wait: that was work.
                last_busy = woke;
            }
            continue;
        }
        // A busy round asks the fds without waiting. In adaptive mode not
        // when they were asked less than BUSY_FD_POLL_INTERVAL_NS ago: the
        // rounds that follow a wake-up are busy finishing its work, and the
        // idle round after them asks again in the wait itself, so asking in
        // between would cost a system call per round for nothing.
        if local.fds.any()
            && (idle_before_sleep.is_none() || now - last_fd_poll >= fd_poll_interval)
        {
            busy |= local.fds.poll(Duration::ZERO, &shared.wake);
            last_fd_poll = now;
        }
        let now = tsc::now();
        counters.round(busy, now - last);
        last = now;
        if busy {
            last_busy = now;
        }
    }
    // Drop what is still registered while the thread-local is alive, each
    // list taken out first: a drop may register a poller in turn (a bdev
    // channel left with IO in flight hands its device channel to one),
    // which the next pass drops.
    loop {
        let pollers = std::mem::take(&mut *local.pollers.borrow_mut());
        let added = std::mem::take(&mut *local.added.borrow_mut());
        let ready = std::mem::take(&mut *local.ready.borrow_mut());
        if pollers.is_empty() && added.is_empty() && ready.is_empty() {
            break;
        }
        drop((pollers, added, ready));
    }
    LOCAL.with(|l| *l.borrow_mut() = None);
    drop(slot);
}

/// Sleeps in epoll_wait for up to `max`, unless a message is already
/// queued: a message (its sender writes the wake-up eventfd), a registered
/// fd becoming ready, or the timeout ends the sleep. Returns whether the
/// handlers of ready fds ran.
fn sleep(local: &Local, max: Duration) -> bool {
    let shared = &local.shared;
    shared.sleeping.store(true, Ordering::Relaxed);
    // Pairs with the fence in `Shared::post`.
    fence(Ordering::SeqCst);
    let ran = if shared.queue.is_empty() && !shared.stop.load(Ordering::Acquire) {
        shared.counters.sleeping();
        local.fds.poll(max, &shared.wake)
    } else {
        false
    };
    shared.sleeping.store(false, Ordering::Relaxed);
    ran
}

impl Local {
    fn run_pollers(&self) -> bool {
        let mut busy = false;
        let mut pollers = std::mem::take(&mut *self.pollers.borrow_mut());
        let mut dead = false;
        for p in pollers.iter_mut() {
            if !p.live.get() {
                dead = true;
                continue;
            }
            // A panicking poller is unregistered and logged; the reactor and
            // its other pollers go on.
            match std::panic::catch_unwind(AssertUnwindSafe(|| (p.f)())) {
                Ok(r) => busy |= r == Poll::Busy,
                Err(panic) => {
                    tracing::error!(
                        reactor = self.shared.index,
                        poller = p.name,
                        "poller panicked and was removed: {}",
                        panic_message(&*panic)
                    );
                    p.live.set(false);
                    dead = true;
                }
            }
        }
        if dead {
            pollers.retain(|p| p.live.get());
        }
        {
            let mut added = self.added.borrow_mut();
            if !added.is_empty() {
                pollers.append(&mut added);
            }
        }
        *self.pollers.borrow_mut() = pollers;
        busy
    }

    /// Runs the tasks that were ready when the round reached this point;
    /// tasks they wake run next round.
    fn run_ready(&self) -> bool {
        let n = self.ready.borrow().len();
        for _ in 0..n {
            let Some(r) = self.ready.borrow_mut().pop_front() else {
                break;
            };
            r.run();
        }
        n > 0
    }
}
