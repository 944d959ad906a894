//! [`IovaAllocator`]: IOVAs for DMA regions, taken from the ranges the
//! IOMMU can address (`VFIO_IOMMU_GET_INFO`'s IOVA-range capability), so
//! that the IOVA of a region need not be its virtual address.
//!
//! Thread: shared behind the VFIO container mapper's mutex (whichever
//! thread makes or drops a DMA region).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

/// Free IOVA space: first fit, freed space merged with its neighbours.
#[derive(Debug, Clone, Default)]
pub struct IovaAllocator {
    /// Free stretches, first IOVA -> last IOVA (inclusive: a range may end
    /// at 2^64 - 1).
    free: BTreeMap<u64, u64>,
}

impl IovaAllocator {
    /// Space made of `ranges` (inclusive, as the kernel reports them),
    /// trimmed to whole `page`s (a power of two); IOVA 0 is left out so
    /// that no region is ever at IOVA 0.
    pub fn new(ranges: &[RangeInclusive<u64>], page: u64) -> IovaAllocator {
        let mut a = IovaAllocator::default();
        let page = u128::from(page);
        for r in ranges {
            let start = u128::from((*r.start()).max(1)).next_multiple_of(page);
            let end = (u128::from(*r.end()) + 1) / page * page;
            if end > start {
                // Both fit: start < end <= 2^64.
                a.release(start as u64, (end - 1) as u64);
            }
        }
        a
    }

    /// `len` bytes (not 0) at an IOVA that is a multiple of `align` (a
    /// power of two), or `None` when no free stretch holds them.
    pub fn alloc(&mut self, len: u64, align: u64) -> Option<u64> {
        let last_off = len.checked_sub(1)?;
        let (&first, &last, at) = self.free.iter().find_map(|(first, last)| {
            let at = first.checked_next_multiple_of(align)?;
            (at <= *last && last - at >= last_off).then_some((first, last, at))
        })?;
        self.free.remove(&first);
        if at > first {
            self.free.insert(first, at - 1);
        }
        let end = at + last_off;
        if end < last {
            self.free.insert(end + 1, last);
        }
        Some(at)
    }

    /// Gives back `len` bytes at `iova`, which [`alloc`](Self::alloc)
    /// returned.
    pub fn free(&mut self, iova: u64, len: u64) {
        if let Some(last_off) = len.checked_sub(1) {
            self.release(iova, iova + last_off);
        }
    }

    /// Free bytes in all.
    pub fn available(&self) -> u128 {
        self.free
            .iter()
            .map(|(first, last)| u128::from(last - first) + 1)
            .sum()
    }

    fn release(&mut self, mut first: u64, mut last: u64) {
        if let Some((&f, &l)) = self.free.range(..first).next_back()
            && l.checked_add(1) == Some(first)
        {
            self.free.remove(&f);
            first = f;
        }
        if let Some(next) = last.checked_add(1)
            && let Some(l) = self.free.remove(&next)
        {
            last = l;
        }
        self.free.insert(first, last);
    }
}
