//! [`HugepageInfo`]: the host's hugepage counters, read from
//! `/proc/meminfo` ([`hugepage_info`]), which reports the default hugepage
//! size; the advice in errors assumes that is 2 MiB, as on x86-64.
//!
//! Thread: any.

use super::DmaError;

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
