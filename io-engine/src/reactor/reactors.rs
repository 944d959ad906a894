//! [`Reactors`]: the group of reactors, one pinned thread per core, and
//! the door into them ([`Reactors::run_on`], [`Reactors::spawn_on`]).
//!
//! Thread: any; `Reactors` is `Send + Sync`. [`Reactors::start`] and
//! [`Reactors::stop`] run on a non-reactor thread (a binary's main thread,
//! a test).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use super::error::ReactorError;
use super::fds::Fds;
use super::local::{self, spawn_local};
use super::message::Message;
use super::poll_mode::PollMode;
use super::reply::Reply;
use super::shared::Shared;
use super::stats::ReactorStats;
use crate::env::affinity;
use crate::env::cores::CoreSet;

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
            let shared = Arc::new(Shared::new(index, cpu, mode, wake));
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let s = shared.clone();
            let thread = std::thread::Builder::new()
                .name(format!("reactor-{index}"))
                .spawn(move || {
                    let setup = affinity::pin_current_thread(cpu)
                        .map_err(|e| e.to_string())
                        .and_then(|()| crate::env::core_slot::claim().map_err(|e| e.to_string()))
                        .and_then(|slot| {
                            Fds::new(&s.wake)
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

    /// How many times each reactor has gone to sleep: waited for a
    /// message, an fd or its sleep interval instead of polling again. Only
    /// adaptive reactors sleep; a busy one stays at 0.
    pub fn sleeps(&self) -> Vec<u64> {
        self.shared.iter().map(|s| s.counters.sleeps()).collect()
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
