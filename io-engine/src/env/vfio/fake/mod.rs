//! The fakes the VFIO backends' tests (I/OAT's, DSA's) open functions
//! through, so that every step and every note is tested without hardware:
//! [`FakeSysfs`] (a sysfs and /dev tree with PCI functions), [`FakeVfio`]
//! (VFIO as a current kernel, or an older vfio-pci, or failing at any
//! step; its `FakeContainer` maps as vfio_iommu_type1 does into a fake
//! IOMMU, its `FakeDevice`s map BARs as vfio-pci does), a
//! [`FakeFunction`] behind each device (a device model, a fake register
//! file) seen through a `MappedBar` or a `FakePage`, and what the fake
//! did ([`FakeState`]).
//!
//! Thread: the test's.

mod fake_container;
mod fake_device;
mod fake_function;
mod fake_page;
mod fake_state;
mod fake_sysfs;
mod fake_vfio;
mod mapped_bar;

pub use fake_function::FakeFunction;
pub use fake_state::FakeState;
pub use fake_sysfs::FakeSysfs;
pub use fake_vfio::{Fail, FakeVfio, MSI_WINDOW, MakeFunction};
