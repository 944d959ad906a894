//! [`MsixTable`]: where a PCI function keeps its MSI-X table, read from
//! the MSI-X capability in its configuration space.
//!
//! Thread: the thread that opens the devices (the engine's main thread).

use std::ops::Range;

use super::pci_config::find_capability_with;

/// Capability id of MSI-X.
const PCI_CAP_ID_MSIX: u8 = 0x11;
/// Bytes per MSI-X table entry.
const MSIX_ENTRY_SIZE: u64 = 16;

/// The MSI-X table of a function: which BAR, and where in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsixTable {
    /// The BAR holding the table (the BIR).
    pub bar: u8,
    /// The table's bytes in that BAR.
    pub table: Range<u64>,
}

impl MsixTable {
    /// Follows the capability list through `read16` (16-bit reads of
    /// configuration space) to the MSI-X capability, as DPDK's
    /// `pci_vfio_get_msix_bar` does: Table Offset/BIR at +4 (BIR in bits
    /// 2:0), Message Control at +2 (table size - 1 in bits 10:0). `None`
    /// when the function has no MSI-X capability.
    pub fn find(read16: impl Fn(u64) -> u16) -> Option<MsixTable> {
        let at = find_capability_with(&read16, PCI_CAP_ID_MSIX)?;
        let entries = u64::from(read16(at + 2) & 0x7ff) + 1;
        let bir_offset = u64::from(read16(at + 4)) | u64::from(read16(at + 6)) << 16;
        let start = bir_offset & !0x7;
        Some(MsixTable {
            bar: (bir_offset & 0x7) as u8,
            table: start..start + entries * MSIX_ENTRY_SIZE,
        })
    }
}
