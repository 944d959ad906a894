//! One reading of every counter the engine keeps: what the stats service
//! answers and what a Prometheus scrape reports, gathered in one place so
//! that both see the same numbers the same way.
//!
//! Thread: whichever thread asks (a control-plane worker for the stats
//! service, a blocking-pool thread for a scrape); never a reactor, and no
//! reactor is sent any work. A snapshot only reads: relaxed loads of the
//! data path's per-core counters (summed here), plus the device registry's
//! control-path lock, taken briefly once for the list and once per device;
//! and the cgroup memory limit, read from its files.
//!
//! A snapshot is consistent per counter, not across counters. A part whose
//! reading panics (a poisoned or odd engine state) is logged and left out
//! (`None`), so a caller can tell "nothing there" from "could not read".

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use super::{BUILD, BuildInfo, DeviceSnapshot, Engine, NvmfSnapshot};
use crate::accel::{ModuleStats, OpStats};
use crate::export::Protocol;
use crate::export::nbd::stats::{ExportStats, NbdServerStats};
use crate::pool::PoolStats;
use crate::reactor::ReactorStats;

/// The engine's counters at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// This build.
    pub build: BuildInfo,
    /// Time since the engine started; `None` without an engine.
    pub uptime: Option<Duration>,
    /// Devices, by name.
    pub devices: Option<Vec<DeviceSnapshot>>,
    /// Reactors, by index.
    pub reactors: Option<Vec<ReactorStats>>,
    /// Object pools (today the shared IO pool).
    pub pools: Option<Vec<PoolStats>>,
    /// Which reactor holds each core slot seen in `pools`: per-core pool
    /// counters are kept by slot and reported by reactor index.
    pub slot_cores: Vec<(u32, usize)>,
    /// NBD counters per export, every share with its entry.
    pub exports: Option<Vec<ExportStats>>,
    /// The NBD server's own: connections in the handshake, sessions,
    /// refusals.
    pub nbd: Option<NbdServerStats>,
    /// The NVMe/TCP target.
    pub nvmf: Option<NvmfSnapshot>,
    /// Accel counters per (opcode, module) and per module.
    pub accel: Option<(Vec<OpStats>, Vec<ModuleStats>)>,
    /// Each accel module's engine counters: (module, event, count).
    pub accel_engine: Option<Vec<(&'static str, &'static str, u64)>>,
    /// The cgroup CPU quota the reactors were sized by, in CPUs; `None`
    /// without one.
    pub cpu_quota: Option<f64>,
    /// The cgroup memory limit, bytes, read now; `None` when unlimited.
    pub memory_limit: Option<u64>,
}

impl Engine {
    /// Every counter the engine keeps, read now (see [`Snapshot`]).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::take(self)
    }
}

impl Snapshot {
    /// Reads `engine`'s counters now.
    fn take(engine: &Engine) -> Snapshot {
        let registry = engine.registry();
        let devices = guarded("device list", || registry.list()).map(|list| {
            list.into_iter()
                .filter_map(|info| {
                    // `None`: destroyed since the list; it goes with it.
                    let stats = guarded("device counters", || registry.io_stats(&info.name))??;
                    Some(DeviceSnapshot { info, stats })
                })
                .collect()
        });
        let pools = guarded("IO pool counters", || vec![registry.io_pool_stats()]);
        let slot_cores = pools
            .iter()
            .flatten()
            .flat_map(|p| p.per_core.iter().filter_map(|c| c.slot))
            .filter_map(|s| Some((s, engine.reactors().index_of_slot(s)?)))
            .collect();
        Snapshot {
            build: BUILD,
            uptime: Some(engine.uptime()),
            devices,
            reactors: guarded("reactor counters", || engine.reactors().stats()),
            pools,
            slot_cores,
            exports: guarded("NBD counters", || {
                engine
                    .exports()
                    .list()
                    .into_iter()
                    .filter(|s| s.protocol == Protocol::Nbd)
                    .map(|s| {
                        engine
                            .nbd_counters()
                            .export(&s.name)
                            .snapshot(&s.name, s.connections as u64)
                    })
                    .collect()
            }),
            nbd: guarded("NBD server counters", || {
                engine.nbd_counters().server_stats()
            }),
            nvmf: guarded("NVMe/TCP counters", || {
                let target = engine.nvmf();
                let controllers = target.controllers.all();
                NvmfSnapshot {
                    connections: target.connections(),
                    exports: engine
                        .exports()
                        .list()
                        .into_iter()
                        .filter(|s| s.protocol == Protocol::Nvmf)
                        .map(|s| {
                            let n = controllers
                                .iter()
                                .filter(|c| c.export.as_deref() == Some(s.name.as_str()))
                                .count();
                            (s.name, s.connections, n)
                        })
                        .collect(),
                    stats: target.counters.stats(),
                }
            }),
            accel: guarded("accel counters", || engine.accel().stats()),
            accel_engine: guarded("accel engine counters", || {
                engine
                    .accel()
                    .engine_counters()
                    .into_iter()
                    .flat_map(|(m, c)| c.into_iter().map(move |(event, n)| (m, event, n)))
                    .collect()
            }),
            cpu_quota: engine.config().core_sizing.quota.map(|q| q.cpus()),
            memory_limit: crate::env::memory_limit::memory_limit(),
        }
    }

    /// What is known without an engine (it has stopped): the build.
    pub fn without_engine() -> Snapshot {
        Snapshot {
            build: BUILD,
            uptime: None,
            devices: None,
            reactors: None,
            pools: None,
            slot_cores: Vec::new(),
            exports: None,
            nbd: None,
            nvmf: None,
            accel: None,
            accel_engine: None,
            cpu_quota: None,
            memory_limit: None,
        }
    }

    /// The reactor holding core slot `slot`, if one of this engine does.
    pub fn core_of_slot(&self, slot: u32) -> Option<usize> {
        self.slot_cores
            .iter()
            .find(|(s, _)| *s == slot)
            .map(|&(_, core)| core)
    }
}

/// Runs `f`, turning a panic into `None` (and an error log naming `what`).
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(_) => {
            tracing::error!(
                what,
                "reading the engine panicked; this reading leaves it out"
            );
            None
        }
    }
}
