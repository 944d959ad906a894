//! Tests of the VFIO backend's pure decisions: which part of BAR0 to map
//! (around the MSI-X table), where the MSI-X table is, the IOVA allocator,
//! the parsing of `VFIO_IOMMU_GET_INFO`, and what a failed IOMMU mapping
//! tells the operator. (The fake VFIO backend's tests, which need the fake,
//! are in `vfio.rs`.)

use super::super::iommu_info::{FALLBACK_IOVAS, INFO_SIZE};
use super::super::vfio::{VfioFailure, mapping_failure};
use super::super::{IommuInfo, IovaAllocator, MsixTable, RegionInfo};

const REGS: u64 = 0x100;

fn bar(msix_mappable: bool, sparse: Option<Vec<std::ops::Range<u64>>>) -> RegionInfo {
    RegionInfo {
        size: 0x4000,
        mmap: true,
        sparse,
        msix_mappable,
    }
}

#[test]
fn the_register_window_is_the_register_page_and_never_the_msix_table() {
    let table = 0x1000..0x1010;
    // Whatever the kernel allows, one page.
    assert_eq!(
        bar(true, None).register_window(REGS, Some(&table)),
        Ok(0..0x1000)
    );
    assert_eq!(
        bar(false, None).register_window(REGS, Some(&table)),
        Ok(0..0x1000)
    );
    assert_eq!(bar(false, None).register_window(REGS, None), Ok(0..0x1000));
    let sparse = Some(vec![0..0x1000, 0x2000..0x4000]);
    assert_eq!(
        bar(false, sparse).register_window(REGS, Some(&table)),
        Ok(0..0x1000)
    );
    // The table on the register page: refused without MSIX_MAPPABLE
    // (vfio-pci rounds it out to pages), fine with it.
    let low = 0x800..0x810;
    let e = bar(false, None)
        .register_window(REGS, Some(&low))
        .unwrap_err();
    assert!(
        e.contains("share pages with the MSI-X table (0x800..0x810)"),
        "{e}"
    );
    assert_eq!(
        bar(true, None).register_window(REGS, Some(&low)),
        Ok(0..0x1000)
    );
    // Sparse areas that leave the registers out.
    let upper = std::iter::once(0x2000..0x4000).collect();
    let e = bar(true, Some(upper))
        .register_window(REGS, None)
        .unwrap_err();
    assert!(e.contains("mmappable parts are 0x2000..0x4000"), "{e}");
    // Not mmappable, too small.
    let mut b = bar(true, None);
    b.mmap = false;
    assert_eq!(
        b.register_window(REGS, None).unwrap_err(),
        "BAR0 cannot be mmapped"
    );
    let mut b = bar(true, None);
    b.size = 0x80;
    assert_eq!(
        b.register_window(REGS, None).unwrap_err(),
        "BAR0 is only 128 bytes"
    );
}

#[test]
fn the_msix_table_is_found_through_the_capability_list() {
    // Status with a capability list; PM at 0x40 -> MSI-X at 0x80 -> end.
    let config = |off: u64| -> u16 {
        match off {
            0x06 => 0x0010,
            0x34 => 0x40,
            0x40 => 0x8001,
            0x80 => 0x0011,
            0x82 => 0x0003,       // 4 entries
            0x84 => 0x1000 | 0x2, // offset 0x1000, BIR 2
            0x86 => 0x0001,       // offset bits 31:16
            _ => 0,
        }
    };
    assert_eq!(
        MsixTable::find(config),
        Some(MsixTable {
            bar: 2,
            table: 0x1_1000..0x1_1040,
        })
    );
    // No capability list; a list without MSI-X; a looping list.
    assert_eq!(MsixTable::find(|_| 0), None);
    assert_eq!(
        MsixTable::find(|off| match off {
            0x06 => 0x10,
            0x34 => 0x40,
            0x40 => 0x0001,
            _ => 0,
        }),
        None
    );
    assert_eq!(
        MsixTable::find(|off| match off {
            0x06 => 0x10,
            0x34 => 0x40,
            0x40 => 0x4001,
            _ => 0,
        }),
        None
    );
}

#[test]
fn the_iova_allocator_takes_only_reported_ranges_aligns_and_frees() {
    const P: u64 = 4096;
    // Two ranges around the x86 interrupt window, below 2^39; IOVA 0 and
    // partial pages are left out.
    let mut a = IovaAllocator::new(&[0..=0xfedf_ffff, 0xfef0_0000..=(1 << 39) - 1], P);
    assert_eq!(a.available(), (1u128 << 39) - 0x10_0000 - u128::from(P));
    let x = a.alloc(2 << 20, 2 << 20).unwrap();
    assert_eq!(x, 2 << 20, "the first 2 MiB-aligned IOVA above 0");
    let y = a.alloc(P, P).unwrap();
    assert_eq!(y, P);
    // Nothing inside the reserved window, nothing at or above 2^39.
    let big = a.alloc(0xfee0_0000 - (4 << 20), P).unwrap();
    assert!(big + 0xfee0_0000 - (4 << 20) <= 0xfee0_0000, "{big:#x}");
    let after = a.alloc(1 << 30, 1 << 30).unwrap();
    assert_eq!(
        after,
        1 << 32,
        "the first 1 GiB-aligned IOVA past the window"
    );
    assert!(a.alloc(1 << 39, P).is_none(), "larger than what is left");
    // Freed space merges back: everything freed, everything available.
    let before = a.available();
    a.free(x, 2 << 20);
    a.free(after, 1 << 30);
    a.free(y, P);
    a.free(big, 0xfee0_0000 - (4 << 20));
    assert_eq!(
        a.available() - before,
        u128::from((2 << 20) + (1 << 30) + P + 0xfee0_0000 - (4 << 20))
    );
    assert_eq!(
        a.alloc((1 << 39) - (1 << 32), 1 << 32),
        Some(1 << 32),
        "one stretch again"
    );
    // A range reaching 2^64 - 1.
    let mut top = IovaAllocator::new(&[u64::MAX - 3 * P + 1..=u64::MAX], P);
    assert_eq!(top.alloc(3 * P, P), Some(u64::MAX - 3 * P + 1));
    assert!(top.alloc(1, 1).is_none());
    top.free(u64::MAX - 3 * P + 1, 3 * P);
    assert_eq!(top.available(), u128::from(3 * P));
}

/// `struct vfio_iommu_type1_info` and an IOVA-range capability, as the
/// kernel fills them.
fn info_buffer(flags: u32, pgsizes: u64, ranges: &[(u64, u64)]) -> Vec<u8> {
    let mut b = Vec::new();
    let cap_at = if ranges.is_empty() {
        0
    } else {
        INFO_SIZE as u32 + 8
    };
    let argsz = INFO_SIZE + 8 + 16 + 16 * ranges.len();
    b.extend((argsz as u32).to_ne_bytes());
    b.extend(flags.to_ne_bytes());
    b.extend(pgsizes.to_ne_bytes());
    b.extend(cap_at.to_ne_bytes());
    b.extend(0u32.to_ne_bytes());
    b.extend([0xee; 8]); // another capability's bytes would sit here
    b.extend(1u16.to_ne_bytes()); // VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE
    b.extend(1u16.to_ne_bytes()); // version
    b.extend(0u32.to_ne_bytes()); // next: none
    b.extend((ranges.len() as u32).to_ne_bytes());
    b.extend(0u32.to_ne_bytes());
    for &(s, e) in ranges {
        b.extend(s.to_ne_bytes());
        b.extend(e.to_ne_bytes());
    }
    b
}

#[test]
fn iommu_info_gives_page_sizes_and_iova_ranges() {
    let b = info_buffer(
        3,
        0x4020_1000,
        &[(0, 0xfedf_ffff), (0xfef0_0000, (1 << 39) - 1)],
    );
    let i = IommuInfo::parse(&b).unwrap();
    assert_eq!(i.page(), 4096);
    assert_eq!(
        i.usable(),
        vec![0..=0xfedf_ffff, 0xfef0_0000..=(1 << 39) - 1]
    );
    // No capability (Linux before 5.4): the fallback, below 2^39.
    let i = IommuInfo::parse(&info_buffer(1, 0x20_0000, &[])).unwrap();
    assert_eq!(i.iova_ranges, None);
    assert_eq!(i.page(), 0x20_0000);
    assert_eq!(i.usable(), vec![FALLBACK_IOVAS]);
    assert!(*FALLBACK_IOVAS.end() < 1 << 39);
    // Truncated, or a capability pointing into the header.
    assert_eq!(IommuInfo::parse(&b[..INFO_SIZE + 20]), None);
    let mut bad = b.clone();
    bad[16..20].copy_from_slice(&8u32.to_ne_bytes());
    assert_eq!(IommuInfo::parse(&bad), None);
}

/// A capability chain of three: an IOVA-range group, a capability of
/// another kind (id 2, `VFIO_IOMMU_TYPE1_INFO_CAP_MIGRATION`), then a
/// second IOVA-range group, linked out of order in the buffer.
fn two_group_buffer(first: &[(u64, u64)], second: &[(u64, u64)]) -> Vec<u8> {
    let group = |ranges: &[(u64, u64)], next: u32| {
        let mut b = Vec::new();
        b.extend(1u16.to_ne_bytes()); // VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE
        b.extend(1u16.to_ne_bytes());
        b.extend(next.to_ne_bytes());
        b.extend((ranges.len() as u32).to_ne_bytes());
        b.extend(0u32.to_ne_bytes());
        for &(s, e) in ranges {
            b.extend(s.to_ne_bytes());
            b.extend(e.to_ne_bytes());
        }
        b
    };
    // Layout: header, the second group, the other capability, the first.
    let second_at = INFO_SIZE as u32;
    let other_at = second_at + 16 + 16 * second.len() as u32;
    let first_at = other_at + 24;
    let mut b = Vec::new();
    b.extend(0u32.to_ne_bytes()); // argsz, set below
    b.extend(3u32.to_ne_bytes()); // PGSIZES | CAPS
    b.extend(0x1000u64.to_ne_bytes());
    b.extend(first_at.to_ne_bytes());
    b.extend(0u32.to_ne_bytes());
    b.extend(group(second, 0));
    b.extend(2u16.to_ne_bytes()); // another capability
    b.extend(1u16.to_ne_bytes());
    b.extend(second_at.to_ne_bytes());
    b.extend([0x5a; 16]);
    b.extend(group(first, other_at));
    let len = b.len() as u32;
    b[0..4].copy_from_slice(&len.to_ne_bytes());
    b
}

#[test]
fn every_iova_range_group_of_the_capability_chain_counts() {
    let b = two_group_buffer(
        &[(0x10_0000, 0xfedf_ffff)],
        &[(0x1_0000_0000, (1 << 39) - 1), (0xfef0_0000, 0xffff_ffff)],
    );
    let i = IommuInfo::parse(&b).unwrap();
    // Sorted and merged: 0xfef0_0000..=0xffff_ffff touches 2^32.
    assert_eq!(
        i.iova_ranges,
        Some(vec![0x10_0000..=0xfedf_ffff, 0xfef0_0000..=(1 << 39) - 1]),
        "the ranges of both groups, merged"
    );
    // Overlapping groups join; an empty group adds nothing.
    let b = two_group_buffer(&[(0, 0x2fff), (0x8000, 0x8fff)], &[(0x1000, 0x4fff)]);
    assert_eq!(
        IommuInfo::parse(&b).unwrap().iova_ranges,
        Some(vec![0..=0x4fff, 0x8000..=0x8fff])
    );
    let b = two_group_buffer(&[], &[(0x1000, 0x1fff)]);
    assert_eq!(
        IommuInfo::parse(&b).unwrap().iova_ranges,
        Some(vec![0x1000..=0x1fff])
    );
}

#[test]
fn a_failed_mapping_names_its_real_cause() {
    let fail = |errno| {
        VfioFailure::Iommu(
            "VFIO_IOMMU_MAP_DMA",
            std::io::Error::from_raw_os_error(errno),
        )
    };
    let says = |errno| mapping_failure(&fail(errno), 1 << 40, 4096);
    assert!(says(libc::ENOMEM).contains("locked-memory limit"));
    assert!(says(libc::ENOSPC).contains("dma_entry_limit"));
    let e = says(libc::EINVAL);
    assert!(
        e.contains("0x10000000000") && e.contains("address width"),
        "{e}"
    );
    assert!(!e.contains("locked-memory"), "{e}");
    assert!(says(libc::EEXIST).contains("overlaps"));
    assert!(says(libc::EFAULT).contains("not mapped in the process"));
    assert!(mapping_failure(&VfioFailure::Other("x".into()), 0, 1).contains("dmesg"));
}

#[test]
fn a_build_without_the_model_refuses_ioat_model_naming_the_feature() {
    use super::super::devices::MODEL_NOT_BUILT;
    use crate::accel::model_count;
    let model_channels = |s, built_in| model_count(s, built_in, MODEL_NOT_BUILT);
    assert_eq!(model_channels("2", true), Ok(2));
    assert_eq!(model_channels("0", false), Ok(0), "the default stays valid");
    let e = model_channels("2", false).unwrap_err();
    assert!(
        e.contains("--ioat-model") && e.contains("`ioat-model` cargo feature"),
        "{e}"
    );
    assert!(model_channels("x", true).is_err());
}
