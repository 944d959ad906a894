//! [`FakePage`]: a page of memory standing for a window of a BAR mapped as
//! memory (a DSA portal page) by the fake VFIO.
//!
//! Thread: the test's, and the thread storing through it.

use std::cell::UnsafeCell;

use crate::env::vfio::BarMemory;

/// A page's bytes, page-aligned as a mapping is.
#[repr(C, align(4096))]
struct PageBytes([u8; FakePage::SIZE]);

/// A page of ordinary memory as [`BarMemory`].
pub struct FakePage(Box<UnsafeCell<PageBytes>>);

impl FakePage {
    /// Its size: one page.
    pub const SIZE: usize = 4096;
}

/// A zeroed page.
impl Default for FakePage {
    fn default() -> FakePage {
        FakePage(Box::new(UnsafeCell::new(PageBytes([0; FakePage::SIZE]))))
    }
}

// SAFETY: ordinary memory, reached only through the raw pointer `addr`
// gives (a portal's stores).
unsafe impl Sync for FakePage {}

impl BarMemory for FakePage {
    fn addr(&self) -> *mut u8 {
        self.0.get().cast()
    }
    fn len(&self) -> usize {
        FakePage::SIZE
    }
}
