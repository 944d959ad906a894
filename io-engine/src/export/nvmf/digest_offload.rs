//! Where the NVMe/TCP target computes the data digests (CRC-32C) of large
//! data PDUs: on the accel engine crc32c is assigned to, when that engine
//! is an offload engine (DSA) on the connection's reactor, for PDUs of at
//! least `min` bytes (`--nvmf-digest-offload`). Smaller PDUs, and every
//! PDU on a reactor where crc32c runs on software, are computed inline by
//! the core's SIMD CRC-32C: a descriptor round trip costs about a
//! microsecond, the inline CRC about 95 ns per 4 KiB (docs/performance.md),
//! so only large PDUs free the core of more than they cost it.
//!
//! Thread: any (shared by the target's connections); the accel channel a
//! connection gets from it is its reactor's.

use std::rc::Rc;
use std::sync::Arc;

use crate::accel::{Accel, AccelChannel, Opcode};

/// The smallest PDU data whose digest is offloaded by default: 64 KiB,
/// whose inline CRC takes about 1.5 µs of the core.
pub const DIGEST_OFFLOAD_MIN: usize = 64 << 10;

/// The smallest value `--nvmf-digest-offload` takes: below a page the
/// round trip always costs more than the inline CRC.
pub const DIGEST_OFFLOAD_FLOOR: usize = 4096;

/// The offload of large PDUs' digests.
#[derive(Clone)]
pub struct DigestOffload {
    accel: Arc<Accel>,
    min: usize,
}

impl DigestOffload {
    /// Digests of PDUs of at least `min` bytes go to `accel`'s crc32c
    /// engine where it is an offload engine (`min` is raised to
    /// [`DIGEST_OFFLOAD_FLOOR`]).
    pub fn new(accel: Arc<Accel>, min: usize) -> DigestOffload {
        DigestOffload {
            accel,
            min: min.max(DIGEST_OFFLOAD_FLOOR),
        }
    }

    /// The smallest PDU data offloaded.
    pub fn min(&self) -> usize {
        self.min
    }

    /// On the calling reactor: its accel channel and the PDU sizes whose
    /// digests go to it (`min..=max`), when crc32c runs on an offload
    /// engine there; `None` when it runs on software.
    pub fn here(&self) -> Option<(Rc<AccelChannel>, usize, usize)> {
        let ch = self.accel.channel();
        if !ch.offloads(Opcode::Crc32c) {
            return None;
        }
        let max = ch.max_transfer(Opcode::Crc32c);
        (max >= self.min).then_some((ch, self.min, max))
    }
}
