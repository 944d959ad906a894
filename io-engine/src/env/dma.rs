//! DMA memory: regions a DMA engine may read and write, their IOVA (the
//! address a device uses for them), and [`check_memory`], which refuses a
//! region that cannot be had before anything is mapped.
//!
//! Thread: any. A region may be created, used and dropped on any thread.
//!
//! A [`DmaRegion`] is an anonymous mapping, a multiple of 2 MiB long and
//! aligned to 2 MiB, with every page faulted in before it is returned. It
//! comes from reserved 2 MiB hugepages (hugetlb) when the host has them, and
//! otherwise from normal pages with a one-time warning, as
//! [`HugepagePolicy`] says. Hugepages keep TLB misses down on big regions
//! and give the IOMMU few, large mappings.
//!
//! Hugepage counters are read from `/proc/meminfo`, which reports the default
//! hugepage size; the advice in errors assumes that is 2 MiB, as on x86-64.
//!
//! Every live region is known to the process-wide list of [`DmaMapper`]s
//! ([`add_mapper`]): an offload engine that needs its memory mapped (the
//! I/OAT VFIO backend's IOMMU mappings, the I/OAT device model's address
//! space) is told of every region that exists and of each one made or
//! dropped later, so malloc devices and IO buffers are device-visible
//! whenever they were made.

use std::ptr::{NonNull, null_mut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::mm::{Advice, MapFlags, ProtFlags, madvise, mmap_anonymous, munmap};
use thiserror::Error;

/// The hugepage size regions are made of and aligned to: 2 MiB.
pub const HUGEPAGE_SIZE: usize = 2 << 20;

/// Step for faulting in normal pages: the smallest page size there is.
const SMALL_PAGE_SIZE: usize = 4096;

/// Set once the fallback to normal pages has been logged.
static FALLBACK_WARNED: AtomicBool = AtomicBool::new(false);

/// Why DMA memory could not be had.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DmaError {
    /// A region of no bytes was asked for.
    #[error("cannot allocate a DMA region of 0 bytes: ask for at least one byte")]
    ZeroLength,
    /// The length overflows when rounded up to whole hugepages.
    #[error(
        "cannot allocate a DMA region of {len} bytes: rounded up to 2 MiB it does not fit the \
         address space; ask for less"
    )]
    TooLarge {
        /// The length asked for.
        len: usize,
    },
    /// Fewer hugepages are available than the region needs.
    #[error(
        "cannot map {len} bytes of hugepage memory: only {available} free 2 MiB hugepages \
         ({needed} needed); reserve more with `echo {suggested} > /proc/sys/vm/nr_hugepages`"
    )]
    NotEnoughHugepages {
        /// The rounded length of the region.
        len: usize,
        /// Hugepages the region needs.
        needed: u64,
        /// Hugepages free and not reserved by other mappings.
        available: u64,
        /// A pool size that would leave enough free hugepages.
        suggested: u64,
    },
    /// The hugepage mapping failed although enough hugepages seem free.
    #[error(
        "cannot map {len} bytes of hugepage memory (mmap with MAP_HUGETLB failed: {errno}); \
         check HugePages_Free in /proc/meminfo and the hugetlb limit of this process's cgroup, \
         and reserve more with `echo N > /proc/sys/vm/nr_hugepages`"
    )]
    HugepageMap {
        /// The rounded length of the region.
        len: usize,
        /// The error the kernel returned.
        errno: rustix::io::Errno,
    },
    /// The normal-page mapping failed.
    #[error(
        "cannot map {len} bytes of memory (mmap failed: {errno}); ask for less, or raise the \
         memory limits of this process (ulimit -v, cgroup memory.max)"
    )]
    Map {
        /// The rounded length of the region.
        len: usize,
        /// The error the kernel returned.
        errno: rustix::io::Errno,
    },
    /// Not enough memory can be had for the region: refused before mapping,
    /// so a request never gets the process OOM-killed.
    #[error(
        "cannot allocate {len} bytes: only {available} bytes can be had ({limit}), keeping \
         {reserve} bytes in reserve; ask for less, free memory, or reserve hugepages \
         (`echo N > /proc/sys/vm/nr_hugepages`)"
    )]
    OutOfMemory {
        /// Bytes asked for.
        len: usize,
        /// Bytes that can be had.
        available: u64,
        /// What bounds `available`.
        limit: &'static str,
        /// Bytes kept free for the rest of the process.
        reserve: u64,
    },
    /// `/proc/meminfo` could not be read or understood.
    #[error(
        "cannot read the hugepage counters in /proc/meminfo: {reason}; check that /proc is mounted"
    )]
    Meminfo {
        /// What went wrong.
        reason: String,
    },
}

/// Where a region's pages come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HugepagePolicy {
    /// Hugepages when enough are reserved, else normal pages with a warning
    /// (once per process).
    #[default]
    Prefer,
    /// Hugepages or an error saying how to reserve them.
    Require,
    /// Normal pages only, without a warning.
    Never,
}

/// Hugepage counters of the host, from `/proc/meminfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HugepageInfo {
    /// Size of a default hugepage in bytes (`Hugepagesize`); 0 when the
    /// kernel has no hugetlb support.
    pub page_size_bytes: u64,
    /// Hugepages in the pool (`HugePages_Total`).
    pub total: u64,
    /// Hugepages not yet faulted in by any mapping (`HugePages_Free`).
    pub free: u64,
    /// Free hugepages promised to existing mappings (`HugePages_Rsvd`).
    pub reserved: u64,
}

impl HugepageInfo {
    /// Parses the text of `/proc/meminfo`. Absent counters are 0 (a kernel
    /// without hugetlb support has none); a counter that is not a number is
    /// an error.
    pub fn from_meminfo(text: &str) -> Result<HugepageInfo, DmaError> {
        let mut info = HugepageInfo {
            page_size_bytes: 0,
            total: 0,
            free: 0,
            reserved: 0,
        };
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let number = |digits: &str| {
                digits.trim().parse::<u64>().map_err(|_| DmaError::Meminfo {
                    reason: format!("line `{line}` does not hold a number"),
                })
            };
            match key.trim() {
                "HugePages_Total" => info.total = number(value)?,
                "HugePages_Free" => info.free = number(value)?,
                "HugePages_Rsvd" => info.reserved = number(value)?,
                "Hugepagesize" => {
                    let kib = value
                        .trim()
                        .strip_suffix("kB")
                        .ok_or_else(|| DmaError::Meminfo {
                            reason: format!("line `{line}` does not give a size in kB"),
                        })?;
                    info.page_size_bytes =
                        number(kib)?
                            .checked_mul(1024)
                            .ok_or_else(|| DmaError::Meminfo {
                                reason: format!("line `{line}` gives an impossible size"),
                            })?;
                }
                _ => {}
            }
        }
        Ok(info)
    }

    /// Hugepages a new mapping can still get: free and not reserved.
    pub fn available(&self) -> u64 {
        self.free.saturating_sub(self.reserved)
    }
}

/// The host's hugepage counters, read from `/proc/meminfo` now.
pub fn hugepage_info() -> Result<HugepageInfo, DmaError> {
    let text = std::fs::read_to_string("/proc/meminfo").map_err(|e| DmaError::Meminfo {
        reason: e.to_string(),
    })?;
    HugepageInfo::from_meminfo(&text)
}

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
        register(&region);
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

    /// The IOVA a device uses for the byte at `offset` in the region.
    ///
    /// This is the virtual address: the I/OAT VFIO backend maps every
    /// region into the IOMMU at IOVA = virtual address, and the I/OAT
    /// device model uses the same identity (see [`DmaMapper`]).
    ///
    /// # Panics
    ///
    /// If `offset` is not below [`DmaRegion::len`].
    pub fn iova(&self, offset: usize) -> u64 {
        assert!(
            offset < self.len,
            "offset {offset} is outside the DMA region of {} bytes",
            self.len
        );
        (self.ptr.addr().get() + offset) as u64
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
        deregister(self);
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

/// Something that makes DMA regions visible to a device: an IOMMU mapping,
/// the address space of a device model.
///
/// Its calls come from whichever thread makes or drops a region (or adds
/// the mapper), one at a time: they are made under the list's lock, so a
/// mapper must not make or drop regions itself.
pub trait DmaMapper: Send + Sync {
    /// `len` bytes at `addr` (a live region) may now be handed to the
    /// device. A mapper reports its own failures.
    fn map(&self, addr: usize, len: usize);
    /// The region at `addr` goes away: the device must no longer use it.
    fn unmap(&self, addr: usize, len: usize);
}

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

fn live() -> std::sync::MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn register(region: &DmaRegion) {
    let (addr, len) = (region.ptr.addr().get(), region.len);
    let mut live = live();
    live.regions.push((addr, len));
    for (_, m) in &live.mappers {
        m.map(addr, len);
    }
}

fn deregister(region: &DmaRegion) {
    let (addr, len) = (region.ptr.addr().get(), region.len);
    let mut live = live();
    if let Some(i) = live.regions.iter().position(|&r| r == (addr, len)) {
        live.regions.swap_remove(i);
        for (_, m) in &live.mappers {
            m.unmap(addr, len);
        }
    }
}

/// Tells `mapper` of every live region now, and of every region made or
/// dropped until the handle is dropped (which unmaps the live ones from it).
pub fn add_mapper(mapper: Arc<dyn DmaMapper>) -> MapperHandle {
    let mut live = live();
    for &(addr, len) in &live.regions {
        mapper.map(addr, len);
    }
    let id = live.next_id;
    live.next_id += 1;
    live.mappers.push((id, mapper));
    MapperHandle(id)
}

/// The live regions, as (address, length).
pub fn live_regions() -> Vec<(usize, usize)> {
    live().regions.clone()
}

/// A mapper's place in the list; dropping it removes the mapper.
#[derive(Debug)]
pub struct MapperHandle(u64);

impl Drop for MapperHandle {
    fn drop(&mut self) {
        let mut live = live();
        if let Some(i) = live.mappers.iter().position(|(id, _)| *id == self.0) {
            let (_, m) = live.mappers.swap_remove(i);
            for &(addr, len) in &live.regions {
                m.unmap(addr, len);
            }
        }
    }
}

/// Memory kept free beside any region: the rest of the process (and the
/// kernel) needs some too.
pub const MEMORY_RESERVE: u64 = 64 << 20;

/// Checks, before mapping, that a region of `len` bytes can be had: from
/// free hugepages, or else from normal memory (`MemAvailable`, and this
/// process's cgroup v2 `memory.max` less `memory.current`), keeping
/// [`MEMORY_RESERVE`] free. Mapping more than that would get the process
/// OOM-killed when the pages are faulted in.
pub fn check_memory(len: usize) -> Result<(), DmaError> {
    let len_rounded = len
        .checked_next_multiple_of(HUGEPAGE_SIZE)
        .ok_or(DmaError::TooLarge { len })?;
    if let Ok(hp) = hugepage_info()
        && hp.page_size_bytes as usize == HUGEPAGE_SIZE
        && hp.available().saturating_mul(hp.page_size_bytes) >= len_rounded as u64
    {
        return Ok(());
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").map_err(|e| DmaError::Meminfo {
        reason: e.to_string(),
    })?;
    let mut available = mem_available(&meminfo)?;
    let mut limit = "MemAvailable in /proc/meminfo";
    if let Some(room) = cgroup_room()
        && room < available
    {
        available = room;
        limit = "this process's cgroup memory.max";
    }
    if (len_rounded as u64).saturating_add(MEMORY_RESERVE) > available {
        return Err(DmaError::OutOfMemory {
            len,
            available: available.saturating_sub(MEMORY_RESERVE),
            limit,
            reserve: MEMORY_RESERVE,
        });
    }
    Ok(())
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Result<u64, DmaError> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .ok_or_else(|| DmaError::Meminfo {
            reason: "no MemAvailable line".into(),
        })?;
    let kb = line
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .map_err(|_| DmaError::Meminfo {
            reason: format!("MemAvailable is not a number: {line:?}"),
        })?;
    Ok(kb.saturating_mul(1024))
}

/// Room left under this process's cgroup v2 memory limit, if it has one.
fn cgroup_room() -> Option<u64> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    room_under(&read("memory.max")?, &read("memory.current")?)
}

/// `memory.max - memory.current`, or `None` for an unlimited ("max") cgroup.
fn room_under(max: &str, current: &str) -> Option<u64> {
    let max = max.trim().parse::<u64>().ok()?;
    let current = current.trim().parse::<u64>().ok()?;
    Some(max.saturating_sub(current))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    /// Surplus hugepages the kernel may create on demand beyond the pool;
    /// with any, a hugetlb mapping can succeed whatever the counters say.
    fn overcommit_hugepages() -> u64 {
        std::fs::read_to_string("/proc/sys/vm/nr_overcommit_hugepages")
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Writes a pattern over the whole region and reads it back, through raw
    /// pointers.
    fn write_and_read_back(region: &DmaRegion) {
        let pattern = |i: usize| (i as u8) ^ ((i >> 12) as u8);
        for i in (0..region.len()).step_by(61) {
            // SAFETY: i < len; this test is the region's only user.
            unsafe { region.as_ptr().add(i).write(pattern(i)) };
        }
        for i in (0..region.len()).step_by(61) {
            // SAFETY: as above.
            let byte = unsafe { region.as_ptr().add(i).read() };
            assert_eq!(byte, pattern(i), "byte {i}");
        }
    }

    fn assert_aligned(region: &DmaRegion) {
        assert_eq!(region.as_ptr().addr() % HUGEPAGE_SIZE, 0, "{region:?}");
        assert_eq!(region.len() % HUGEPAGE_SIZE, 0, "{region:?}");
    }

    #[test]
    fn never_gives_aligned_zeroed_normal_pages() {
        let region = DmaRegion::alloc_with(3 * MIB, HugepagePolicy::Never).unwrap();
        assert!(!region.is_hugetlb());
        assert_eq!(region.len(), 4 * MIB);
        assert_aligned(&region);
        for i in (0..region.len()).step_by(4093) {
            // SAFETY: i < len; this test is the region's only user.
            assert_eq!(unsafe { region.as_ptr().add(i).read() }, 0);
        }
        write_and_read_back(&region);
    }

    #[test]
    fn lengths_round_up_to_hugepages() {
        for (asked, got) in [(1, 2 * MIB), (2 * MIB, 2 * MIB), (2 * MIB + 1, 4 * MIB)] {
            let region = DmaRegion::alloc_with(asked, HugepagePolicy::Never).unwrap();
            assert_eq!(region.len(), got, "asked {asked}");
        }
    }

    #[test]
    fn bad_lengths_are_refused() {
        assert_eq!(DmaRegion::alloc(0).unwrap_err(), DmaError::ZeroLength);
        assert_eq!(
            DmaRegion::alloc_with(usize::MAX, HugepagePolicy::Never).unwrap_err(),
            DmaError::TooLarge { len: usize::MAX }
        );
        // More than the address space: mmap refuses it.
        let err = DmaRegion::alloc_with(1 << 60, HugepagePolicy::Never).unwrap_err();
        assert_eq!(
            err,
            DmaError::Map {
                len: 1 << 60,
                errno: rustix::io::Errno::NOMEM
            }
        );
        assert!(err.to_string().contains("ask for less"), "{err}");
    }

    #[test]
    fn prefer_uses_hugepages_when_reserved() {
        let info = hugepage_info().unwrap();
        let region = DmaRegion::alloc(4 * MIB).unwrap();
        assert_eq!(region.len(), 4 * MIB);
        assert_aligned(&region);
        write_and_read_back(&region);
        // Only assert where other processes cannot plausibly change the
        // outcome between reading the counters and mapping.
        if info.total == 0 && overcommit_hugepages() == 0 {
            assert!(!region.is_hugetlb());
            assert!(FALLBACK_WARNED.load(Ordering::Relaxed));
        } else if info.available() >= 64 && info.page_size_bytes == HUGEPAGE_SIZE as u64 {
            assert!(region.is_hugetlb());
        }
    }

    #[test]
    fn require_matches_the_hugepage_counters() {
        let info = hugepage_info().unwrap();
        let result = DmaRegion::alloc_with(2 * MIB, HugepagePolicy::Require);
        if info.total == 0 && overcommit_hugepages() == 0 {
            let err = result.unwrap_err();
            assert_eq!(
                err,
                DmaError::NotEnoughHugepages {
                    len: 2 * MIB,
                    needed: 1,
                    available: 0,
                    suggested: 1
                }
            );
            assert_eq!(
                err.to_string(),
                "cannot map 2097152 bytes of hugepage memory: only 0 free 2 MiB hugepages (1 \
                 needed); reserve more with `echo 1 > /proc/sys/vm/nr_hugepages`"
            );
        } else if info.available() >= 64 && info.page_size_bytes == HUGEPAGE_SIZE as u64 {
            let region = result.unwrap();
            assert!(region.is_hugetlb());
            assert_aligned(&region);
            write_and_read_back(&region);
        }
    }

    #[test]
    fn require_more_than_available_fails_cleanly() {
        if overcommit_hugepages() != 0 {
            return;
        }
        // One page more than the whole reserve, not than what is free now:
        // tests running beside this one take and free hugepages, so a
        // request sized from a moment's free count can fit a moment later.
        let info = hugepage_info().unwrap();
        let needed = info.total + 1;
        let len = needed as usize * HUGEPAGE_SIZE;
        match DmaRegion::alloc_with(len, HugepagePolicy::Require).unwrap_err() {
            DmaError::NotEnoughHugepages {
                len: got_len,
                needed: got_needed,
                available,
                suggested,
            } => {
                assert_eq!((got_len, got_needed), (len, needed));
                // Other processes may take or free pages meanwhile.
                assert!(available < needed);
                assert_eq!(suggested, info.total + needed - available);
            }
            other => panic!("expected NotEnoughHugepages, got {other:?}"),
        }
    }

    #[test]
    fn iova_is_the_virtual_address() {
        let region = DmaRegion::alloc_with(2 * MIB, HugepagePolicy::Never).unwrap();
        let base = region.as_ptr().addr() as u64;
        assert_eq!(region.iova(0), base);
        assert_eq!(region.iova(4096), base + 4096);
        assert_eq!(
            region.iova(region.len() - 1),
            base + region.len() as u64 - 1
        );
    }

    #[test]
    #[should_panic(expected = "outside the DMA region")]
    fn iova_beyond_the_region_panics() {
        let region = DmaRegion::alloc_with(2 * MIB, HugepagePolicy::Never).unwrap();
        region.iova(region.len());
    }

    #[test]
    fn contains_checks_both_ends() {
        let region = DmaRegion::alloc_with(2 * MIB, HugepagePolicy::Never).unwrap();
        let base = region.as_ptr().cast_const();
        let len = region.len();
        assert!(region.contains(base, len));
        assert!(region.contains(base, 0));
        assert!(region.contains(base.wrapping_add(len - 1), 1));
        assert!(region.contains(base.wrapping_add(len), 0));
        assert!(!region.contains(base, len + 1));
        assert!(!region.contains(base.wrapping_add(len - 1), 2));
        assert!(!region.contains(base.wrapping_sub(1), 1));
        assert!(!region.contains(base.wrapping_add(1), usize::MAX));
        assert!(!region.contains(std::ptr::null(), 1));
    }

    #[derive(Default)]
    struct Recording(Mutex<Vec<(bool, usize, usize)>>);

    impl DmaMapper for Recording {
        fn map(&self, addr: usize, len: usize) {
            self.0.lock().unwrap().push((true, addr, len));
        }
        fn unmap(&self, addr: usize, len: usize) {
            self.0.lock().unwrap().push((false, addr, len));
        }
    }

    #[test]
    fn mappers_see_live_and_later_regions() {
        let before = DmaRegion::alloc_with(2 * MIB, HugepagePolicy::Never).unwrap();
        let b = (before.as_ptr().addr(), before.len());
        let rec = Arc::new(Recording::default());
        let handle = add_mapper(rec.clone());
        let seen = |want: (bool, usize, usize)| rec.0.lock().unwrap().contains(&want);
        assert!(seen((true, b.0, b.1)), "a live region is mapped at once");
        let after = DmaRegion::alloc_with(2 * MIB, HugepagePolicy::Never).unwrap();
        let a = (after.as_ptr().addr(), after.len());
        assert!(seen((true, a.0, a.1)), "a new region is mapped");
        assert!(live_regions().contains(&a));
        drop(after);
        assert!(seen((false, a.0, a.1)), "a dropped region is unmapped");
        assert!(!live_regions().contains(&a));
        drop(handle);
        assert!(
            seen((false, b.0, b.1)),
            "removing the mapper unmaps the live ones"
        );
        let n = rec.0.lock().unwrap().len();
        let later = DmaRegion::alloc_with(2 * MIB, HugepagePolicy::Never).unwrap();
        drop(later);
        drop(before);
        assert_eq!(
            rec.0.lock().unwrap().len(),
            n,
            "a removed mapper hears nothing"
        );
    }

    #[test]
    fn regions_move_between_threads() {
        let region = DmaRegion::alloc_with(2 * MIB, HugepagePolicy::Never).unwrap();
        let region = std::thread::spawn(move || {
            // SAFETY: in bounds; this thread is the region's only user.
            unsafe { region.as_ptr().add(100).write(0xab) };
            region
        })
        .join()
        .unwrap();
        // SAFETY: in bounds; the writer has finished (joined).
        assert_eq!(unsafe { region.as_ptr().add(100).read() }, 0xab);
    }

    const MEMINFO: &str = "\
MemTotal:       16318500 kB
MemFree:         1234567 kB
AnonHugePages:         0 kB
HugePages_Total:     600
HugePages_Free:      512
HugePages_Rsvd:       12
HugePages_Surp:        0
Hugepagesize:       2048 kB
Hugetlb:         1228800 kB
";

    #[test]
    fn meminfo_counters_are_parsed() {
        let info = HugepageInfo::from_meminfo(MEMINFO).unwrap();
        assert_eq!(
            info,
            HugepageInfo {
                page_size_bytes: 2 * MIB as u64,
                total: 600,
                free: 512,
                reserved: 12
            }
        );
        assert_eq!(info.available(), 500);
        let gig = HugepageInfo::from_meminfo("Hugepagesize:    1048576 kB\n").unwrap();
        assert_eq!(gig.page_size_bytes, 1 << 30);
    }

    #[test]
    fn meminfo_without_hugetlb_is_all_zero() {
        let info = HugepageInfo::from_meminfo("MemTotal: 100 kB\nMemFree: 50 kB\n").unwrap();
        assert_eq!(
            info,
            HugepageInfo {
                page_size_bytes: 0,
                total: 0,
                free: 0,
                reserved: 0
            }
        );
        assert_eq!(info.available(), 0);
    }

    #[test]
    fn malformed_meminfo_is_an_error() {
        for bad in [
            "HugePages_Total: lots\n",
            "HugePages_Free: -1\n",
            "Hugepagesize: 2048 MB\n",
            "Hugepagesize: 99999999999999999999 kB\n",
        ] {
            let err = HugepageInfo::from_meminfo(bad).unwrap_err();
            assert!(
                matches!(&err, DmaError::Meminfo { reason } if reason.contains(bad.trim())),
                "{bad}: {err:?}"
            );
        }
        assert!(
            HugepageInfo::from_meminfo("Hugepagesize: 18446744073709551615 kB\n").is_err(),
            "overflowing size"
        );
    }

    #[test]
    fn hugepage_info_reads_this_host() {
        let info = hugepage_info().unwrap();
        let nr: u64 = std::fs::read_to_string("/proc/sys/vm/nr_hugepages")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // nr_hugepages is the persistent pool; total also counts surplus pages.
        assert!(info.total >= nr, "{info:?} vs nr_hugepages {nr}");
        assert!(info.free <= info.total);
    }

    #[test]
    fn memory_checks_refuse_what_cannot_be_had() {
        assert_eq!(
            mem_available("MemTotal: 100 kB\nMemAvailable:    2048 kB\n").unwrap(),
            2 << 20
        );
        assert!(mem_available("MemTotal: 1 kB\n").is_err());
        assert_eq!(room_under("max\n", "100\n"), None);
        assert_eq!(room_under("1000\n", "300\n"), Some(700));
        assert_eq!(room_under("100\n", "300\n"), Some(0));
        // Far more than any machine has: refused, with a message that says why.
        let err = check_memory(1 << 50).unwrap_err();
        assert!(matches!(err, DmaError::OutOfMemory { .. }), "{err}");
        assert!(err.to_string().contains("ask for less"));
        check_memory(2 << 20).unwrap();
    }
}
