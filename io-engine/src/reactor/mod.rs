//! Reactors: one pinned OS thread per selected core, each running a poll loop.
//!
//! Thread: [`Reactors`] is the group handle, used from any thread (the
//! control plane, a benchmark's main thread). Everything in `local.rs` runs
//! on a reactor thread and touches only that reactor's state.
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
//!
//! Files, lowest first: `poll_mode.rs`, `error.rs`, `panic.rs`, `poll.rs`,
//! `interest.rs`, `readiness.rs`, `fd_handler.rs` (plain types);
//! `message.rs` and `stats.rs`; `shared.rs` (what other threads reach);
//! `fds.rs` (the epoll set) and `fd_registration.rs`; `poller.rs`;
//! `local.rs` (the poll loop and the reactor's own state); `reply.rs` and
//! `reactors.rs` (the group and its door).

mod error;
mod fd_handler;
mod fd_registration;
mod fds;
mod interest;
mod local;
mod message;
mod panic;
mod poll;
mod poll_mode;
mod poller;
mod reactors;
mod readiness;
mod reply;
mod shared;
mod stats;

#[cfg(test)]
mod tests;

pub use error::ReactorError;
pub use fd_handler::FdHandler;
pub use fd_registration::FdRegistration;
pub use interest::Interest;
pub use local::{
    current_core, may_sleep, register_fd, register_poller, spawn_local, wake_by, yield_now,
};
pub use poll::Poll;
pub use poll_mode::PollMode;
pub use poller::PollerHandle;
pub use reactors::Reactors;
pub use readiness::Readiness;
pub use reply::Reply;
pub use stats::ReactorStats;
