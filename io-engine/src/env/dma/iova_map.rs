//! [`IovaMap`]: the windows a backend made device-visible, by virtual
//! address and by IOVA.
//!
//! Thread: shared by every thread: the backend's mapper fills it from
//! whichever thread makes or drops a DMA region, the driver and the model's
//! device thread read it (the model through an [`IovaGuard`] held across a
//! descriptor, which a removal waits for).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

use super::iova_guard::IovaGuard;
use super::iova_windows::IovaWindows;
use super::window::Window;

/// The windows a backend made device-visible, by virtual address and by
/// IOVA. The VFIO backend adds a window per IOMMU mapping it made; the
/// device model adds one per region it was told of (its "IOMMU").
#[derive(Debug, Default)]
pub struct IovaMap {
    inner: RwLock<IovaWindows>,
    generation: AtomicU64,
}

impl IovaMap {
    /// An empty map.
    pub fn new() -> IovaMap {
        IovaMap::default()
    }

    /// Adds `w` (replacing a window at the same address).
    ///
    /// # Safety
    ///
    /// A window tells the devices translating through this map (the
    /// driver's descriptors, the model's execution) that they may read and
    /// write `w.va..w.va + w.len` at `w.iova`. The caller guarantees that
    /// the device reaches exactly that memory at that IOVA (the IOMMU
    /// mapping, for hardware), and that the memory stays mapped in the
    /// process, and is reached only through raw pointers (volatile, atomic,
    /// or handed to the device), until the window is removed and the device
    /// no longer uses it (the [`DmaMapper`](crate::env::dma::DmaMapper)
    /// contract: a live DMA region, unmapped before it goes).
    pub unsafe fn insert(&self, w: Window) {
        let mut m = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = m.by_va.insert(w.va, w) {
            m.by_iova.remove(&old.iova);
        }
        m.by_iova.insert(w.iova, w);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Removes every window in `[va, va + len)`, once no [`IovaGuard`] is
    /// held (a descriptor the model is executing finishes first).
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

    /// A read lock on the map: its windows stay until it is dropped.
    pub fn read(&self) -> IovaGuard<'_> {
        IovaGuard(self.inner.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The virtual address of `len` bytes at `iova`, when they lie in one
    /// window (the window may go as soon as this returns: a device holds
    /// [`IovaMap::read`] instead).
    pub fn resolve(&self, iova: u64, len: u64) -> Option<*mut u8> {
        self.read().resolve(iova, len)
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
