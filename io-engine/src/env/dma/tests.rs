//! Tests of DMA regions, slices, the mapper list, the hugepage counters and
//! the memory check.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::memory_check::{mem_available, room_under};
use super::region::FALLBACK_WARNED;
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
    unsafe fn map(&self, addr: usize, len: usize) {
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
    let handle = register_mapper(rec.clone());
    assert_eq!(
        Arc::as_ptr(handle.mapper()).cast::<()>(),
        Arc::as_ptr(&rec).cast::<()>()
    );
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

#[test]
fn slices_know_their_place_and_check_bounds() {
    let region = Arc::new(DmaRegion::alloc_with(2 * MIB, HugepagePolicy::Never).unwrap());
    let base = region.as_ptr();
    let s = DmaSlice::new(region.clone(), 8192, 4096);
    assert_eq!(s.as_ptr(), base.wrapping_add(8192));
    assert_eq!(s.len(), 4096);
    assert!(!s.is_empty());
    assert_eq!(s.at::<u64>(4088), base.wrapping_add(8192 + 4088).cast());
    // The last slice of the region.
    let end = DmaSlice::new(region.clone(), 2 * MIB - 64, 64);
    // SAFETY: in bounds and aligned (checked by `at`); this test is the
    // region's only user.
    unsafe { end.at::<u32>(60).write_volatile(7) };
    // SAFETY: as above.
    assert_eq!(unsafe { base.add(2 * MIB - 4).cast::<u32>().read() }, 7);
    // The slice keeps the region mapped.
    drop(region);
    // SAFETY: as above; `end` holds the region.
    assert_eq!(unsafe { end.at::<u32>(60).read_volatile() }, 7);
}

#[test]
#[should_panic(expected = "outside the DMA region")]
fn a_slice_beyond_its_region_panics() {
    let region = Arc::new(DmaRegion::alloc_with(2 * MIB, HugepagePolicy::Never).unwrap());
    DmaSlice::new(region, 2 * MIB - 4095, 4096);
}

#[test]
fn slice_accesses_out_of_bounds_or_unaligned_panic() {
    let region = Arc::new(DmaRegion::alloc_with(2 * MIB, HugepagePolicy::Never).unwrap());
    let s = DmaSlice::new(region, 0, 64);
    let panics = |f: &dyn Fn()| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err();
    assert!(panics(&|| _ = s.at::<u64>(64)), "past the end");
    assert!(panics(&|| _ = s.at::<u64>(60)), "across the end");
    assert!(panics(&|| _ = s.at::<u64>(4)), "unaligned");
    assert!(panics(&|| _ = s.at::<u8>(usize::MAX)), "overflowing");
    assert!(!panics(&|| _ = s.at::<u64>(56)), "the last word");
}
