//! Accel counters: per channel, per module and opcode; summed when read.
//!
//! Thread: a channel's counters are written only by the channel's thread
//! (plain load+store, no locked instruction on the data path) and read by
//! any thread (the control plane, the metrics scrape).

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Opcode, bump};

#[derive(Default)]
pub(super) struct OpCounters {
    executed: AtomicU64,
    failed: AtomicU64,
    miscompares: AtomicU64,
    bytes: AtomicU64,
}

/// One channel's counters, indexed by module (registry order) and opcode.
pub(super) struct ChannelStats {
    /// Indexed by `module * Opcode::COUNT + opcode`.
    ops: Box<[OpCounters]>,
    batches: Box<[AtomicU64]>,
}

impl ChannelStats {
    pub(super) fn new(modules: usize) -> ChannelStats {
        ChannelStats {
            ops: (0..modules * Opcode::COUNT)
                .map(|_| Default::default())
                .collect(),
            batches: (0..modules).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts a finished task (the failures and miscompares; successes in
    /// bulk through [`ChannelStats::succeeded`]).
    #[inline]
    pub(super) fn finished(&self, module: usize, op: Opcode, status: super::Status, bytes: usize) {
        let c = &self.ops[module * Opcode::COUNT + op.index()];
        match status {
            super::Status::Success => {
                bump(&c.executed, 1);
                bump(&c.bytes, bytes as u64);
            }
            super::Status::Miscompare => {
                bump(&c.executed, 1);
                bump(&c.miscompares, 1);
            }
            super::Status::InvalidArgument | super::Status::EngineError => bump(&c.failed, 1),
        }
    }

    /// Counts `count` successful tasks of `bytes` in all.
    #[inline]
    pub(super) fn succeeded(&self, module: usize, op: Opcode, count: u64, bytes: u64) {
        let c = &self.ops[module * Opcode::COUNT + op.index()];
        bump(&c.executed, count);
        bump(&c.bytes, bytes);
    }

    /// Counts one hand-off to a module.
    #[inline]
    pub(super) fn batch(&self, module: usize) {
        bump(&self.batches[module], 1);
    }
}

/// Totals of one (opcode, module) pair.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OpStats {
    /// The opcode.
    pub opcode: Opcode,
    /// The module that ran it.
    pub module: &'static str,
    /// Tasks executed (successes and miscompares).
    pub executed: u64,
    /// Tasks that failed (engine error, invalid argument found by the
    /// engine); requests refused at submission are not tasks.
    pub failed: u64,
    /// Compares that found a difference (also counted as executed).
    pub miscompares: u64,
    /// Bytes of the successful tasks.
    pub bytes: u64,
}

/// Totals of one module.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModuleStats {
    /// The module.
    pub module: &'static str,
    /// Submissions (hand-offs) to it: one per batch, or per single task.
    pub batches: u64,
}

/// Sums `channels` into per (opcode, module) and per module totals.
pub(super) fn sum(
    names: &[&'static str],
    channels: &[std::sync::Arc<ChannelStats>],
) -> (Vec<OpStats>, Vec<ModuleStats>) {
    let mut ops = Vec::new();
    let mut mods = Vec::new();
    for (m, &module) in names.iter().enumerate() {
        for op in Opcode::ALL {
            let mut s = OpStats {
                opcode: op,
                module,
                executed: 0,
                failed: 0,
                miscompares: 0,
                bytes: 0,
            };
            for ch in channels {
                let c = &ch.ops[m * Opcode::COUNT + op.index()];
                s.executed += c.executed.load(Ordering::Relaxed);
                s.failed += c.failed.load(Ordering::Relaxed);
                s.miscompares += c.miscompares.load(Ordering::Relaxed);
                s.bytes += c.bytes.load(Ordering::Relaxed);
            }
            ops.push(s);
        }
        mods.push(ModuleStats {
            module,
            batches: channels
                .iter()
                .map(|c| c.batches[m].load(Ordering::Relaxed))
                .sum(),
        });
    }
    (ops, mods)
}
