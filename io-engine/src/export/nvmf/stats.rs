//! The NVMe/TCP target's counters: commands by queue type and opcode,
//! errors by status, bytes moved, PDU errors, connections refused. Sharded by reactor core, so
//! that queues on different cores never write the same cache line.
//!
//! Thread: any; written by the connections on their reactors (relaxed
//! atomics in their core's shard), summed by the metrics scrape.

use std::sync::atomic::{AtomicU64, Ordering};

use super::command::{admin, io};
use super::completion::Status;
use super::listener::Refusal;

/// The opcodes counted by name, per queue type; others count as "other".
const ADMIN_OPS: [(u8, &str); 8] = [
    (admin::GET_LOG_PAGE, "get_log_page"),
    (admin::IDENTIFY, "identify"),
    (admin::ABORT, "abort"),
    (admin::SET_FEATURES, "set_features"),
    (admin::GET_FEATURES, "get_features"),
    (admin::ASYNC_EVENT, "async_event"),
    (admin::KEEP_ALIVE, "keep_alive"),
    (admin::FABRICS, "fabrics"),
];
const IO_OPS: [(u8, &str); 8] = [
    (io::FLUSH, "flush"),
    (io::WRITE, "write"),
    (io::READ, "read"),
    (io::COMPARE, "compare"),
    (io::WRITE_ZEROES, "write_zeroes"),
    (io::DSM, "dataset_management"),
    (io::COPY, "copy"),
    (admin::FABRICS, "fabrics"),
];
/// Slots per queue type: the named opcodes and "other".
const OPS: usize = 9;

/// The statuses counted by name; others count as "other".
const STATUSES: [(Status, &str); 18] = [
    (Status::COMPARE_FAILURE, "compare_failure"),
    (Status::INVALID_OPCODE, "invalid_opcode"),
    (Status::INVALID_FIELD, "invalid_field"),
    (Status::DATA_TRANSFER_ERROR, "data_transfer_error"),
    (Status::INTERNAL_ERROR, "internal_error"),
    (Status::INVALID_NAMESPACE, "invalid_namespace"),
    (Status::COMMAND_SEQUENCE_ERROR, "command_sequence_error"),
    (Status::SGL_LENGTH_INVALID, "sgl_length_invalid"),
    (Status::SGL_TYPE_INVALID, "sgl_type_invalid"),
    (Status::LBA_OUT_OF_RANGE, "lba_out_of_range"),
    (Status::WRITE_PROTECTED, "write_protected"),
    (
        Status::TRANSIENT_TRANSPORT_ERROR,
        "transient_transport_error",
    ),
    (
        Status::COMMAND_SIZE_LIMIT_EXCEEDED,
        "command_size_limit_exceeded",
    ),
    (Status::INVALID_LOG_PAGE, "invalid_log_page"),
    (
        Status::CONNECT_INVALID_PARAMETERS,
        "connect_invalid_parameters",
    ),
    (Status::CONNECT_INVALID_HOST, "connect_invalid_host"),
    (Status::CONNECT_CONTROLLER_BUSY, "connect_controller_busy"),
    // A command before the queue authenticated (DH-HMAC-CHAP), refused.
    (Status::AUTH_REQUIRED, "auth_required"),
];

/// Shards: one per reactor core (cores beyond wrap around), and one more
/// for threads without a core.
const SHARDS: usize = 65;

#[repr(align(128))]
struct Shard {
    commands: [[AtomicU64; OPS]; 2],
    errors: [AtomicU64; STATUSES.len() + 1],
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    pdu_errors: AtomicU64,
    /// Connections refused: over a listener's connections, over its
    /// connections not connected yet.
    refused: [AtomicU64; 2],
}

impl Default for Shard {
    fn default() -> Self {
        Shard {
            commands: Default::default(),
            errors: Default::default(),
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            pdu_errors: AtomicU64::new(0),
            refused: Default::default(),
        }
    }
}

/// The counters.
pub struct NvmfCounters {
    shards: Box<[Shard]>,
}

impl Default for NvmfCounters {
    fn default() -> Self {
        NvmfCounters {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }
}

/// What a scrape reads: sums over the shards.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvmfStats {
    /// (queue type, opcode name, commands).
    pub commands: Vec<(&'static str, &'static str, u64)>,
    /// (status name, commands answered with it).
    pub errors: Vec<(&'static str, u64)>,
    /// Bytes sent to hosts (reads, and admin data).
    pub bytes_read: u64,
    /// Bytes written by hosts.
    pub bytes_written: u64,
    /// Connections ended by a malformed PDU.
    pub pdu_errors: u64,
    /// Connections refused at accept, by the limit they met: (reason,
    /// count), both reasons always listed.
    pub refused: [(&'static str, u64); 2],
}

fn bump(c: Option<&AtomicU64>, n: u64) {
    if let Some(c) = c {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

impl NvmfCounters {
    fn shard(&self) -> Option<&Shard> {
        let i = crate::reactor::current_core().map_or(SHARDS - 1, |c| c % (SHARDS - 1));
        self.shards.get(i)
    }

    /// Counts a command of `opcode` on an admin (`admin`) or I/O queue.
    pub(super) fn command(&self, admin_queue: bool, opcode: u8) {
        let (table, q) = if admin_queue {
            (&ADMIN_OPS[..], 0)
        } else {
            (&IO_OPS[..], 1)
        };
        let i = table
            .iter()
            .position(|&(op, _)| op == opcode)
            .unwrap_or(OPS - 1);
        bump(
            self.shard()
                .and_then(|s| s.commands.get(q))
                .and_then(|c| c.get(i)),
            1,
        );
    }

    /// Counts a command answered with `status` (not success).
    pub(super) fn error(&self, status: Status) {
        let i = STATUSES
            .iter()
            .position(|&(s, _)| s == status)
            .unwrap_or(STATUSES.len());
        bump(self.shard().and_then(|s| s.errors.get(i)), 1);
    }

    /// Counts data moved: `read` bytes to the host, `written` from it.
    pub(super) fn bytes(&self, read: u64, written: u64) {
        let s = self.shard();
        if read > 0 {
            bump(s.map(|s| &s.bytes_read), read);
        }
        if written > 0 {
            bump(s.map(|s| &s.bytes_written), written);
        }
    }

    /// Counts a connection ended by a malformed PDU.
    pub(super) fn pdu_error(&self) {
        bump(self.shard().map(|s| &s.pdu_errors), 1);
    }

    /// Counts a connection a listener refused.
    pub(super) fn refused(&self, why: Refusal) {
        let i = match why {
            Refusal::Connections(_) => 0,
            Refusal::Connecting(_) => 1,
        };
        bump(self.shard().and_then(|s| s.refused.get(i)), 1);
    }

    /// The sums.
    pub fn stats(&self) -> NvmfStats {
        let sum = |f: &dyn Fn(&Shard) -> Option<&AtomicU64>| -> u64 {
            self.shards
                .iter()
                .filter_map(|s| f(s).map(|c| c.load(Ordering::Relaxed)))
                .sum()
        };
        let mut out = NvmfStats::default();
        for (q, (name, table)) in [("admin", &ADMIN_OPS[..]), ("io", &IO_OPS[..])]
            .into_iter()
            .enumerate()
        {
            for i in 0..OPS {
                let op = table.get(i).map_or("other", |t| t.1);
                if i >= table.len() && i != OPS - 1 {
                    continue;
                }
                let n = sum(&|s| s.commands.get(q).and_then(|c| c.get(i)));
                if n > 0 {
                    out.commands.push((name, op, n));
                }
            }
        }
        for i in 0..=STATUSES.len() {
            let n = sum(&|s| s.errors.get(i));
            if n > 0 {
                out.errors
                    .push((STATUSES.get(i).map_or("other", |t| t.1), n));
            }
        }
        out.bytes_read = sum(&|s| Some(&s.bytes_read));
        out.bytes_written = sum(&|s| Some(&s.bytes_written));
        out.pdu_errors = sum(&|s| Some(&s.pdu_errors));
        out.refused = [
            ("connections", sum(&|s| s.refused.first())),
            ("connecting", sum(&|s| s.refused.get(1))),
        ];
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sum_over_shards_by_name() {
        let c = NvmfCounters::default();
        c.command(false, io::READ);
        c.command(false, io::READ);
        c.command(true, admin::IDENTIFY);
        c.command(false, 0x7E);
        c.error(Status::LBA_OUT_OF_RANGE);
        c.error(Status(0x0FE));
        c.bytes(4096, 512);
        c.pdu_error();
        c.refused(Refusal::Connecting(4));
        let s = c.stats();
        assert_eq!(s.refused, [("connections", 0), ("connecting", 1)]);
        assert_eq!(
            s.commands,
            [
                ("admin", "identify", 1),
                ("io", "read", 2),
                ("io", "other", 1)
            ]
        );
        assert_eq!(s.errors, [("lba_out_of_range", 1), ("other", 1)]);
        assert_eq!(
            (s.bytes_read, s.bytes_written, s.pdu_errors),
            (4096, 512, 1)
        );
    }
}
