//! [`FakeSysfs`]: a sysfs and /dev tree under a temporary directory, with
//! PCI functions as the kernel shows them (vendor, device, the driver and
//! IOMMU group links), for the tests of every backend that scans sysfs
//! (I/OAT's and DSA's VFIO backends, DSA's idxd discovery).
//!
//! Thread: the test's.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::env::vfio::SysfsRoot;

static TREES: AtomicUsize = AtomicUsize::new(0);

/// A sysfs and /dev tree under a temporary directory, removed on drop.
pub struct FakeSysfs {
    /// The tree's root: `sys/` and `dev/` are below it.
    pub root: PathBuf,
}

impl FakeSysfs {
    /// An empty tree (the PCI bus, the IOMMU groups, `/dev/vfio`), its
    /// directory named after `name`.
    pub fn new(name: &str) -> FakeSysfs {
        let root = std::env::temp_dir().join(format!(
            "io-engine-{name}-{}-{}",
            std::process::id(),
            TREES.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        for d in [
            "sys/bus/pci/devices",
            "sys/bus/pci/drivers",
            "sys/devices/pci0000:00",
            "sys/kernel/iommu_groups",
            "dev/vfio",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        FakeSysfs { root }
    }

    /// The function `bdf` with these ids, bound to `driver`, in IOMMU
    /// group `group` (with its `/dev/vfio` node).
    pub fn function(
        &self,
        bdf: &str,
        vendor: u16,
        device: u16,
        driver: Option<&str>,
        group: Option<u32>,
    ) {
        use std::os::unix::fs::symlink;
        let dir = self.root.join("sys/devices/pci0000:00").join(bdf);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("vendor"), format!("{vendor:#06x}\n")).unwrap();
        std::fs::write(dir.join("device"), format!("{device:#06x}\n")).unwrap();
        symlink(&dir, self.root.join("sys/bus/pci/devices").join(bdf)).unwrap();
        if let Some(d) = driver {
            let drv = self.root.join("sys/bus/pci/drivers").join(d);
            std::fs::create_dir_all(&drv).unwrap();
            symlink(&drv, dir.join("driver")).unwrap();
        }
        if let Some(g) = group {
            let gdir = self
                .root
                .join("sys/kernel/iommu_groups")
                .join(g.to_string());
            std::fs::create_dir_all(gdir.join("devices")).unwrap();
            symlink(&gdir, dir.join("iommu_group")).unwrap();
            let _ = std::fs::write(self.root.join("dev/vfio").join(g.to_string()), "");
        }
    }

    /// The tree as the backends read it.
    pub fn sysfs(&self) -> SysfsRoot {
        SysfsRoot {
            sys: self.root.join("sys"),
            dev: self.root.join("dev"),
        }
    }
}

impl Drop for FakeSysfs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
