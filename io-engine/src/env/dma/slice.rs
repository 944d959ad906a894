//! [`DmaSlice`]: a range of a [`DmaRegion`], keeping the region alive. It
//! is the part that the pool's IO buffers (`DmaChunk`) and the I/OAT
//! driver's own device memory (`DmaBuffer`) share: base, length and bounds
//! checks. It has no IOVA: where a device sees the memory is the business
//! of whoever mapped it for that device (a `DmaMapper`), and only the
//! I/OAT driver's `DmaBuffer` carries one, from its mapper. It hands out raw pointers only; each of
//! those two types is a view that adds its own access rule (slices for an
//! owner the device never races with, volatile and atomic accesses for
//! memory the device writes at any time).
//!
//! Thread: any; a slice moves and is shared like its region.

use std::ptr::NonNull;
use std::sync::Arc;

use super::DmaRegion;

/// `len` bytes of a DMA region. Holds the region, so the memory lives as
/// long as the slice.
pub struct DmaSlice {
    ptr: NonNull<u8>,
    len: usize,
    _region: Arc<DmaRegion>,
}

// SAFETY: a slice only hands out raw pointers into a mapping kept alive by
// `_region` (which is `Send + Sync`); whoever reads or writes through them
// synchronises with the device and other threads (the views' rules).
// Nothing in it is tied to the creating thread.
unsafe impl Send for DmaSlice {}
// SAFETY: as for `Send`; `&DmaSlice` gives only the pointer and length,
// both immutable.
unsafe impl Sync for DmaSlice {}

impl DmaSlice {
    /// The `len` bytes at `offset` in `region`.
    ///
    /// # Panics
    ///
    /// If the range does not lie wholly within the region.
    pub fn new(region: Arc<DmaRegion>, offset: usize, len: usize) -> DmaSlice {
        assert!(
            offset
                .checked_add(len)
                .is_some_and(|end| end <= region.len()),
            "{len} bytes at {offset} are outside the DMA region of {} bytes",
            region.len()
        );
        // SAFETY: offset <= region.len() (asserted), so the pointer is in
        // the region's mapping or one past its end.
        let ptr = unsafe { region.as_ptr().add(offset) };
        DmaSlice {
            ptr: NonNull::new(ptr).expect("a mapping is not null"),
            len,
            _region: region,
        }
    }

    /// Start of the slice.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A pointer to a `T` at `off`, which must lie wholly within the slice
    /// and be aligned for `T`.
    ///
    /// # Panics
    ///
    /// If it does not.
    #[inline]
    pub fn at<T>(&self, off: usize) -> *mut T {
        assert!(
            off.checked_add(size_of::<T>())
                .is_some_and(|e| e <= self.len)
                && off.is_multiple_of(align_of::<T>()),
            "DMA buffer access of {} bytes at {off} (buffer of {})",
            size_of::<T>(),
            self.len
        );
        // SAFETY: `off + size_of::<T>() <= len` (asserted), so the pointer
        // stays inside the slice, which lies in the region's mapping.
        unsafe { self.ptr.as_ptr().add(off).cast() }
    }
}

impl std::fmt::Debug for DmaSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaSlice")
            .field("addr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}
