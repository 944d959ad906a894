//! [`HardwareChannel`]: what an offload module's driver channel (one
//! I/OAT channel, one DSA work queue) gives the framework through a
//! [`HardwarePool`](super::HardwarePool), and the words the module's notes
//! name it with.
//!
//! Thread: a channel is started on the thread that builds the engine, then
//! used by one reactor at a time (the one whose
//! [`PooledChannel`](super::PooledChannel) holds it); the pool moves it
//! between reactors, hence `Send`.

use std::sync::Arc;

use super::{Completion, Task, TaskId};

/// A started channel of an offload engine, as its module's pool hands it
/// to one reactor at a time.
pub trait HardwareChannel: Send + 'static {
    /// The driver counters of one channel, summed by the module.
    type Counters: Send + Sync + 'static;

    /// The module's name: the first word of its notes and messages.
    const MODULE: &'static str;
    /// What one channel is called in the notes: "channel", "work queue".
    const UNIT: &'static str;
    /// The note of a module without any usable channel.
    const NONE_USABLE: &'static str;
    /// What the reactors left without a channel run, and where, in the
    /// note that says which channels are ready: "copy and fill on
    /// software".
    const OTHERS_RUN: &'static str;
    /// What the note of a channel that failed to start says it could not
    /// do: "cannot start the channel".
    const START_FAILED: &'static str;

    /// Its device, for notes, messages and ListModules (a PCI address, a
    /// work queue's name).
    fn name(&self) -> &str;

    /// Its name and what its device offers, for the note that says which
    /// channels are ready.
    fn describe(&self) -> String;

    /// Its counters.
    fn counters(&self) -> &Arc<Self::Counters>;

    /// Takes `tasks`, named `first + k`, as
    /// [`ModuleChannel::submit`](super::ModuleChannel::submit) does, and
    /// holds those it does not put in `done` until a poll reports them.
    fn submit(&mut self, tasks: &[Task], first: TaskId, done: &mut Vec<(TaskId, Completion)>);

    /// Reports tasks that finished since the last poll; returns how many.
    fn poll(&mut self, done: &mut Vec<(TaskId, Completion)>) -> usize;

    /// Tasks it holds.
    fn in_flight(&self) -> usize;

    /// Whether it stopped working: it fails what it is given, never
    /// reports what it still held when it broke, and is not used again.
    fn broken(&self) -> bool;
}

/// `bytes` in the largest binary unit that divides it, for notes ("2 MiB").
pub fn human_bytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b.is_multiple_of(1 << 30) => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}
