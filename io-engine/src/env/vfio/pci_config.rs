//! [`PciConfig`]: the seam through which a driver reaches its function's
//! PCI configuration space (the VFIO device's config region, a model's
//! config space): bus mastering, the capability list, and for I/OAT's
//! channel driver CHANERR_INT, the PCI Express Device Control register and
//! the means to stop the function's DMA when a channel reset does not
//! complete; with the offsets of the header's registers every function
//! has (`PCI_COMMAND`, ...).
//!
//! Thread: the thread that holds the device (for I/OAT, the one that
//! starts the channel, then the reactor that uses it).

/// The device id's offset in configuration space (16 bits).
pub const PCI_DEVICE_ID: u64 = 0x02;
/// The command register's offset in configuration space (16 bits).
pub const PCI_COMMAND: u64 = 0x04;
/// The command register's bus-master-enable bit.
pub const PCI_COMMAND_BUS_MASTER: u16 = 1 << 2;
/// The status register's offset in configuration space (16 bits).
pub const PCI_STATUS: u64 = 0x06;
/// The status register's "capabilities list" bit.
pub const PCI_STATUS_CAP_LIST: u16 = 1 << 4;
/// Where the first capability's offset sits (8 bits; the low two bits are
/// reserved).
pub const PCI_CAPABILITY_LIST: u64 = 0x34;

/// A PCI function's configuration space.
///
/// Offsets are bytes from the start of configuration space; every call is
/// one access of that width.
pub trait PciConfig: Send {
    /// 16-bit read at `off`.
    fn read16(&self, off: u64) -> u16;
    /// 32-bit read at `off`.
    fn read32(&self, off: u64) -> u32;
    /// 16-bit write at `off`.
    fn write16(&self, off: u64, v: u16);
    /// 32-bit write at `off`.
    fn write32(&self, off: u64, v: u32);

    /// The function's device id.
    fn device_id(&self) -> u16 {
        self.read16(PCI_DEVICE_ID)
    }

    /// Resets the whole function (a function-level reset), which stops its
    /// DMA. True only when the reset is known to have been done; false when
    /// the function has none or it cannot be confirmed.
    fn function_reset(&self) -> bool;

    /// Sets or clears bus master enable in the command register; the
    /// caller reads it back to see whether it took.
    fn set_bus_master(&self, on: bool) {
        let cmd = self.read16(PCI_COMMAND);
        let want = if on {
            cmd | PCI_COMMAND_BUS_MASTER
        } else {
            cmd & !PCI_COMMAND_BUS_MASTER
        };
        if want != cmd {
            self.write16(PCI_COMMAND, want);
        }
    }
}

/// The offset of the capability `id` in `cfg`'s capability list, if it has
/// one.
pub fn find_capability(cfg: &dyn PciConfig, id: u8) -> Option<u64> {
    find_capability_with(|off| cfg.read16(off), id)
}

/// The offset of the capability `id` in a capability list read through
/// `read16` (16-bit reads of configuration space), if it has one: the walk
/// of Linux `pci_find_capability`, bounded as its `PCI_FIND_CAP_TTL` bounds
/// it (a looping list ends the walk).
pub fn find_capability_with(read16: impl Fn(u64) -> u16, id: u8) -> Option<u64> {
    if read16(PCI_STATUS) & PCI_STATUS_CAP_LIST == 0 {
        return None;
    }
    let mut at = (read16(PCI_CAPABILITY_LIST) & 0xfc) as u64;
    for _ in 0..48 {
        if at < 0x40 {
            return None;
        }
        let header = read16(at);
        if header & 0xff == id as u16 {
            return Some(at);
        }
        at = ((header >> 8) & 0xfc) as u64;
    }
    None
}
