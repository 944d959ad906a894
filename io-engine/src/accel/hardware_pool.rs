//! [`HardwarePool`]: the started channels of an offload module (I/OAT
//! channels, DSA work queues) and how they are shared out: one to each
//! reactor that asks while any is free. A reactor that finds none left
//! gets no channel of the module, and the framework runs its tasks on
//! software and records a note saying so
//! ([`Module::create_channel`](super::Module::create_channel)); a channel
//! comes back, drained, when the reactor's [`PooledChannel`] drops, for
//! the next reactor that asks. The pool also says what it holds: the
//! module's notes of which channels are ready (or that none is), its
//! implementation line, and every channel's counters.
//!
//! Thread: shared (`Arc`, `Send + Sync`). Built on the thread that starts
//! the engine; a reactor takes its channel in the module's
//! `create_channel` and gives it back from its own thread.

use std::fmt::Display;
use std::sync::{Arc, Mutex, PoisonError};

use super::{HardwareChannel, ModuleChannel, PooledChannel};

/// The channels of an offload module; those no reactor holds are free.
pub struct HardwarePool<T: HardwareChannel> {
    free: Arc<Mutex<Vec<T>>>,
    total: usize,
    names: Vec<String>,
    counters: Vec<Arc<T::Counters>>,
}

impl<T: HardwareChannel> HardwarePool<T> {
    /// Starts a channel with `start` on each of `hardware` (a name for the
    /// notes, and what to start); those that fail are left out, with a
    /// note in `notes` saying why.
    pub fn start_each<H, E: Display>(
        hardware: impl IntoIterator<Item = (String, H)>,
        mut start: impl FnMut(H) -> Result<T, E>,
        notes: &mut Vec<String>,
    ) -> Vec<T> {
        let mut channels = Vec::new();
        for (name, hw) in hardware {
            match start(hw) {
                Ok(ch) => channels.push(ch),
                Err(e) => notes.push(format!(
                    "{} {name}: {}: {e}; it is not used",
                    T::MODULE,
                    T::START_FAILED
                )),
            }
        }
        channels
    }

    /// The pool of `channels`, all free; `notes` gets the line that says
    /// which are ready (or that none is).
    pub fn new(channels: Vec<T>, notes: &mut Vec<String>) -> Arc<HardwarePool<T>> {
        let total = channels.len();
        if total == 0 {
            notes.push(T::NONE_USABLE.into());
        } else {
            let list: Vec<String> = channels.iter().map(T::describe).collect();
            notes.push(format!(
                "{}: {total} {}{} ready: {}; one per reactor while they last, the other \
                 reactors run {}",
                T::MODULE,
                T::UNIT,
                if total == 1 { "" } else { "s" },
                list.join(", "),
                T::OTHERS_RUN
            ));
        }
        Arc::new(HardwarePool {
            names: channels.iter().map(|c| c.name().to_owned()).collect(),
            counters: channels.iter().map(|c| c.counters().clone()).collect(),
            free: Arc::new(Mutex::new(channels)),
            total,
        })
    }

    /// Channels in the pool (held by reactors or free).
    pub fn total(&self) -> usize {
        self.total
    }

    /// Channels no reactor holds now.
    pub fn free(&self) -> usize {
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The counters of every channel (held or free).
    pub fn counters(&self) -> &[Arc<T::Counters>] {
        &self.counters
    }

    /// What runs the module's tasks, for
    /// [`Module::implementation`](super::Module::implementation): the
    /// channels' names, or "no channel".
    pub fn implementation(&self) -> String {
        match self.names.as_slice() {
            [] => format!("no {}", T::UNIT),
            names => names.join(", "),
        }
    }

    /// A free channel for the calling reactor, held until the returned
    /// module channel drops; `None` when every channel is held.
    pub fn take(&self) -> Option<Box<dyn ModuleChannel>> {
        let ch = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()?;
        Some(Box::new(PooledChannel::new(ch, self.free.clone())))
    }

    /// Logs the module's `notes`: what was found at info, problems at
    /// warn.
    pub fn log(&self, notes: &[String]) {
        for n in notes {
            if self.total > 0 && n.contains("ready") {
                tracing::info!("{n}");
            } else {
                tracing::warn!("{n}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The pool on its own, with lanes that need no device: hand-out, a
    //! reactor past the last lane on software with the framework's note,
    //! the drain and return on drop, reuse, and what is never given back.

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use super::HardwarePool;
    use crate::accel::{
        Accel, Completion, HardwareChannel, Module, ModuleChannel, Opcode, Submission, Task, TaskId,
    };

    /// What a lane counts.
    #[derive(Default)]
    struct LaneCounters {
        taken: AtomicU64,
        reported: AtomicU64,
    }

    /// A test channel: holds what it is given until a poll reports it (or
    /// for ever, `stalled`).
    struct Lane {
        name: String,
        held: Vec<TaskId>,
        stalled: bool,
        broken: bool,
        counters: Arc<LaneCounters>,
        dropped: Arc<AtomicBool>,
    }

    impl Drop for Lane {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::Relaxed);
        }
    }

    impl HardwareChannel for Lane {
        type Counters = LaneCounters;

        const MODULE: &'static str = "lanes";
        const UNIT: &'static str = "lane";
        const NONE_USABLE: &'static str =
            "lanes: no lane could be used; copy runs on the software module";
        const OTHERS_RUN: &'static str = "copy on software";
        const START_FAILED: &'static str = "cannot start the lane";

        fn name(&self) -> &str {
            &self.name
        }

        fn describe(&self) -> String {
            format!("{} (test)", self.name)
        }

        fn counters(&self) -> &Arc<LaneCounters> {
            &self.counters
        }

        fn submit(&mut self, tasks: &[Task], first: TaskId, _: &mut Vec<(TaskId, Completion)>) {
            self.held
                .extend((0..tasks.len() as TaskId).map(|k| first + k));
            self.counters
                .taken
                .fetch_add(tasks.len() as u64, Ordering::Relaxed);
        }

        fn poll(&mut self, done: &mut Vec<(TaskId, Completion)>) -> usize {
            if self.stalled {
                return 0;
            }
            let n = self.held.len();
            done.extend(self.held.drain(..).map(|id| (id, Completion::SUCCESS)));
            self.counters
                .reported
                .fetch_add(n as u64, Ordering::Relaxed);
            n
        }

        fn in_flight(&self) -> usize {
            self.held.len()
        }

        fn broken(&self) -> bool {
            self.broken
        }
    }

    /// A lane named `name`, and the flag its drop sets.
    fn lane(name: &str) -> (Lane, Arc<AtomicBool>) {
        let dropped = Arc::new(AtomicBool::new(false));
        let lane = Lane {
            name: name.into(),
            held: Vec::new(),
            stalled: false,
            broken: false,
            counters: Arc::default(),
            dropped: dropped.clone(),
        };
        (lane, dropped)
    }

    /// A pool of `lanes`.
    fn pool_of(lanes: Vec<Lane>) -> Arc<HardwarePool<Lane>> {
        HardwarePool::new(lanes, &mut Vec::new())
    }

    /// A pool of `n` plain lanes.
    fn pool(n: usize) -> Arc<HardwarePool<Lane>> {
        pool_of((0..n).map(|i| lane(&format!("l{i}")).0).collect())
    }

    /// An offload module of copy on a pool of lanes, as I/OAT and DSA are.
    struct Lanes(Arc<HardwarePool<Lane>>);

    impl Module for Lanes {
        fn name(&self) -> &'static str {
            "lanes"
        }
        fn supports(&self, op: Opcode) -> bool {
            op == Opcode::Copy
        }
        fn max_transfer(&self, _: Opcode) -> usize {
            1 << 20
        }
        fn max_batch(&self) -> usize {
            64
        }
        fn implementation(&self) -> String {
            self.0.implementation()
        }
        fn create_channel(&self) -> Option<Box<dyn ModuleChannel>> {
            self.0.take()
        }
    }

    #[test]
    fn each_accel_channel_takes_a_lane_and_past_the_last_runs_on_software_saying_so() {
        let pool = pool(2);
        let module: Arc<dyn Module> = Arc::new(Lanes(pool.clone()));
        // Three frameworks on one thread: three accel channels here, as
        // three reactors would each have one.
        let accels: Vec<Arc<Accel>> = (0..3)
            .map(|_| Accel::new(vec![module.clone()], &[]).unwrap())
            .collect();
        let a = accels[0].channel();
        assert_eq!(a.module_for(Opcode::Copy), "lanes");
        assert_eq!(pool.free(), 1);
        let b = accels[1].channel();
        assert_eq!(b.module_for(Opcode::Copy), "lanes");
        assert_eq!(pool.free(), 0);
        let c = accels[2].channel();
        assert_eq!(c.module_for(Opcode::Copy), "software", "no lane left");
        assert!(accels[0].notes().is_empty(), "{:?}", accels[0].notes());
        assert!(accels[1].notes().is_empty(), "{:?}", accels[1].notes());
        let notes = accels[2].notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains(
                "no channel left on the assigned module; copy (assigned to lanes) run on software"
            ),
            "{notes:?}"
        );
        // A dropped accel channel gives its lane back; the next channel
        // made takes it.
        drop(a);
        assert_eq!(pool.free(), 1);
        drop(c);
        let c = accels[2].channel();
        assert_eq!(c.module_for(Opcode::Copy), "lanes", "the lane given back");
        assert_eq!(pool.free(), 0);
        drop((b, c));
        assert_eq!(pool.free(), 2);
        assert_eq!(pool.total(), 2);
    }

    #[test]
    fn a_dropped_channel_is_drained_then_given_back_and_reused() {
        let pool = pool(1);
        let mut ch = pool.take().expect("one lane");
        assert!(pool.take().is_none(), "the only lane is held");
        let mut done = Vec::new();
        let tasks = [Task::empty(), Task::empty(), Task::empty()];
        assert_eq!(ch.submit(&tasks, 10, &mut done), Submission::Submitted);
        assert_eq!(ch.in_flight(), 3);
        assert!(!ch.stuck());
        drop(ch);
        let counters = pool.counters()[0].clone();
        assert_eq!(
            counters.reported.load(Ordering::Relaxed),
            3,
            "drained before it went back"
        );
        assert_eq!(pool.free(), 1);
        let mut ch = pool.take().expect("the lane is back");
        assert_eq!(ch.in_flight(), 0);
        assert_eq!(ch.submit(&tasks[..1], 0, &mut done), Submission::Submitted);
        assert_eq!(ch.poll(&mut done), 1);
        assert_eq!(done, vec![(0, Completion::SUCCESS)]);
        assert_eq!(counters.taken.load(Ordering::Relaxed), 4, "the same lane");
    }

    #[test]
    fn a_broken_lane_is_dropped_not_given_back() {
        let (mut broken, dropped) = lane("l0");
        broken.broken = true;
        let pool = pool_of(vec![broken]);
        drop(pool.take().expect("one lane"));
        assert_eq!(pool.free(), 0, "not used again");
        assert!(dropped.load(Ordering::Relaxed), "nothing held: freed");
    }

    #[test]
    fn a_lane_that_never_reports_what_it_holds_is_leaked_not_reused() {
        let (mut stuck, dropped) = lane("l0");
        (stuck.broken, stuck.stalled) = (true, true);
        let pool = pool_of(vec![stuck]);
        let mut ch = pool.take().expect("one lane");
        let two = [Task::empty(), Task::empty()];
        assert_eq!(ch.submit(&two, 0, &mut Vec::new()), Submission::Submitted);
        assert!(ch.stuck(), "broken, holding 2");
        // The drain gives up at once on a stuck channel; the lane is
        // forgotten whole, never freed nor given back.
        drop(ch);
        assert_eq!(pool.free(), 0);
        assert!(!dropped.load(Ordering::Relaxed), "leaked, not freed");
    }

    #[test]
    fn the_notes_say_which_lanes_failed_and_which_are_ready() {
        let mut notes = Vec::new();
        let started = HardwarePool::<Lane>::start_each(
            [
                ("l0".to_owned(), Ok(lane("l0").0)),
                ("l1".to_owned(), Err("no device")),
                ("l2".to_owned(), Ok(lane("l2").0)),
            ],
            |r| r,
            &mut notes,
        );
        let pool = HardwarePool::new(started, &mut notes);
        assert_eq!(
            notes,
            vec![
                "lanes l1: cannot start the lane: no device; it is not used".to_owned(),
                "lanes: 2 lanes ready: l0 (test), l2 (test); one per reactor while they last, \
                 the other reactors run copy on software"
                    .to_owned(),
            ]
        );
        assert_eq!((pool.total(), pool.free()), (2, 2));
        assert_eq!(pool.implementation(), "l0, l2");

        let mut notes = Vec::new();
        let one = HardwarePool::new(vec![lane("l0").0], &mut notes);
        assert_eq!(
            notes,
            vec![
                "lanes: 1 lane ready: l0 (test); one per reactor while they last, the other \
                 reactors run copy on software"
                    .to_owned()
            ]
        );
        assert_eq!(one.implementation(), "l0");

        let mut notes = Vec::new();
        let none = HardwarePool::<Lane>::new(Vec::new(), &mut notes);
        assert_eq!(notes, vec![Lane::NONE_USABLE.to_owned()]);
        assert_eq!(none.implementation(), "no lane");
        assert!(none.take().is_none());
    }
}
