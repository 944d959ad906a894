//! [`IommuInfo`]: what `VFIO_IOMMU_GET_INFO` says of a container's IOMMU:
//! its page sizes and the IOVA ranges it can address.
//!
//! Thread: the thread that opens the devices (the engine's main thread).

use std::ops::RangeInclusive;

/// `VFIO_IOMMU_INFO_PGSIZES`: `iova_pgsizes` is valid.
const INFO_PGSIZES: u32 = 1 << 0;
/// `VFIO_IOMMU_INFO_CAPS`: `cap_offset` is valid.
const INFO_CAPS: u32 = 1 << 1;
/// `VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE`.
const CAP_IOVA_RANGE: u16 = 1;
/// `sizeof(struct vfio_iommu_type1_info)`: argsz, flags, iova_pgsizes,
/// cap_offset, pad.
pub const INFO_SIZE: usize = 24;

/// A container's IOMMU, as the kernel describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IommuInfo {
    /// The page sizes it maps (a bit per size); 0 when not reported.
    pub page_sizes: u64,
    /// The IOVA ranges it can address (inclusive), from the IOVA-range
    /// capability (Linux 5.4 and later); `None` when the kernel does not
    /// report them.
    pub iova_ranges: Option<Vec<RangeInclusive<u64>>>,
}

/// The IOVA space assumed when the kernel does not report one: above
/// 4 GiB (clear of the x86 interrupt window at 0xfee00000 and the
/// firmware's reserved regions below it) and below 2^39, the smallest
/// address width (MGAW) a VT-d unit has.
pub const FALLBACK_IOVAS: RangeInclusive<u64> = (1 << 32)..=(1 << 39) - 1;

impl IommuInfo {
    /// Parses the buffer `VFIO_IOMMU_GET_INFO` filled (`struct
    /// vfio_iommu_type1_info` and its capability chain, Linux
    /// `include/uapi/linux/vfio.h`): every capability of the chain is
    /// walked, and the ranges of every IOVA-range group in it are merged
    /// (sorted, overlapping or touching ones joined). `None` when it is too
    /// short or a capability points outside it.
    pub fn parse(buf: &[u8]) -> Option<IommuInfo> {
        let u16_at = |o: usize| Some(u16::from_ne_bytes(buf.get(o..o + 2)?.try_into().ok()?));
        let u32_at = |o: usize| Some(u32::from_ne_bytes(buf.get(o..o + 4)?.try_into().ok()?));
        let u64_at = |o: usize| Some(u64::from_ne_bytes(buf.get(o..o + 8)?.try_into().ok()?));
        let flags = u32_at(4)?;
        let page_sizes = if flags & INFO_PGSIZES != 0 {
            u64_at(8)?
        } else {
            0
        };
        let mut iova_ranges = None;
        if flags & INFO_CAPS != 0 {
            // Each capability: id (u16), version (u16), next (u32, an
            // offset from the buffer's start, 0 at the end).
            let mut at = u32_at(16)? as usize;
            let mut seen = 0;
            while at != 0 {
                seen += 1;
                if seen > 64 || at < INFO_SIZE {
                    return None;
                }
                if u16_at(at)? == CAP_IOVA_RANGE {
                    // nr_iovas (u32), reserved (u32), then {start, end}.
                    // Every such group counts, wherever it sits in the
                    // chain: their ranges are merged.
                    let n = u32_at(at + 8)? as usize;
                    let ranges = (0..n)
                        .map(|i| {
                            let o = at + 16 + 16 * i;
                            Some(u64_at(o)?..=u64_at(o + 8)?)
                        })
                        .collect::<Option<Vec<_>>>()?;
                    iova_ranges
                        .get_or_insert_with(Vec::new)
                        .extend(ranges.into_iter().filter(|r| r.start() <= r.end()));
                }
                at = u32_at(at + 4)? as usize;
            }
        }
        Some(IommuInfo {
            page_sizes,
            iova_ranges: iova_ranges.map(merge),
        })
    }

    /// The smallest page the IOMMU maps (4 KiB when not reported).
    pub fn page(&self) -> u64 {
        match self.page_sizes {
            0 => 4096,
            s => 1 << s.trailing_zeros(),
        }
    }

    /// The ranges to allocate IOVAs from: the reported ones, else
    /// [`FALLBACK_IOVAS`].
    pub fn usable(&self) -> Vec<RangeInclusive<u64>> {
        self.iova_ranges
            .clone()
            .unwrap_or_else(|| vec![FALLBACK_IOVAS])
    }
}

/// `ranges` sorted by start, with overlapping or adjacent ranges joined.
fn merge(mut ranges: Vec<RangeInclusive<u64>>) -> Vec<RangeInclusive<u64>> {
    ranges.sort_by_key(|r| *r.start());
    let mut out: Vec<RangeInclusive<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if last.end().checked_add(1).is_none_or(|e| e >= *r.start()) => {
                if r.end() > last.end() {
                    *last = *last.start()..=*r.end();
                }
            }
            _ => out.push(r),
        }
    }
    out
}
