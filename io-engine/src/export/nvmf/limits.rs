//! The target's limits a host sees: in-capsule data, the largest
//! transfer (MDTS, and MAXH2CDATA with it), the queue size (MQES) and the
//! queues one host may hold, set by the daemon's flags and checked here.
//!
//! Thread: any (a plain value, copied into the target).

use super::dh_budget::{DH_BURST, DH_RATE};
use super::pdu::PduLimits;

/// The limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Write data a command capsule may carry, in bytes.
    pub in_capsule: usize,
    /// The largest transfer of one command, in bytes: 4 KiB times a power
    /// of two (MDTS); one R2T asks for all of it (MAXH2CDATA).
    pub max_transfer: usize,
    /// Entries of a queue (MQES + 1).
    pub queue_entries: u16,
    /// Queues (admin and I/O) one host NQN may hold established at once,
    /// across the target (0: no limit).
    pub queues_per_host: usize,
    /// Diffie-Hellman computations per second for queues not
    /// authenticated yet (the target's [`DhBudget`](super::DhBudget)).
    pub dh_rate: u32,
    /// How many of those may run back to back.
    pub dh_burst: u32,
}

/// Queues one host may hold by default: 8 controllers of 64 I/O queues
/// and their admin queues.
pub const QUEUES_PER_HOST: usize = 520;

/// In-capsule data an admin queue (and a queue before its Connect) takes:
/// the 8 KiB the NVMe/TCP transport has hosts use for admin and fabrics
/// commands, whatever the I/O queues' in-capsule size.
pub const ADMIN_IN_CAPSULE: usize = 8192;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            in_capsule: 8192,
            max_transfer: 128 << 10,
            queue_entries: 128,
            queues_per_host: QUEUES_PER_HOST,
            dh_rate: DH_RATE,
            dh_burst: DH_BURST,
        }
    }
}

impl Limits {
    /// Checked limits: in-capsule data a multiple of 16 up to 64 KiB (and at
    /// least 4 KiB: the admin queue's Connect data, 1 KiB, and a Copy's
    /// range list fit), the largest transfer 4 KiB times a power of two up
    /// to 8 MiB, queues of 2 to 1024 entries.
    pub fn new(
        in_capsule: usize,
        max_transfer: usize,
        queue_entries: u16,
    ) -> Result<Limits, String> {
        if !(4096..=65536).contains(&in_capsule) || !in_capsule.is_multiple_of(16) {
            return Err(format!(
                "in-capsule data {in_capsule}: a multiple of 16 from 4096 to 65536 bytes"
            ));
        }
        if !(4096..=8 << 20).contains(&max_transfer) || !max_transfer.is_power_of_two() {
            return Err(format!(
                "largest transfer {max_transfer}: 4 KiB times a power of two, at most 8 MiB"
            ));
        }
        if !(2..=1024).contains(&queue_entries) {
            return Err(format!("queue depth {queue_entries}: 2 to 1024 entries"));
        }
        Ok(Limits {
            in_capsule,
            max_transfer,
            queue_entries,
            queues_per_host: QUEUES_PER_HOST,
            dh_rate: DH_RATE,
            dh_burst: DH_BURST,
        })
    }

    /// The same limits with a budget of `rate` DH computations per second
    /// (at least 1), `burst` back to back, for queues not authenticated.
    pub fn with_dh_budget(self, rate: u32, burst: u32) -> Limits {
        Limits {
            dh_rate: rate.max(1),
            dh_burst: burst.max(1),
            ..self
        }
    }

    /// The same limits with at most `n` established queues per host NQN
    /// (0: no limit).
    pub fn with_queues_per_host(self, n: usize) -> Limits {
        Limits {
            queues_per_host: n,
            ..self
        }
    }

    /// MDTS: the largest transfer as a power of two of 4 KiB pages.
    pub fn mdts(&self) -> u8 {
        (self.max_transfer / 4096).trailing_zeros() as u8
    }

    /// MAXH2CDATA.
    pub fn max_h2c_data(&self) -> u32 {
        self.max_transfer as u32
    }

    /// The most data a host's PDUs carry on an I/O queue (`io`) or on an
    /// admin queue or a queue not connected yet.
    pub fn pdu_limits(&self, io: bool) -> PduLimits {
        PduLimits {
            capsule_data: if io {
                self.in_capsule
            } else {
                ADMIN_IN_CAPSULE
            },
            h2c_data: if io { self.max_transfer } else { 0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked_and_derived() {
        let d = Limits::default();
        assert_eq!((d.mdts(), d.max_h2c_data()), (5, 131072));
        assert_eq!(Limits::new(8192, 131072, 128), Ok(d));
        assert_eq!(Limits::new(16384, 1 << 20, 256).unwrap().mdts(), 8);
        assert!(Limits::new(100, 131072, 128).is_err());
        assert!(Limits::new(8192, 100_000, 128).is_err());
        assert!(Limits::new(8192, 16 << 20, 128).is_err());
        assert!(Limits::new(8192, 131072, 1).is_err());
        assert!(Limits::new(8192, 131072, 2000).is_err());
    }
}
