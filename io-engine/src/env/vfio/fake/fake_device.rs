//! [`FakeDevice`]: a device of [`FakeVfio`](super::FakeVfio): the command
//! register and an MSI-X capability kept by the fake, the rest of
//! configuration space and the registers the [`FakeFunction`]'s, BARs
//! mapped as vfio-pci maps them (and refused where it refuses).
//!
//! Thread: the test's, and the threads using what it mapped.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::fake_function::FakeFunction;
use super::fake_page::FakePage;
use super::fake_vfio::FakeVfio;
use super::mapped_bar::MappedBar;
use crate::env::vfio::{
    BarMemory, PCI_CAPABILITY_LIST, PCI_COMMAND, PCI_STATUS, PCI_STATUS_CAP_LIST, RegionInfo,
    Registers, VfioDeviceOps, VfioFailure,
};

/// Where the fake puts the MSI-X capability in configuration space (as on
/// I/OAT functions).
const MSIX_CAP: u64 = 0x80;

/// A device opened through the fake VFIO.
pub struct FakeDevice {
    /// The function's address.
    pub bdf: String,
    /// What stands behind it.
    pub function: Arc<dyn FakeFunction>,
    /// The fake's settings and state.
    pub vfio: FakeVfio,
}

impl FakeDevice {
    /// As vfio-pci's mmap: EINVAL outside the region, outside the sparse
    /// areas, or (without MSIX_MAPPABLE) on the MSI-X table's page (Linux
    /// `vfio_pci_mmap` before 4.16).
    fn check_mmap(&self, index: u32, window: &Range<u64>) -> Result<(), VfioFailure> {
        let bar = self.vfio.bar(index);
        let table_page = self
            .vfio
            .msix
            .filter(|_| index == 0)
            .map(|t| t / 0x1000 * 0x1000..(t + 16).div_ceil(0x1000) * 0x1000);
        let refused = self.vfio.bar_fails
            || !bar.mmap
            || window.end > bar.size
            || bar.sparse.as_ref().is_some_and(|areas| {
                !areas
                    .iter()
                    .any(|a| a.start <= window.start && window.end <= a.end)
            })
            || (!bar.msix_mappable
                && table_page.is_some_and(|p| p.start < window.end && window.start < p.end));
        if refused {
            return Err(VfioFailure::Other(format!("mmap of BAR{index}: EINVAL")));
        }
        Ok(())
    }
}

impl VfioDeviceOps for FakeDevice {
    fn config_read16(&self, off: u64) -> u16 {
        let f = &self.function;
        match (off, self.vfio.msix) {
            (PCI_COMMAND, _) => self.vfio.state.command.lock().unwrap()[&self.bdf],
            (PCI_STATUS, Some(_)) => PCI_STATUS_CAP_LIST,
            (PCI_CAPABILITY_LIST, Some(_)) => MSIX_CAP as u16,
            (MSIX_CAP, Some(_)) => 0x11 | (f.config_read16(PCI_CAPABILITY_LIST) & 0xff) << 8,
            (0x82, Some(_)) => 0,
            (0x84, Some(t)) => t as u16,
            (0x86, Some(t)) => (t >> 16) as u16,
            _ => f.config_read16(off),
        }
    }
    fn config_write16(&self, off: u64, v: u16) {
        if off != PCI_COMMAND {
            return self.function.config_write16(off, v);
        }
        let state = &self.vfio.state;
        state.config_writes.fetch_add(1, Ordering::Relaxed);
        state.command.lock().unwrap().insert(self.bdf.clone(), v);
    }
    fn config_read32(&self, off: u64) -> u32 {
        assert_ne!(off, PCI_COMMAND);
        self.config_read16(off) as u32 | (self.config_read16(off + 2) as u32) << 16
    }
    fn config_write32(&self, off: u64, v: u32) {
        assert_ne!(off, PCI_COMMAND);
        self.function.config_write32(off, v)
    }
    fn bar_info(&self, index: u32) -> RegionInfo {
        self.vfio.bar(index)
    }
    fn map_bar(&self, index: u32, window: Range<u64>) -> Result<Box<dyn Registers>, VfioFailure> {
        self.check_mmap(index, &window)?;
        let state = &self.vfio.state;
        state.bar_maps.lock().unwrap().push((index, window.clone()));
        Ok(Box::new(MappedBar {
            regs: self.function.registers(index),
            index,
            window,
        }))
    }
    fn map_bar_memory(
        &self,
        index: u32,
        window: Range<u64>,
    ) -> Result<Box<dyn BarMemory>, VfioFailure> {
        self.check_mmap(index, &window)?;
        assert!(
            window.end - window.start <= FakePage::SIZE as u64,
            "the fake maps at most a page as memory"
        );
        let state = &self.vfio.state;
        state.memory_maps.lock().unwrap().push((index, window));
        Ok(Box::<FakePage>::default())
    }
    fn reset(&self) {
        self.vfio.state.resets.fetch_add(1, Ordering::Relaxed);
    }
}
