//! [`WindowCache`]: an offload driver's last few address windows of its
//! [`DmaMemory`], so that translating a buffer's address to the device's
//! (IOVA, or the address itself under shared virtual addressing) mostly
//! costs a scan of four entries instead of the memory's lookup. Emptied
//! whenever the memory's generation moves (a region mapped or unmapped).
//!
//! Thread: the driver's (a reactor's channel); not shared.

use super::{DmaMemory, Window};

/// Windows cached, most recently looked up ones kept round-robin.
const WINDOWS: usize = 4;

const EMPTY: Window = Window {
    va: 0,
    len: 0,
    iova: 0,
};

/// The cache.
#[derive(Debug, Clone)]
pub struct WindowCache {
    windows: [Window; WINDOWS],
    next: usize,
    /// The memory's generation the windows belong to.
    generation: u64,
}

impl Default for WindowCache {
    fn default() -> Self {
        WindowCache {
            windows: [EMPTY; WINDOWS],
            next: 0,
            generation: u64::MAX,
        }
    }
}

impl WindowCache {
    /// The device address of `addr` in `mem` and how many of the next
    /// `len` bytes are contiguous there; `None` when `mem` does not map
    /// `addr`.
    #[inline]
    pub fn translate(
        &mut self,
        mem: &dyn DmaMemory,
        addr: usize,
        len: usize,
    ) -> Option<(u64, usize)> {
        let g = mem.generation();
        if g != self.generation {
            self.windows = [EMPTY; WINDOWS];
            self.generation = g;
        }
        let w = match self.windows.iter().find(|w| w.contains(addr)) {
            Some(w) => *w,
            None => {
                let w = mem.window(addr)?;
                if let Some(slot) = self.windows.get_mut(self.next) {
                    *slot = w;
                }
                self.next = (self.next + 1) % WINDOWS;
                w
            }
        };
        let off = addr - w.va;
        Some((w.iova + off as u64, (w.len - off).min(len)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::env::dma::DmaBuffer;

    /// Memory of one window at 0x10000..0x20000 (IOVA 0x9000_0000),
    /// counting its lookups.
    #[derive(Default)]
    struct OneWindow {
        lookups: AtomicU64,
        generation: AtomicU64,
    }

    // SAFETY: it hands out no buffer and its one window is never given to
    // a device: only translated.
    unsafe impl DmaMemory for OneWindow {
        fn alloc(&self, _len: usize) -> Result<DmaBuffer, String> {
            Err("none".into())
        }
        fn window(&self, addr: usize) -> Option<Window> {
            self.lookups.fetch_add(1, Ordering::Relaxed);
            let w = Window {
                va: 0x10000,
                len: 0x10000,
                iova: 0x9000_0000,
            };
            w.contains(addr).then_some(w)
        }
        fn generation(&self) -> u64 {
            self.generation.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn lookups_are_cached_until_the_generation_moves() {
        let mem = OneWindow::default();
        let mut c = WindowCache::default();
        assert_eq!(c.translate(&mem, 0x10100, 64), Some((0x9000_0100, 64)));
        assert_eq!(
            c.translate(&mem, 0x1ff00, 0x1000),
            Some((0x9000_ff00, 0x100)),
            "contiguous only to the window's end"
        );
        assert_eq!(
            mem.lookups.load(Ordering::Relaxed),
            1,
            "the second from the cache"
        );
        assert_eq!(c.translate(&mem, 0x30000, 8), None, "unmapped");
        mem.generation.store(1, Ordering::Relaxed);
        assert_eq!(c.translate(&mem, 0x10000, 8), Some((0x9000_0000, 8)));
        assert_eq!(mem.lookups.load(Ordering::Relaxed), 3, "looked up again");
    }
}
