//! [`DmaRegion`]: memory a DMA engine may read and write. Where a device
//! sees it (its IOVA) is the business of the mapper that made it visible
//! to that device ([`DmaMapper`](super::DmaMapper)), not of the region.
//!
//! Thread: any. A region may be created, used and dropped on any thread.
//!
//! A region is an anonymous mapping, a multiple of 2 MiB long and aligned
//! to 2 MiB, with every page faulted in before it is returned. It comes
//! from reserved 2 MiB hugepages (hugetlb) when the host has them, and
//! otherwise from normal pages with a one-time warning, as
//! [`HugepagePolicy`] says. Hugepages keep TLB misses down on big regions
//! and give the IOMMU few, large mappings. Every region tells the
//! process-wide list of mappers (`registration.rs`) when it is made and
//! when it goes.

use std::ptr::{NonNull, null_mut};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::mm::{Advice, MapFlags, ProtFlags, madvise, mmap_anonymous, munmap};

use super::registration::{region_dropped, region_made};
use super::{DmaError, HugepagePolicy, hugepage_info};

/// The hugepage size regions are made of and aligned to: 2 MiB.
pub const HUGEPAGE_SIZE: usize = 2 << 20;

/// Step for faulting in normal pages: the smallest page size there is.
const SMALL_PAGE_SIZE: usize = 4096;

/// Set once the fallback to normal pages has been logged.
pub(super) static FALLBACK_WARNED: AtomicBool = AtomicBool::new(false);

/// Memory a DMA engine may access: one anonymous mapping, aligned to 2 MiB,
/// a multiple of 2 MiB long, all pages faulted in, unmapped on drop.
///
/// The memory is only reached through raw pointers ([`DmaRegion::as_ptr`]),
/// never as `&[u8]`, since a device may write it at any time. Whoever hands
/// a device an address in the region keeps the region alive until the
/// device is done with it.
#[derive(Debug)]
pub struct DmaRegion {
    /// Start of the region, 2 MiB aligned.
    ptr: NonNull<u8>,
    /// Length of the region, a multiple of 2 MiB.
    len: usize,
    /// The whole mapping, which may extend beyond the region on either side
    /// to get the alignment.
    mapping: NonNull<u8>,
    /// Length of the whole mapping.
    mapping_len: usize,
    /// Whether the pages are hugetlb hugepages.
    hugetlb: bool,
}

// SAFETY: the region's memory is only reached through raw pointers, whose
// users synchronise their own accesses (as with any DMA memory), never
// through references the region hands out, and the mapping lives exactly as
// long as the `DmaRegion`; nothing in it is tied to the creating thread.
unsafe impl Send for DmaRegion {}
// SAFETY: as for `Send`; `&DmaRegion` only gives the pointer, the length and
// flags, all immutable.
unsafe impl Sync for DmaRegion {}

impl DmaRegion {
    /// Allocates at least `len` bytes, from hugepages when reserved (see
    /// [`HugepagePolicy::Prefer`]).
    pub fn alloc(len: usize) -> Result<DmaRegion, DmaError> {
        DmaRegion::alloc_with(len, HugepagePolicy::Prefer)
    }

    /// Allocates at least `len` bytes, rounded up to a multiple of 2 MiB,
    /// with pages from where `policy` says.
    pub fn alloc_with(len: usize, policy: HugepagePolicy) -> Result<DmaRegion, DmaError> {
        if len == 0 {
            return Err(DmaError::ZeroLength);
        }
        let len = len
            .checked_next_multiple_of(HUGEPAGE_SIZE)
            .ok_or(DmaError::TooLarge { len })?;
        let region = DmaRegion::map_with(len, policy)?;
        region_made(region.ptr.addr().get(), region.len);
        Ok(region)
    }

    fn map_with(len: usize, policy: HugepagePolicy) -> Result<DmaRegion, DmaError> {
        if policy != HugepagePolicy::Never {
            match DmaRegion::map_hugetlb(len) {
                Ok(region) => return Ok(region),
                Err(err) if policy == HugepagePolicy::Require => return Err(err),
                Err(err) => {
                    if !FALLBACK_WARNED.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "hugepages are not reserved or not usable: {err}. DMA memory comes \
                             from normal pages instead, so performance and DMA mapping may suffer"
                        );
                    }
                }
            }
        }
        DmaRegion::map_normal(len)
    }

    /// Maps `len` bytes (a multiple of 2 MiB) of 2 MiB hugetlb pages, all
    /// faulted in.
    fn map_hugetlb(len: usize) -> Result<DmaRegion, DmaError> {
        let flags = MapFlags::PRIVATE | MapFlags::HUGETLB | MapFlags::HUGE_2MB | MapFlags::POPULATE;
        // SAFETY: a new anonymous mapping at an address the kernel picks, so
        // it overlaps no memory in use.
        let mapped =
            unsafe { mmap_anonymous(null_mut(), len, ProtFlags::READ | ProtFlags::WRITE, flags) };
        match mapped {
            Ok(ptr) => {
                // mmap never returns null on success; hugetlb mappings are
                // aligned to the hugepage size.
                let ptr = NonNull::new(ptr.cast::<u8>()).expect("mmap returned null");
                Ok(DmaRegion {
                    ptr,
                    len,
                    mapping: ptr,
                    mapping_len: len,
                    hugetlb: true,
                })
            }
            Err(errno) => {
                let needed = (len / HUGEPAGE_SIZE) as u64;
                Err(match hugepage_info() {
                    Ok(info) if info.available() < needed => DmaError::NotEnoughHugepages {
                        len,
                        needed,
                        available: info.available(),
                        suggested: info.total + needed - info.available(),
                    },
                    _ => DmaError::HugepageMap { len, errno },
                })
            }
        }
    }

    /// Maps `len` bytes (a multiple of 2 MiB) of normal pages at a 2 MiB
    /// aligned address, advises transparent hugepages and faults every page
    /// in.
    fn map_normal(len: usize) -> Result<DmaRegion, DmaError> {
        // One hugepage more than needed, so an aligned start lies within.
        let mapping_len = len
            .checked_add(HUGEPAGE_SIZE)
            .ok_or(DmaError::TooLarge { len })?;
        // SAFETY: a new anonymous mapping at an address the kernel picks, so
        // it overlaps no memory in use.
        let mapped = unsafe {
            mmap_anonymous(
                null_mut(),
                mapping_len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        };
        let mapping = mapped
            .map_err(|errno| DmaError::Map { len, errno })?
            .cast::<u8>();
        let mapping = NonNull::new(mapping).expect("mmap returned null");
        let head = mapping.addr().get().next_multiple_of(HUGEPAGE_SIZE) - mapping.addr().get();
        // SAFETY: `head` < HUGEPAGE_SIZE, so the region [ptr, ptr + len) lies
        // within the mapping of `len + HUGEPAGE_SIZE` bytes.
        let ptr = unsafe { mapping.add(head) };
        // SAFETY: [ptr, ptr + len) is part of the mapping just made, page
        // aligned; advice changes no contents.
        if let Err(errno) = unsafe { madvise(ptr.as_ptr().cast(), len, Advice::LinuxHugepage) } {
            tracing::debug!("madvise(MADV_HUGEPAGE) failed ({errno}); keeping normal pages");
        }
        for offset in (0..len).step_by(SMALL_PAGE_SIZE) {
            // SAFETY: offset < len, so the byte is in the region, which is
            // writable; no reference to the memory exists yet.
            unsafe { ptr.add(offset).write_volatile(0) };
        }
        Ok(DmaRegion {
            ptr,
            len,
            mapping,
            mapping_len,
            hugetlb: false,
        })
    }

    /// Start of the region, aligned to 2 MiB.
    ///
    /// Reads and writes through it must not race with a device or another
    /// thread writing the same bytes.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the region in bytes, a multiple of 2 MiB.
    #[expect(clippy::len_without_is_empty, reason = "a DmaRegion is never empty")]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is made of reserved hugetlb hugepages.
    pub fn is_hugetlb(&self) -> bool {
        self.hugetlb
    }

    /// Whether the `len` bytes at `ptr` lie wholly within the region.
    pub fn contains(&self, ptr: *const u8, len: usize) -> bool {
        let start = self.ptr.addr().get();
        let addr = ptr.addr();
        addr >= start
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= start + self.len)
    }
}

impl Drop for DmaRegion {
    fn drop(&mut self) {
        region_dropped(self.ptr.addr().get(), self.len);
        // SAFETY: `mapping`/`mapping_len` are exactly the mapping this region
        // made and owns; no references into it exist, and raw pointers into
        // it must not be used after the region is dropped.
        if let Err(errno) = unsafe { munmap(self.mapping.as_ptr().cast(), self.mapping_len) } {
            tracing::error!(
                "munmap of a {}-byte DMA region failed ({errno}); its memory stays mapped",
                self.mapping_len
            );
        }
    }
}
