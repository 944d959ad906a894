//! The Copy command nvmf-perf sends (NVMe NVM Command Set 1.0, section
//! 3.2.2): one source range, format 0, its range list in the capsule.
//!
//! Thread: any (plain values).

use io_engine::export::nvmf::command::{Command, io};

/// A Copy to `sdlba` of namespace `nsid` of one source range (format 0,
/// NR 0); the range list goes in the capsule.
pub fn command(nsid: u32, sdlba: u64) -> Command {
    Command::new(io::COPY, nsid)
        .with_cdw(10, sdlba as u32)
        .with_cdw(11, (sdlba >> 32) as u32)
        .with_cdw(12, 0)
}

/// A Copy's source range entry, format 0 (NVMe NVM Command Set 1.0, figure
/// 34): bytes 8..16 SLBA, bytes 16..18 NLB (0-based).
pub fn range(slba: u64, nlb: u32) -> [u8; 32] {
    let mut r = [0u8; 32];
    r[8..16].copy_from_slice(&slba.to_le_bytes());
    r[16..18].copy_from_slice(&((nlb - 1) as u16).to_le_bytes());
    r
}
