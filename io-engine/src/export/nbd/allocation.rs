//! What an export reports for the `base:allocation` metadata context.
//!
//! Thread: any (plain data).

use super::proto::{STATE_HOLE, STATE_ZERO};

/// What an export reports for `base:allocation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// Every block is allocated data (malloc devices): status 0.
    Data,
    /// Every block is an unallocated hole that reads as zeroes (null
    /// devices): `STATE_HOLE | STATE_ZERO`.
    Zero,
}

impl Allocation {
    /// The `base:allocation` status flags for extents of this kind.
    pub const fn block_status_flags(self) -> u32 {
        match self {
            Allocation::Data => 0,
            Allocation::Zero => STATE_HOLE | STATE_ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_flags() {
        assert_eq!(Allocation::Data.block_status_flags(), 0);
        assert_eq!(
            Allocation::Zero.block_status_flags(),
            STATE_HOLE | STATE_ZERO
        );
    }
}
