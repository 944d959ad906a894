//! Reactors: one pinned OS thread per selected core, each running a poll loop.
//!
//! Thread: [`Reactors`] is the group handle, used from any thread (the
//! control plane, a benchmark's main thread). Everything in [`local`] runs on
//! a reactor thread and touches only that reactor's state.
//!
//! Each round of the loop drains the reactor's incoming message queue
//! (lock-free: crossbeam's `SegQueue`), runs its registered pollers, then runs
//! the tasks that are ready. Cross-core work is always a message: "run this
//! closure on core N" ([`Reactors::run_on`]) or "spawn this future on core N"
//! ([`Reactors::spawn_on`]), each with a [`Reply`] that carries the result
//! back. That is the one door from the control plane into the data plane.
//!
//! Poll modes: [`PollMode::Busy`] spins (lowest latency, a full core), and
//! [`PollMode::Adaptive`] sleeps once the reactor has been idle for a while
//! and wakes at once when a message arrives (or after its sleep interval, to
//! run pollers again).

mod fds;
mod local;
mod stats;

pub use fds::{FdHandler, FdRegistration, Interest, Readiness, register_fd};
pub use local::{
    Poll, PollerHandle, current_core, register_poller, spawn_local, wake_by, yield_now,
};
pub use stats::ReactorStats;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::task::Context;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_queue::SegQueue;

use crate::env::affinity;
use crate::env::cores::CoreSet;
use stats::Counters;

/// How a reactor waits when it has nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PollMode {
    /// Spin without pause: the lowest latency, a whole core always busy.
    #[default]
    Busy,
    /// Spin while there is work; after `idle_before_sleep` without any, sleep
    /// up to `sleep` at a time, waking at once when a message arrives.
    Adaptive {
        /// Idle time before the reactor starts sleeping.
        idle_before_sleep: Duration,
        /// Longest single sleep; pollers run at least this often.
        sleep: Duration,
    },
}

impl PollMode {
    /// Adaptive mode with the default intervals: sleep as soon as a round
    /// finds nothing to do, at most 1 ms at a time. Spinning a while before
    /// sleeping buys wake-up latency with CPU; measured on NBD in
    /// docs/performance.md (`adaptive:MICROS` on the command line).
    pub const ADAPTIVE: PollMode = PollMode::Adaptive {
        idle_before_sleep: Duration::ZERO,
        sleep: Duration::from_millis(1),
    };

    /// `busy` or `adaptive`.
    pub fn name(&self) -> &'static str {
        match self {
            PollMode::Busy => "busy",
            PollMode::Adaptive { .. } => "adaptive",
        }
    }
}

impl std::str::FromStr for PollMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "busy" => Ok(PollMode::Busy),
            "adaptive" => Ok(PollMode::ADAPTIVE),
            other => {
                match other.strip_prefix("adaptive:") {
                    Some(us) => {
                        let us: u64 = us.parse().map_err(|_| {
                        format!("bad idle time in poll mode {other:?}: expected adaptive:MICROSECONDS")
                    })?;
                        Ok(PollMode::Adaptive {
                            idle_before_sleep: Duration::from_micros(us),
                            sleep: Duration::from_millis(1),
                        })
                    }
                    None => Err(format!(
                        "unknown poll mode {other:?}: expected busy, adaptive or adaptive:MICROSECONDS"
                    )),
                }
            }
        }
    }
}

/// Errors of the reactor group.
#[derive(Debug, thiserror::Error)]
pub enum ReactorError {
    /// A reactor thread could not be started.
    #[error("cannot start reactor on core {cpu}: {reason}")]
    Start {
        /// OS CPU id.
        cpu: u32,
        /// What failed.
        reason: String,
    },
    /// No reactor with that index.
    #[error("no reactor {index}: this engine runs {count} reactors")]
    NoSuchCore {
        /// Requested reactor index.
        index: usize,
        /// Reactors running.
        count: usize,
    },
    /// The reactor stopped, or the work panicked, before replying.
    #[error("reactor {0} dropped the request (stopped, or the work panicked)")]
    Canceled(usize),
}

type Job = Box<dyn FnOnce() + Send>;

enum Message {
    Run(Job),
    Wake(async_task::Runnable),
}

/// What a reactor shares with other threads.
struct Shared {
    index: usize,
    cpu: u32,
    mode: PollMode,
    queue: SegQueue<Message>,
    sleeping: AtomicBool,
    stop: AtomicBool,
    /// Written to wake the reactor from a sleep (it sleeps in epoll_wait).
    wake: std::os::fd::OwnedFd,
    /// The core slot the reactor holds (set before it reports ready).
    slot: OnceLock<u32>,
    counters: Counters,
}

impl Shared {
    fn post(&self, msg: Message) {
        self.queue.push(msg);
        // Pairs with the fence in `local::sleep`: either the reactor sees
        // the message before sleeping, or we see it asleep and wake it.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            // A full counter (never, in practice) is as good as a wake-up.
            let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
        }
    }
}

/// The group of reactors, one per selected core.
pub struct Reactors {
    shared: Vec<Arc<Shared>>,
    threads: Vec<JoinHandle<()>>,
}

impl Reactors {
    /// Starts one reactor per core of `cores`, each pinned to its core.
    /// Returns once every reactor runs its loop.
    pub fn start(cores: &CoreSet, mode: PollMode) -> Result<Reactors, ReactorError> {
        // Calibrate the clock here, once, rather than on a reactor's first
        // round after it has reported ready.
        crate::env::tsc::ticks_per_sec();
        let mut group = Reactors {
            shared: Vec::new(),
            threads: Vec::new(),
        };
        for (index, &cpu) in cores.cpus().iter().enumerate() {
            let wake = rustix::event::eventfd(
                0,
                rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
            )
            .map_err(|e| ReactorError::Start {
                cpu,
                reason: format!("eventfd: {e}"),
            })?;
            let shared = Arc::new(Shared {
                index,
                cpu,
                mode,
                queue: SegQueue::new(),
                sleeping: AtomicBool::new(false),
                stop: AtomicBool::new(false),
                wake,
                slot: OnceLock::new(),
                counters: Counters::default(),
            });
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let s = shared.clone();
            let thread = std::thread::Builder::new()
                .name(format!("reactor-{index}"))
                .spawn(move || {
                    let setup = affinity::pin_current_thread(cpu)
                        .map_err(|e| e.to_string())
                        .and_then(|()| crate::env::core_slot::claim().map_err(|e| e.to_string()))
                        .and_then(|slot| {
                            fds::Fds::new(&s.wake)
                                .map(|fds| (slot, fds))
                                .map_err(|e| format!("epoll: {e}"))
                        });
                    match setup {
                        Ok((slot, fds)) => {
                            let _ = s.slot.set(slot.slot());
                            let _ = ready_tx.send(Ok(()));
                            local::run(s, slot, fds);
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                })
                .map_err(|e| ReactorError::Start {
                    cpu,
                    reason: e.to_string(),
                })?;
            group.threads.push(thread);
            group.shared.push(shared);
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(reason)) => return Err(ReactorError::Start { cpu, reason }),
                Err(_) => {
                    return Err(ReactorError::Start {
                        cpu,
                        reason: "reactor thread exited during start".into(),
                    });
                }
            }
        }
        Ok(group)
    }

    /// Number of reactors.
    pub fn len(&self) -> usize {
        self.shared.len()
    }

    /// Whether the group is empty (never, once started).
    pub fn is_empty(&self) -> bool {
        self.shared.is_empty()
    }

    /// The reactor holding core slot `slot` (per-core counters are kept by
    /// slot), if one does.
    pub fn index_of_slot(&self, slot: u32) -> Option<usize> {
        self.shared.iter().position(|s| s.slot.get() == Some(&slot))
    }

    /// The OS CPU that reactor `index` is pinned to.
    pub fn cpu(&self, index: usize) -> Option<u32> {
        self.shared.get(index).map(|s| s.cpu)
    }

    fn reactor(&self, index: usize) -> Result<&Shared, ReactorError> {
        self.shared
            .get(index)
            .map(|s| &**s)
            .ok_or(ReactorError::NoSuchCore {
                index,
                count: self.shared.len(),
            })
    }

    /// Runs `f` on reactor `index`; the [`Reply`] carries its result back.
    pub fn run_on<R, F>(&self, index: usize, f: F) -> Reply<R>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        match self.reactor(index) {
            Ok(r) => {
                r.post(Message::Run(Box::new(move || {
                    let _ = tx.send(f());
                })));
                Reply::pending(rx, index)
            }
            Err(e) => Reply::failed(e),
        }
    }

    /// Builds a future on reactor `index` with `make` and runs it there as a
    /// task (it may be `!Send`); the [`Reply`] carries its output back.
    pub fn spawn_on<R, Fut, F>(&self, index: usize, make: F) -> Reply<R>
    where
        R: Send + 'static,
        Fut: Future<Output = R> + 'static,
        F: FnOnce() -> Fut + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        match self.reactor(index) {
            Ok(r) => {
                r.post(Message::Run(Box::new(move || {
                    let fut = make();
                    spawn_local(async move {
                        let _ = tx.send(fut.await);
                    })
                    .detach();
                })));
                Reply::pending(rx, index)
            }
            Err(e) => Reply::failed(e),
        }
    }

    /// A snapshot of every reactor's counters.
    pub fn stats(&self) -> Vec<ReactorStats> {
        self.shared
            .iter()
            .map(|s| s.counters.snapshot(s.index, s.cpu, s.mode))
            .collect()
    }

    /// Stops every reactor and waits for its thread to exit. Work still
    /// queued is dropped; callers drain their workloads first.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        for s in &self.shared {
            s.stop.store(true, Ordering::Release);
            s.post(Message::Run(Box::new(|| {})));
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Reactors {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The result of work sent to a reactor: await it, or [`Reply::wait`] for it.
pub struct Reply<R> {
    state: Result<tokio::sync::oneshot::Receiver<R>, Option<ReactorError>>,
    index: usize,
}

impl<R> Reply<R> {
    fn pending(rx: tokio::sync::oneshot::Receiver<R>, index: usize) -> Self {
        Reply {
            state: Ok(rx),
            index,
        }
    }

    fn failed(e: ReactorError) -> Self {
        Reply {
            state: Err(Some(e)),
            index: usize::MAX,
        }
    }

    /// Blocks the calling thread until the result arrives. Not for use on a
    /// reactor thread (it would stall that reactor).
    pub fn wait(self) -> Result<R, ReactorError> {
        let index = self.index;
        match self.state {
            Ok(rx) => rx
                .blocking_recv()
                .map_err(|_| ReactorError::Canceled(index)),
            Err(e) => Err(e.unwrap_or(ReactorError::Canceled(index))),
        }
    }
}

impl<R> Future for Reply<R> {
    type Output = Result<R, ReactorError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> std::task::Poll<Self::Output> {
        let index = self.index;
        match &mut self.state {
            Ok(rx) => Pin::new(rx)
                .poll(cx)
                .map(|r| r.map_err(|_| ReactorError::Canceled(index))),
            Err(e) => {
                std::task::Poll::Ready(Err(e.take().unwrap_or(ReactorError::Canceled(index))))
            }
        }
    }
}

/// Runs a message's job, keeping a panic inside it from killing the reactor:
/// the panic is logged, the job's reply is dropped (the sender sees
/// [`ReactorError::Canceled`]), and the loop goes on.
fn run_job(index: usize, job: Job) {
    if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(job)) {
        tracing::error!(
            reactor = index,
            "work sent to the reactor panicked: {}",
            panic_message(&*panic)
        );
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests;
