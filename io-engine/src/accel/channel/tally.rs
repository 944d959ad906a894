//! Counting finished tasks: the one place a channel's filing counts what
//! its modules report.
//!
//! Thread: the channel's; a tally lives for one filing.

use crate::accel::stats::ChannelStats;
use crate::accel::{Opcode, Status, Task};

/// Counts the finished tasks of one module: failures and miscompares one
/// by one, successes in runs of one opcode (once per batch, for a batch of
/// one kind), kept in registers until the opcode changes or
/// [`Tally::flush`].
pub(super) struct Tally<'a> {
    stats: &'a ChannelStats,
    module: usize,
    op: Opcode,
    count: u64,
    bytes: u64,
}

impl<'a> Tally<'a> {
    /// A tally of `module`'s tasks, counted into `stats`.
    #[inline]
    pub(super) fn new(stats: &'a ChannelStats, module: usize) -> Tally<'a> {
        Tally {
            stats,
            module,
            op: Opcode::Copy,
            count: 0,
            bytes: 0,
        }
    }

    /// Counts task `t` of `module`, finished alone.
    #[inline(always)]
    pub(super) fn one(stats: &ChannelStats, module: usize, t: &Task, status: Status) {
        if status == Status::Success {
            stats.succeeded(module, t.op, 1, t.len as u64);
        } else {
            stats.finished(module, t.op, status, t.len);
        }
    }

    /// Counts one finished task of `op` and `len` bytes.
    #[inline(always)]
    pub(super) fn count(&mut self, op: Opcode, len: usize, status: Status) {
        if status != Status::Success {
            self.stats.finished(self.module, op, status, len);
            return;
        }
        if op != self.op {
            self.flush();
            self.op = op;
        }
        self.count += 1;
        self.bytes += len as u64;
    }

    /// Adds the run of successes to the channel's counters.
    #[inline]
    pub(super) fn flush(&mut self) {
        if self.count > 0 {
            self.stats
                .succeeded(self.module, self.op, self.count, self.bytes);
            self.count = 0;
            self.bytes = 0;
        }
    }
}
