//! Where a copy's or fill's stores should land: the submitter's hint.
//!
//! Thread: any; a plain value.

/// Where an operation's stores should land: a hint from the submitter,
/// which knows what the module cannot (whether anyone reads the
/// destination soon). It is DSA's cache-control descriptor flag and
/// SPDK's `SPDK_IDXD_FLAG_NONTEMPORAL`. Modules may ignore it; the result
/// is the same either way, only its speed differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Placement {
    /// In the CPU cache, for a destination read again soon: the default.
    #[default]
    Cache,
    /// In memory, past the cache, for a destination not read again soon
    /// (the blocks of a device larger than the cache): the software
    /// module writes it with non-temporal stores, which need not read the
    /// destination's lines first and do not evict the core's working set.
    Memory,
}
