//! The process-wide list of live DMA regions and registered [`DmaMapper`]s:
//! [`register_mapper`] and its [`MapperRegistration`]. A region tells the
//! list when it is made and when it goes; a mapper registered later is told
//! of every live one, so DMA memory is device-visible whenever it was made.
//!
//! Thread: any; the list is behind one lock, and mappers are called under
//! it (see [`DmaMapper`]).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::DmaMapper;

struct Live {
    regions: Vec<(usize, usize)>,
    mappers: Vec<(u64, Arc<dyn DmaMapper>)>,
    next_id: u64,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    regions: Vec::new(),
    mappers: Vec::new(),
    next_id: 0,
});

fn live() -> MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A region of `len` bytes at `addr` was made: every mapper maps it.
pub(super) fn region_made(addr: usize, len: usize) {
    let mut live = live();
    live.regions.push((addr, len));
    for (_, m) in &live.mappers {
        // SAFETY: `region_made` is called by `DmaRegion::alloc_with` with
        // the region it just mapped, whose drop calls `region_dropped`
        // (which unmaps it from every mapper) before its munmap.
        unsafe { m.map(addr, len) };
    }
}

/// The region of `len` bytes at `addr` goes: every mapper unmaps it.
pub(super) fn region_dropped(addr: usize, len: usize) {
    let mut live = live();
    if let Some(i) = live.regions.iter().position(|&r| r == (addr, len)) {
        live.regions.swap_remove(i);
        for (_, m) in &live.mappers {
            m.unmap(addr, len);
        }
    }
}

/// Tells `mapper` of every live region now, and of every region made or
/// dropped until the registration is dropped (which unmaps the live ones
/// from it).
///
/// Called by whoever creates an engine that needs DMA memory mapped (the
/// daemon, accel-perf and bdev-perf for the I/OAT module, and tests), and
/// by the `uring` devices for the rings' fixed buffers (once, on first
/// use, for the process's life).
pub fn register_mapper(mapper: Arc<dyn DmaMapper>) -> MapperRegistration {
    let mut live = live();
    for &(addr, len) in &live.regions {
        // SAFETY: the list holds only live regions (added when mapped,
        // removed by `region_dropped` before their munmap, which unmaps
        // them from every registered mapper, this one included).
        unsafe { mapper.map(addr, len) };
    }
    let id = live.next_id;
    live.next_id += 1;
    live.mappers.push((id, mapper.clone()));
    MapperRegistration { id, mapper }
}

/// The live regions, as (address, length).
pub fn live_regions() -> Vec<(usize, usize)> {
    live().regions.clone()
}

/// A mapper's place in the list; dropping it unmaps every live region from
/// the mapper and removes it.
pub struct MapperRegistration {
    id: u64,
    mapper: Arc<dyn DmaMapper>,
}

impl MapperRegistration {
    /// The mapper registered.
    pub fn mapper(&self) -> &Arc<dyn DmaMapper> {
        &self.mapper
    }
}

impl std::fmt::Debug for MapperRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MapperRegistration")
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for MapperRegistration {
    fn drop(&mut self) {
        let mut live = live();
        if let Some(i) = live.mappers.iter().position(|(id, _)| *id == self.id) {
            let (_, m) = live.mappers.swap_remove(i);
            for &(addr, len) in &live.regions {
                m.unmap(addr, len);
            }
        }
    }
}
