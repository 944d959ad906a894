//! [`FixedBuffers`]: the engine's DMA memory as io_uring fixed buffers.
//! A process-wide table gives each DMA region (where IO buffers live) a
//! slot; every reactor's ring registers a sparse buffer table of the same
//! size and keeps its slots equal to the table's, so a read or write whose
//! buffer lies in a registered region goes as `READ_FIXED`/`WRITE_FIXED`
//! and the kernel does not pin its pages on every IO.
//!
//! The table learns of regions through env's [`DmaMapper`] seam (regions
//! made and dropped on any thread); a ring syncs its registration from it
//! before an IO whenever its generation moved. A region dropped stays
//! pinned by a ring until that ring syncs (its buffers are no longer used
//! by then: they were freed with the region).
//!
//! Thread: the table is shared (a mutex, taken on region changes and
//! syncs); each ring's [`RingBuffers`] lives on its reactor.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use io_uring::Submitter;

use crate::env::dma::{DmaMapper, MapperRegistration, register_mapper};

/// Slots of the table (and of each ring's sparse registration). Regions
/// are IO buffer chunks (2 MiB each for the NVMe/TCP buffers), a pool's
/// chunks and malloc devices.
const SLOTS: usize = 4096;

/// The largest buffer io_uring registers (1 GiB): a larger region (a big
/// malloc device, which is no IO buffer) is left out.
const MAX_REGION: usize = 1 << 30;

/// The process-wide table.
pub(super) struct FixedBuffers {
    slots: Mutex<Vec<Option<(usize, usize)>>>,
    generation: AtomicU64,
}

/// The table, made and told of DMA regions on first use; kept for the
/// process's life.
pub(super) fn table() -> &'static FixedBuffers {
    static TABLE: OnceLock<(Arc<FixedBuffers>, MapperRegistration)> = OnceLock::new();
    let (table, _) = TABLE.get_or_init(|| {
        let table = Arc::new(FixedBuffers {
            slots: Mutex::new(vec![None; SLOTS]),
            generation: AtomicU64::new(1),
        });
        let registration = register_mapper(table.clone());
        (table, registration)
    });
    table
}

impl FixedBuffers {
    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Option<(usize, usize)>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl DmaMapper for FixedBuffers {
    unsafe fn map(&self, addr: usize, len: usize) {
        if len == 0 || len > MAX_REGION {
            return;
        }
        let mut slots = self.slots();
        if let Some(free) = slots.iter_mut().find(|s| s.is_none()) {
            *free = Some((addr, len));
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    fn unmap(&self, addr: usize, len: usize) {
        let mut slots = self.slots();
        if let Some(s) = slots.iter_mut().find(|s| **s == Some((addr, len))) {
            *s = None;
            self.generation.fetch_add(1, Ordering::Release);
        }
    }
}

/// One ring's registered buffers: its copy of the table, and the regions
/// sorted by address for the lookup of each IO.
pub(super) struct RingBuffers {
    generation: u64,
    slots: Vec<Option<(usize, usize)>>,
    /// (start, end, slot), sorted by start.
    sorted: Vec<(usize, usize, u16)>,
}

impl RingBuffers {
    /// Registers a sparse table with the ring; `None` if the kernel cannot
    /// (before Linux 5.19, or memory locking refused): IO then goes as
    /// plain reads and writes.
    pub(super) fn new(submitter: &Submitter<'_>) -> Option<RingBuffers> {
        if let Err(e) = submitter.register_buffers_sparse(SLOTS as u32) {
            tracing::info!("uring: no fixed buffers ({e}); IO buffers are pinned per IO");
            return None;
        }
        let mut b = RingBuffers {
            generation: 0,
            slots: vec![None; SLOTS],
            sorted: Vec::new(),
        };
        b.sync(submitter);
        Some(b)
    }

    /// Whether the table moved since this ring synced. Checked before
    /// every IO: a region dropped and another made at the same address
    /// must never be reached through the old registration (the buffer of
    /// the IO came from a region made, and the table told, before the
    /// buffer was handed out, so this load sees it).
    #[inline]
    pub(super) fn stale(&self) -> bool {
        table().generation.load(Ordering::Acquire) != self.generation
    }

    /// Brings the ring's registration up to the table's, if it moved.
    pub(super) fn sync(&mut self, submitter: &Submitter<'_>) {
        let table = table();
        let generation = table.generation.load(Ordering::Acquire);
        if generation == self.generation {
            return;
        }
        let slots = table.slots().clone();
        for (i, (mine, theirs)) in self.slots.iter_mut().zip(&slots).enumerate() {
            if mine == theirs {
                continue;
            }
            let iov = match theirs {
                Some((addr, len)) => libc::iovec {
                    iov_base: *addr as *mut libc::c_void,
                    iov_len: *len,
                },
                // An empty entry unregisters the slot.
                None => libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                },
            };
            // SAFETY: the iovec names a live DMA region (the table holds
            // only regions not yet dropped; one dropped meanwhile stays
            // pinned by the kernel, never used: see the module doc) or
            // nothing; the kernel pins the pages it names.
            match unsafe { submitter.register_buffers_update(i as u32, &[iov], None) } {
                Ok(_) => *mine = *theirs,
                Err(e) => {
                    tracing::warn!("uring: fixed buffer slot {i} not updated: {e}");
                    *mine = None;
                }
            }
        }
        self.sorted = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|(addr, len)| (addr, addr + len, i as u16)))
            .collect();
        self.sorted.sort_unstable();
        self.generation = generation;
    }

    /// The slot of the registered region holding `len` bytes at `ptr`.
    #[inline]
    pub(super) fn index_of(&self, ptr: *const u8, len: usize) -> Option<u16> {
        let addr = ptr as usize;
        let i = self.sorted.partition_point(|&(start, _, _)| start <= addr);
        let &(_, end, slot) = self.sorted.get(i.checked_sub(1)?)?;
        (addr.checked_add(len)? <= end).then_some(slot)
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use io_uring::{IoUring, opcode, types};

    use super::*;
    use crate::env::dma::DmaRegion;

    #[test]
    fn a_ring_reads_into_a_dma_region_as_a_fixed_buffer() {
        let path = crate::bdev::conformance::scratch_file();
        std::fs::write(&path, vec![0x6d; 8192]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let mut ring = IoUring::new(8).unwrap();
        let mut bufs = RingBuffers::new(&ring.submitter()).expect("this kernel registers buffers");
        let region = DmaRegion::alloc(1 << 21).unwrap();
        let ptr = region.as_ptr();
        // The region made after the ring synced: the ring is stale until it
        // syncs, and only then finds the buffer.
        assert!(bufs.stale());
        assert_eq!(bufs.index_of(ptr, 4096), None);
        bufs.sync(&ring.submitter());
        assert!(!bufs.stale());
        let index = bufs.index_of(ptr, 4096).expect("registered");
        // SAFETY: offsets inside the 2 MiB region.
        let inside = unsafe { ptr.add((1 << 21) - 4096) };
        assert_eq!(bufs.index_of(inside, 4096), Some(index));
        assert_eq!(bufs.index_of(inside, 4097), None, "runs past the region");

        let read = opcode::ReadFixed::new(types::Fd(file.as_raw_fd()), ptr, 4096, index)
            .offset(4096)
            .build()
            .user_data(7);
        // SAFETY: the region outlives the IO (reaped below).
        unsafe { ring.submission().push(&read).unwrap() };
        ring.submit_and_wait(1).unwrap();
        let cqe = ring.completion().next().unwrap();
        assert_eq!((cqe.user_data(), cqe.result()), (7, 4096));
        // SAFETY: the kernel wrote 4096 bytes at `ptr` and is done.
        let got = unsafe { std::slice::from_raw_parts(ptr, 4096) };
        assert!(got.iter().all(|&b| b == 0x6d));

        // Dropped, the region leaves the table and the ring's lookup.
        drop(region);
        assert!(bufs.stale());
        bufs.sync(&ring.submitter());
        assert_eq!(bufs.index_of(ptr, 4096), None);
        std::fs::remove_file(&path).unwrap();
    }
}
