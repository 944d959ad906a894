//! The module registry: which modules exist, which one runs each opcode,
//! each thread's channel, and the counters of all channels.
//!
//! Thread: [`Accel`] is shared (`Arc`) and used from any thread; the
//! assignment is fixed at creation. [`Accel::channel`] hands the calling
//! thread its own channel, made on first use and cached in a thread-local.

use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::software::Software;
use super::stats::{self, ChannelStats};
use super::{
    AccelChannel, AccelError, Assignment, Module, ModuleChannel, ModuleInfo, ModuleStats, OpStats,
    Opcode,
};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's channel of each live `Accel`, by its id.
    static CHANNELS: RefCell<Vec<(u64, Weak<AccelChannel>)>> = const { RefCell::new(Vec::new()) };
}

/// The accel framework of one engine.
pub struct Accel {
    id: u64,
    modules: Vec<Arc<dyn Module>>,
    names: Vec<&'static str>,
    /// Module index per opcode.
    assign: [usize; Opcode::COUNT],
    software: usize,
    tasks_per_channel: usize,
    channels: Mutex<Vec<Arc<ChannelStats>>>,
    notes: Mutex<Vec<String>>,
}

/// Tasks in each channel's pool unless told otherwise.
pub const DEFAULT_TASKS_PER_CHANNEL: usize = 4096;

impl Accel {
    /// A framework with the `offload` modules (best first) and the software
    /// module after them. Every opcode goes to the first module that
    /// supports it, unless `overrides` says otherwise.
    pub fn new(
        offload: Vec<Arc<dyn Module>>,
        overrides: &[Assignment],
    ) -> Result<Arc<Accel>, AccelError> {
        Self::with_tasks(offload, overrides, DEFAULT_TASKS_PER_CHANNEL)
    }

    /// As [`Accel::new`], with `tasks` tasks in each channel's pool.
    pub fn with_tasks(
        offload: Vec<Arc<dyn Module>>,
        overrides: &[Assignment],
        tasks: usize,
    ) -> Result<Arc<Accel>, AccelError> {
        let mut modules = offload;
        modules.push(Arc::new(Software::new()));
        let software = modules.len() - 1;
        let names: Vec<&'static str> = modules.iter().map(|m| m.name()).collect();
        let mut assign = [software; Opcode::COUNT];
        for op in Opcode::ALL {
            assign[op.index()] = modules
                .iter()
                .position(|m| m.supports(op))
                .unwrap_or(software);
        }
        for a in overrides {
            let m = names
                .iter()
                .position(|&n| n == a.module)
                .ok_or_else(|| AccelError::UnknownModule(a.module.clone()))?;
            if !modules[m].supports(a.op) {
                return Err(AccelError::Unsupported {
                    module: a.module.clone(),
                    op: a.op,
                });
            }
            assign[a.op.index()] = m;
        }
        Ok(Arc::new(Accel {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            modules,
            names,
            assign,
            software,
            tasks_per_channel: tasks.max(1),
            channels: Mutex::new(Vec::new()),
            notes: Mutex::new(Vec::new()),
        }))
    }

    /// The software-only framework.
    pub fn software() -> Arc<Accel> {
        Accel::new(Vec::new(), &[]).expect("software supports every opcode")
    }

    /// The registered modules, best first (software last).
    pub fn modules(&self) -> Vec<ModuleInfo> {
        self.modules
            .iter()
            .map(|m| ModuleInfo {
                name: m.name(),
                opcodes: Opcode::ALL.into_iter().filter(|&o| m.supports(o)).collect(),
                max_batch: m.max_batch(),
                max_transfer: m.max_transfer(Opcode::Copy),
                implementation: m.implementation(),
            })
            .collect()
    }

    /// The module assigned to each opcode.
    pub fn assignments(&self) -> Vec<(Opcode, &'static str)> {
        Opcode::ALL
            .into_iter()
            .map(|o| (o, self.names[self.assign[o.index()]]))
            .collect()
    }

    /// The module assigned to `op`.
    pub fn assigned(&self, op: Opcode) -> &'static str {
        self.names[self.assign[op.index()]]
    }

    /// Threads whose tasks run on software although another module was
    /// assigned (it had no channel left for them), one line each.
    pub fn notes(&self) -> Vec<String> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// What the modules said when they were made (I/OAT: the channels
    /// found, the devices left out and why), one line each.
    pub fn module_notes(&self) -> Vec<String> {
        self.modules.iter().flat_map(|m| m.notes()).collect()
    }

    /// The engine-specific counters of module `name` (empty for an unknown
    /// module or one without any).
    pub fn module_counters(&self, name: &str) -> Vec<(&'static str, u64)> {
        self.modules
            .iter()
            .find(|m| m.name() == name)
            .map(|m| m.counters())
            .unwrap_or_default()
    }

    /// The engine-specific counters of every module that has any, by
    /// module name, best module first.
    pub fn engine_counters(&self) -> Vec<(&'static str, Vec<(&'static str, u64)>)> {
        self.modules
            .iter()
            .map(|m| (m.name(), m.counters()))
            .filter(|(_, c)| !c.is_empty())
            .collect()
    }

    /// Counters of every channel so far, per (opcode, module) and per
    /// module; pairs that never ran show zeroes.
    pub fn stats(&self) -> (Vec<OpStats>, Vec<ModuleStats>) {
        let chans = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        stats::sum(&self.names, &chans)
    }

    /// The calling thread's channel: made on first use (with one channel
    /// of each module an opcode is routed to) and shared by every user on
    /// this thread while any holds it.
    pub fn channel(self: &Arc<Self>) -> Rc<AccelChannel> {
        CHANNELS.with(|c| {
            let mut c = c.borrow_mut();
            c.retain(|(_, w)| w.strong_count() > 0);
            if let Some(ch) = c
                .iter()
                .find(|(id, _)| *id == self.id)
                .and_then(|(_, w)| w.upgrade())
            {
                return ch;
            }
            let ch = Rc::new(self.make_channel());
            c.push((self.id, Rc::downgrade(&ch)));
            ch
        })
    }

    fn make_channel(self: &Arc<Self>) -> AccelChannel {
        let mut module_channels: Vec<Option<Box<dyn ModuleChannel>>> =
            (0..self.modules.len()).map(|_| None).collect();
        let mut route = self.assign;
        let mut fell_back = Vec::new();
        for op in Opcode::ALL {
            let m = self.assign[op.index()];
            if module_channels[m].is_none() {
                module_channels[m] = self.modules[m].create_channel();
            }
            if module_channels[m].is_none() {
                route[op.index()] = self.software;
                fell_back.push((op, self.names[m]));
            }
        }
        if module_channels[self.software].is_none() && route.iter().any(|&m| m == self.software) {
            module_channels[self.software] = self.modules[self.software].create_channel();
        }
        if !fell_back.is_empty() {
            let who = match crate::reactor::current_core() {
                Some(core) => format!("reactor {core}"),
                None => format!("thread {:?}", std::thread::current().id()),
            };
            let ops: Vec<String> = fell_back
                .iter()
                .map(|(op, m)| format!("{op} (assigned to {m})"))
                .collect();
            let note = format!(
                "{who}: no channel left on the assigned module; {} run on software",
                ops.join(", ")
            );
            tracing::warn!("{note}");
            self.notes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(note);
        }
        let stats = Arc::new(ChannelStats::new(self.modules.len()));
        self.channels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(stats.clone());
        AccelChannel::new(
            self.modules.clone(),
            module_channels,
            route,
            stats,
            self.tasks_per_channel,
        )
    }
}
