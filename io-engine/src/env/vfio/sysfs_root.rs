//! [`SysfsRoot`]: where sysfs and /dev are mounted, so that every scan of
//! PCI functions (and DSA's idxd discovery) reads a fake tree in the tests.
//!
//! Thread: any (a plain value).

use std::path::PathBuf;

/// Where sysfs and /dev are (`/sys`, `/dev` on a host; a temporary tree in
/// tests).
#[derive(Debug, Clone)]
pub struct SysfsRoot {
    /// The sysfs mount.
    pub sys: PathBuf,
    /// The devtmpfs mount.
    pub dev: PathBuf,
}

impl SysfsRoot {
    /// The host's.
    pub fn system() -> SysfsRoot {
        SysfsRoot {
            sys: PathBuf::from("/sys"),
            dev: PathBuf::from("/dev"),
        }
    }

    /// `bus/pci/devices` under the sysfs mount.
    pub fn pci_devices(&self) -> PathBuf {
        self.sys.join("bus/pci/devices")
    }
}
