//! The target's limits a host sees: in-capsule data, the largest
//! transfer (MDTS, and MAXH2CDATA with it) and the queue size (MQES),
//! set by the daemon's flags and checked here.
//!
//! Thread: any (a plain value, copied into the target).

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
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            in_capsule: 8192,
            max_transfer: 128 << 10,
            queue_entries: 128,
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
        })
    }

    /// MDTS: the largest transfer as a power of two of 4 KiB pages.
    pub fn mdts(&self) -> u8 {
        (self.max_transfer / 4096).trailing_zeros() as u8
    }

    /// MAXH2CDATA.
    pub fn max_h2c_data(&self) -> u32 {
        self.max_transfer as u32
    }

    /// The largest PDU a host may send: a capsule with its data, or an
    /// H2CData of a whole transfer, with digests.
    pub fn max_pdu(&self) -> u32 {
        (super::pdu::CAPSULE_CMD_HLEN + 8 + self.in_capsule)
            .max(super::pdu::DATA_HLEN + 8 + self.max_transfer) as u32
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
