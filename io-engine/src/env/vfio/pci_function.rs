//! [`PciFunction`]: a PCI function as sysfs describes it; [`scan_ids`],
//! the scan of `bus/pci/devices` by vendor and device id that I/OAT and
//! DSA share, and [`bind_commands`], how to bind a function to vfio-pci.
//!
//! Thread: the thread that opens the devices (the engine's main thread).

use std::path::{Path, PathBuf};

use super::sysfs_root::SysfsRoot;

/// A PCI function as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciFunction {
    /// Its address, e.g. `0000:00:04.0`.
    pub bdf: String,
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// The bound driver's name, if any.
    pub driver: Option<String>,
    /// Its IOMMU group, if the IOMMU is on.
    pub iommu_group: Option<u32>,
    /// Its sysfs directory.
    pub path: PathBuf,
}

fn read_hex(p: &Path) -> Option<u16> {
    let s = std::fs::read_to_string(p).ok()?;
    u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

fn link_name(p: &Path) -> Option<String> {
    let target = std::fs::read_link(p).ok()?;
    target.file_name()?.to_str().map(str::to_owned)
}

/// The PCI functions under `root` whose vendor and device ids `keep`
/// accepts (any driver), sorted by address: the scan I/OAT and DSA share.
pub fn scan_ids(
    root: &SysfsRoot,
    keep: impl Fn(u16, u16) -> bool,
) -> std::io::Result<Vec<PciFunction>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root.pci_devices())? {
        let path = entry?.path();
        let (Some(vendor), Some(device)) = (
            read_hex(&path.join("vendor")),
            read_hex(&path.join("device")),
        ) else {
            continue;
        };
        if !keep(vendor, device) {
            continue;
        }
        let Some(bdf) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        found.push(PciFunction {
            bdf,
            vendor,
            device,
            driver: link_name(&path.join("driver")),
            iommu_group: link_name(&path.join("iommu_group")).and_then(|g| g.parse().ok()),
            path,
        });
    }
    found.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    Ok(found)
}

/// How to bind `f` to vfio-pci, as shell commands.
pub fn bind_commands(f: &PciFunction) -> String {
    let unbind = match &f.driver {
        Some(_) => format!(
            "echo {bdf} > /sys/bus/pci/devices/{bdf}/driver/unbind; ",
            bdf = f.bdf
        ),
        None => String::new(),
    };
    format!(
        "`modprobe vfio-pci; {unbind}echo vfio-pci > /sys/bus/pci/devices/{bdf}/driver_override; \
         echo {bdf} > /sys/bus/pci/drivers_probe` (or `dpdk-devbind.py -b vfio-pci {bdf}`, \
         SPDK's `scripts/setup.sh`)",
        bdf = f.bdf
    )
}
