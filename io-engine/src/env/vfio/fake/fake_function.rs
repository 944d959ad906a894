//! [`FakeFunction`]: what stands behind a device of the fake VFIO (a
//! device model, a fake register file): its registers and the part of its
//! configuration space the fake does not keep itself.
//!
//! Thread: the test's, and the threads using the mapped registers.

use crate::env::vfio::Registers;

/// A PCI function behind the fake VFIO. The fake keeps the command
/// register and, when it is given an MSI-X table, the MSI-X capability in
/// front of the function's capability list; the rest of configuration
/// space is the function's.
pub trait FakeFunction: Send + Sync {
    /// 16-bit read of its configuration space; by default none is there
    /// (0: no capability list).
    fn config_read16(&self, _off: u64) -> u16 {
        0
    }
    /// 16-bit write of its configuration space; by default a test failure
    /// (only the command register, which the fake keeps, is written).
    fn config_write16(&self, off: u64, v: u16) {
        panic!("config write16 of {v:#x} at {off:#x}")
    }
    /// 32-bit write of its configuration space; by default a test failure.
    fn config_write32(&self, off: u64, v: u32) {
        panic!("config write32 of {v:#x} at {off:#x}")
    }
    /// Its registers in BAR `index`, at BAR offsets.
    fn registers(&self, index: u32) -> Box<dyn Registers>;
}
