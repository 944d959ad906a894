//! The seams between the channel driver and a device. The driver sees a
//! device only as [`Registers`] (volatile 8/16/32/64-bit accesses at BAR0
//! offsets) and [`DmaMemory`] (memory the device may access, and the IOVA
//! of any buffer). The VFIO backend (mapped BAR0, IOMMU mappings) and the
//! device model (a register file, its own address space) implement both.
//!
//! Memory the device reads or writes (the descriptor ring, the completion
//! word, task buffers) is touched only through raw-pointer volatile or
//! atomic accessors ([`DmaBuffer`]), never through `&`/`&mut` references,
//! since the device may access it at any time.
//!
//! Thread: a channel's `Registers` and `DmaBuffer`s are used by the reactor
//! that owns the channel (and, for the model, its device thread); an
//! [`IovaMap`] is shared by every thread: the backend fills it from
//! whichever thread makes or drops a DMA region, the driver and the model's
//! device thread read it.

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::env::dma::{DmaMapper, DmaRegion};

/// Volatile access to a device's registers at BAR0 offsets.
///
/// Reads may have side effects on a device; every call is one access of
/// that width, in program order.
pub trait Registers: Send {
    /// 8-bit read at `off`.
    fn read8(&self, off: usize) -> u8;
    /// 16-bit read at `off`.
    fn read16(&self, off: usize) -> u16;
    /// 32-bit read at `off`.
    fn read32(&self, off: usize) -> u32;
    /// 64-bit read at `off`.
    fn read64(&self, off: usize) -> u64;
    /// 8-bit write at `off`.
    fn write8(&self, off: usize, v: u8);
    /// 16-bit write at `off`.
    fn write16(&self, off: usize, v: u16);
    /// 32-bit write at `off`.
    fn write32(&self, off: usize, v: u32);
    /// 64-bit write at `off`.
    fn write64(&self, off: usize, v: u64);
}

/// A stretch of memory that is contiguous both in the virtual address
/// space and in the device's (IOVA) address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First virtual address.
    pub va: usize,
    /// Length in bytes.
    pub len: usize,
    /// IOVA of `va`.
    pub iova: u64,
}

impl Window {
    /// Whether `addr` lies in the window.
    #[inline]
    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.va && addr - self.va < self.len
    }
}

/// Memory the device may access.
pub trait DmaMemory: Send + Sync {
    /// `len` bytes (at least 64-byte aligned, zeroed) that the device may
    /// read and write, with their IOVA.
    fn alloc(&self, len: usize) -> Result<DmaBuffer, String>;

    /// The window holding `addr`, or `None` when the device cannot reach
    /// it.
    fn window(&self, addr: usize) -> Option<Window>;

    /// A number that changes whenever a window appears or goes away, so a
    /// caller may cache windows while it stays the same.
    fn generation(&self) -> u64;
}

/// The windows a backend made device-visible, by virtual address and by
/// IOVA. The VFIO backend adds a window per IOMMU mapping it made; the
/// device model adds one per region it was told of (its "IOMMU").
#[derive(Debug, Default)]
pub struct IovaMap {
    inner: RwLock<Maps>,
    generation: AtomicU64,
}

#[derive(Debug, Default)]
struct Maps {
    by_va: BTreeMap<usize, Window>,
    by_iova: BTreeMap<u64, Window>,
}

impl IovaMap {
    /// An empty map.
    pub fn new() -> IovaMap {
        IovaMap::default()
    }

    /// Adds `w` (replacing a window at the same address).
    pub fn insert(&self, w: Window) {
        let mut m = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = m.by_va.insert(w.va, w) {
            m.by_iova.remove(&old.iova);
        }
        m.by_iova.insert(w.iova, w);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Removes every window in `[va, va + len)`.
    pub fn remove(&self, va: usize, len: usize) {
        let mut m = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let gone: Vec<Window> = m
            .by_va
            .range(va..va.saturating_add(len))
            .map(|(_, w)| *w)
            .collect();
        for w in gone {
            m.by_va.remove(&w.va);
            m.by_iova.remove(&w.iova);
        }
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The window holding virtual address `addr`.
    pub fn by_va(&self, addr: usize) -> Option<Window> {
        let m = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        m.by_va
            .range(..=addr)
            .next_back()
            .map(|(_, w)| *w)
            .filter(|w| w.contains(addr))
    }

    /// The virtual address of `len` bytes at `iova`, when they lie in one
    /// window.
    pub fn resolve(&self, iova: u64, len: u64) -> Option<*mut u8> {
        let m = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        let (_, w) = m.by_iova.range(..=iova).next_back()?;
        let off = iova - w.iova;
        let end = off.checked_add(len)?;
        (end <= w.len as u64).then(|| (w.va + off as usize) as *mut u8)
    }

    /// Changes whenever a window is added or removed.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Windows in the map.
    pub fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .by_va
            .len()
    }

    /// Whether the map has no window.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Maps every DMA region into an [`IovaMap`] at IOVA = virtual address:
/// the device model's "IOMMU" (a real one is the VFIO backend's).
#[derive(Debug)]
pub struct IdentityMapper(pub Arc<IovaMap>);

impl DmaMapper for IdentityMapper {
    fn map(&self, addr: usize, len: usize) {
        self.0.insert(Window {
            va: addr,
            len,
            iova: addr as u64,
        });
    }
    fn unmap(&self, addr: usize, len: usize) {
        self.0.remove(addr, len);
    }
}

/// [`DmaMemory`] over an [`IovaMap`] that a mapper keeps in step with the
/// process's DMA regions: allocations are [`DmaRegion`]s (which the mapper
/// makes visible as they are made), translations are map lookups. Both the
/// VFIO backend and the device model use it.
#[derive(Debug, Clone)]
pub struct MappedMemory {
    map: Arc<IovaMap>,
}

impl MappedMemory {
    /// Memory translated through `map`.
    pub fn new(map: Arc<IovaMap>) -> MappedMemory {
        MappedMemory { map }
    }

    /// The map.
    pub fn map(&self) -> &Arc<IovaMap> {
        &self.map
    }
}

impl DmaMemory for MappedMemory {
    fn alloc(&self, len: usize) -> Result<DmaBuffer, String> {
        let region = DmaRegion::alloc(len).map_err(|e| e.to_string())?;
        let addr = region.as_ptr().addr();
        let w = self.map.by_va(addr).ok_or_else(|| {
            format!("a new {len}-byte DMA region at {addr:#x} was not mapped for the device")
        })?;
        if w.len - (addr - w.va) < region.len() {
            return Err(format!(
                "a new DMA region at {addr:#x} is only partly mapped for the device"
            ));
        }
        let iova = w.iova + (addr - w.va) as u64;
        Ok(DmaBuffer::new(Arc::new(region), iova))
    }

    #[inline]
    fn window(&self, addr: usize) -> Option<Window> {
        self.map.by_va(addr)
    }

    #[inline]
    fn generation(&self) -> u64 {
        self.map.generation()
    }
}

/// Device-visible memory the driver owns (the descriptor ring, the
/// completion word), reached only through volatile and atomic accessors.
///
/// It holds what a pool's `DmaChunk` holds (a range of a `DmaRegion`, its
/// IOVA), but not its contract: a chunk hands out `&[u8]`/`&mut [u8]` to
/// memory only the CPU touches while it is borrowed, while the device
/// writes this memory at any time, so no reference to it may exist. The
/// two stay separate types so that neither access can reach the other's
/// memory.
#[derive(Debug)]
pub struct DmaBuffer {
    ptr: NonNull<u8>,
    len: usize,
    iova: u64,
    _region: Arc<DmaRegion>,
}

// SAFETY: the buffer is a range of a mapping kept alive by `_region`; it is
// only reached through volatile or atomic accesses (never references), and
// nothing in it is tied to the creating thread.
unsafe impl Send for DmaBuffer {}
// SAFETY: as for Send; shared use is volatile/atomic access only.
unsafe impl Sync for DmaBuffer {}

impl DmaBuffer {
    /// The whole of `region`, whose first byte the device sees at `iova`.
    pub fn new(region: Arc<DmaRegion>, iova: u64) -> DmaBuffer {
        DmaBuffer {
            ptr: NonNull::new(region.as_ptr()).expect("a mapping is not null"),
            len: region.len(),
            iova,
            _region: region,
        }
    }

    /// IOVA of the first byte.
    #[inline]
    pub fn iova(&self) -> u64 {
        self.iova
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes (never).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Virtual address of the first byte.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    #[inline]
    fn at<T>(&self, off: usize) -> *mut T {
        assert!(
            off.checked_add(size_of::<T>())
                .is_some_and(|e| e <= self.len)
                && off.is_multiple_of(align_of::<T>()),
            "DMA buffer access of {} bytes at {off} (buffer of {})",
            size_of::<T>(),
            self.len
        );
        // SAFETY: `off + size_of::<T>() <= len` (asserted), so the pointer
        // stays inside the buffer's mapping.
        unsafe { self.ptr.as_ptr().add(off).cast() }
    }

    /// Volatile 32-bit write at `off`.
    #[inline]
    pub fn write_u32(&self, off: usize, v: u32) {
        let p = self.at::<u32>(off);
        // SAFETY: in bounds and aligned (checked by `at`); the memory is
        // mapped while `self` lives and only accessed through raw pointers.
        unsafe { p.write_volatile(v) }
    }

    /// Volatile 64-bit write at `off`.
    #[inline]
    pub fn write_u64(&self, off: usize, v: u64) {
        let p = self.at::<u64>(off);
        // SAFETY: as for write_u32.
        unsafe { p.write_volatile(v) }
    }

    /// Volatile 32-bit read at `off`.
    #[inline]
    pub fn read_u32(&self, off: usize) -> u32 {
        let p = self.at::<u32>(off);
        // SAFETY: as for write_u32.
        unsafe { p.read_volatile() }
    }

    /// Volatile 64-bit read at `off`.
    #[inline]
    pub fn read_u64(&self, off: usize) -> u64 {
        let p = self.at::<u64>(off);
        // SAFETY: as for write_u32.
        unsafe { p.read_volatile() }
    }

    /// Atomic (acquire) 64-bit load at `off`: the completion word, which
    /// the device writes behind the program's back. Acquire orders the
    /// reads of task data after it.
    #[inline]
    pub fn load_u64(&self, off: usize) -> u64 {
        let p = self.at::<u64>(off);
        // SAFETY: in bounds and 8-aligned (checked by `at`); the memory is
        // only accessed atomically or volatilely, never by reference, and
        // lives as long as `self`.
        unsafe { AtomicU64::from_ptr(p) }.load(Ordering::Acquire)
    }

    /// Atomic (release) 64-bit store at `off`.
    #[inline]
    pub fn store_u64(&self, off: usize, v: u64) {
        let p = self.at::<u64>(off);
        // SAFETY: as for load_u64.
        unsafe { AtomicU64::from_ptr(p) }.store(v, Ordering::Release)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_finds_windows_both_ways() {
        let m = IovaMap::new();
        assert!(m.is_empty());
        let g0 = m.generation();
        m.insert(Window {
            va: 0x10_0000,
            len: 0x1000,
            iova: 0x9000_0000,
        });
        m.insert(Window {
            va: 0x20_0000,
            len: 0x2000,
            iova: 0x20_0000,
        });
        assert!(m.generation() > g0);
        assert_eq!(m.len(), 2);
        assert_eq!(m.by_va(0x10_0fff).map(|w| w.iova), Some(0x9000_0000));
        assert_eq!(m.by_va(0x10_1000), None);
        assert_eq!(m.by_va(0xf_ffff), None);
        assert_eq!(m.resolve(0x9000_0010, 0x10), Some(0x10_0010 as *mut u8));
        assert_eq!(m.resolve(0x9000_0ff0, 0x11), None, "crosses the end");
        assert_eq!(m.resolve(0x20_1000, 0x1000), Some(0x20_1000 as *mut u8));
        assert_eq!(m.resolve(0x1, 1), None);
        m.remove(0x10_0000, 0x1000);
        assert_eq!(m.by_va(0x10_0000), None);
        assert_eq!(m.resolve(0x9000_0000, 1), None);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn mapped_memory_allocates_visible_buffers() {
        let map = Arc::new(IovaMap::new());
        let _h = crate::env::dma::add_mapper(Arc::new(IdentityMapper(map.clone())));
        let mem = MappedMemory::new(map.clone());
        let b = mem.alloc(4096).unwrap();
        assert_eq!(b.iova(), b.as_ptr() as u64);
        assert!(b.len() >= 4096);
        b.write_u64(8, 0x1122_3344_5566_7788);
        assert_eq!(b.read_u64(8), 0x1122_3344_5566_7788);
        assert_eq!(b.read_u32(8), 0x5566_7788);
        b.store_u64(16, 7);
        assert_eq!(b.load_u64(16), 7);
        let w = mem.window(b.as_ptr() as usize + 100).unwrap();
        assert!(w.contains(b.as_ptr() as usize));
        let g = mem.generation();
        let addr = b.as_ptr() as usize;
        drop(b);
        assert!(mem.generation() > g);
        assert_eq!(mem.window(addr), None, "a dropped region is unmapped");
        // Memory that is not a DMA region is not device-visible.
        let v = [0u8; 64];
        assert_eq!(mem.window(v.as_ptr() as usize), None);
    }

    #[test]
    #[should_panic(expected = "DMA buffer access")]
    fn out_of_bounds_access_panics() {
        let map = Arc::new(IovaMap::new());
        let _h = crate::env::dma::add_mapper(Arc::new(IdentityMapper(map.clone())));
        let b = MappedMemory::new(map).alloc(64).unwrap();
        b.read_u64(b.len());
    }
}
