//! [`open_functions`]: the generic part of opening VFIO functions that
//! I/OAT and DSA share: the notes for functions not bound to vfio-pci, the
//! IOMMU, hugepage and container checks, one container and its IOMMU
//! mapper.
//!
//! Thread: the thread that opens the devices (the engine's main thread).

use std::sync::Arc;

use super::container_mapper::ContainerMapper;
use super::iommu_info::{FALLBACK_IOVAS, IommuInfo};
use super::kind::Kind;
use super::pci_function::{PciFunction, bind_commands};
use super::sysfs_root::SysfsRoot;
use super::vfio_device_ops::VfioDeviceOps;
use super::vfio_failure::VfioFailure;
use super::vfio_ops::VfioOps;
use crate::env::dma::{DmaMapper, IovaMap};

/// The generic part of opening VFIO functions, for I/OAT and DSA: notes
/// for each of `functions` not bound to vfio-pci (with the bind commands),
/// checks the IOMMU, the hugepages and the container (a note and nothing
/// opened when one is missing), opens each function bound to vfio-pci in
/// one container, and calls `each` with it and the [`IovaMap`] its memory
/// must be translated through; `each` returns what the module makes of it
/// (or `None`, having pushed a note). The container's [`DmaMapper`] is
/// made once `each` has accepted a function (an IOMMU domain needs a
/// device before it takes mappings and says what it can address); it is
/// returned for the module's creator to register.
///
/// Its promise to `each`: the mapper is the only writer of the map; it
/// puts every window into the container's IOMMU at the window's IOVA
/// before inserting it, and removes it before unmapping.
pub fn open_functions<T>(
    root: &SysfsRoot,
    ops: &dyn VfioOps,
    kind: Kind,
    functions: Vec<PciFunction>,
    notes: &mut Vec<String>,
    mut each: impl FnMut(
        &PciFunction,
        Arc<dyn VfioDeviceOps>,
        &Arc<IovaMap>,
        &mut Vec<String>,
    ) -> Option<T>,
) -> (Vec<T>, Option<Arc<dyn DmaMapper>>) {
    let Kind {
        tag,
        what,
        kernel_driver,
        kernel_hint,
    } = kind;
    let mut hardware = Vec::new();
    let mut usable = Vec::new();
    for f in functions {
        let id = format!("{:04x}:{:04x}", f.vendor, f.device);
        match f.driver.as_deref() {
            Some("vfio-pci") => usable.push(f),
            Some(d) if d == kernel_driver => notes.push(format!(
                "{tag} {} ({id}): bound to the kernel's {kernel_driver} driver; bind it to \
                 vfio-pci: {}{kernel_hint}",
                f.bdf,
                bind_commands(&f)
            )),
            Some(other) => notes.push(format!(
                "{tag} {} ({id}): bound to driver {other}; bind it to vfio-pci: {}",
                f.bdf,
                bind_commands(&f)
            )),
            None => notes.push(format!(
                "{tag} {} ({id}): bound to no driver; bind it to vfio-pci: {}",
                f.bdf,
                bind_commands(&f)
            )),
        }
    }
    if usable.is_empty() {
        return (hardware, None);
    }
    let groups = root.sys.join("kernel/iommu_groups");
    let iommu_on = std::fs::read_dir(&groups).is_ok_and(|mut d| d.next().is_some());
    if !iommu_on || usable.iter().all(|f| f.iommu_group.is_none()) {
        notes.push(format!(
            "{tag}: the IOMMU is off ({} is empty and the functions have no iommu_group): \
             enable VT-d in the firmware and boot with `intel_iommu=on iommu=pt`; {what} is \
             not used",
            groups.display()
        ));
        return (hardware, None);
    }
    if ops.hugepages() == 0 {
        notes.push(format!(
            "{tag}: no hugepages are reserved; DMA memory for the device must come from \
             hugepages: reserve some (`echo 1024 > /proc/sys/vm/nr_hugepages`, or \
             `hugepages=1024` on the kernel command line) and restart; {what} is not used"
        ));
        return (hardware, None);
    }
    let container = match ops.open_container() {
        Ok(c) => c,
        Err(e) => {
            let todo = match &e {
                VfioFailure::Container(io) if io.kind() == std::io::ErrorKind::NotFound => {
                    "load the VFIO driver (`modprobe vfio-pci`)".to_string()
                }
                VfioFailure::Container(io) if io.kind() == std::io::ErrorKind::PermissionDenied => {
                    "run as root, or give this user /dev/vfio/vfio".to_string()
                }
                VfioFailure::NoType1 => {
                    "the kernel's VFIO lacks vfio_iommu_type1 (`modprobe vfio_iommu_type1`)"
                        .to_string()
                }
                _ => "check `dmesg` for VFIO errors".to_string(),
            };
            notes.push(format!("{tag}: {e}: {todo}; {what} is not used"));
            return (hardware, None);
        }
    };
    let map = Arc::new(IovaMap::new());
    let mut mapper: Option<Arc<dyn DmaMapper>> = None;
    for f in usable {
        let Some(group) = f.iommu_group else {
            notes.push(format!(
                "{tag} {}: no IOMMU group; enable VT-d and boot with `intel_iommu=on`",
                f.bdf
            ));
            continue;
        };
        let dev = match container.open_device(&f) {
            Ok(d) => d,
            Err(e) => {
                let todo = match &e {
                    VfioFailure::NotViable(g) => format!(
                        "every device of the group (`ls {}/{g}/devices`) must be bound to \
                         vfio-pci or to no driver",
                        groups.display()
                    ),
                    VfioFailure::GroupOpen(_, io)
                        if io.kind() == std::io::ErrorKind::PermissionDenied =>
                    {
                        format!(
                            "run as root, or give this user {}",
                            root.dev.join("vfio").join(group.to_string()).display()
                        )
                    }
                    VfioFailure::GroupOpen(_, io) if io.raw_os_error() == Some(libc::EBUSY) => {
                        "another process holds the group; stop it".to_string()
                    }
                    _ => "check `dmesg` for VFIO errors".to_string(),
                };
                notes.push(format!("{tag} {}: {e}: {todo}; it is not used", f.bdf));
                continue;
            }
        };
        let dev: Arc<dyn VfioDeviceOps> = Arc::from(dev);
        let Some(made) = each(&f, dev, &map, notes) else {
            continue;
        };
        // One mapper for the container, made once a device is open (an
        // IOMMU domain needs a device before it takes mappings and says
        // what it can address); whoever creates the module registers it.
        if mapper.is_none() {
            let info = container.iommu_info().unwrap_or_else(|e| {
                notes.push(format!(
                    "{tag}: cannot read the IOMMU's IOVA ranges ({e}); IOVAs are taken from \
                     {:#x}..={:#x}",
                    FALLBACK_IOVAS.start(),
                    FALLBACK_IOVAS.end()
                ));
                IommuInfo {
                    page_sizes: 0,
                    iova_ranges: None,
                }
            });
            if info.iova_ranges.is_none() {
                tracing::info!(
                    "{tag}: the kernel does not report the IOMMU's IOVA ranges (Linux before \
                     5.4); IOVAs are taken from {:?}",
                    FALLBACK_IOVAS
                );
            }
            mapper = Some(Arc::new(ContainerMapper::new(
                kind,
                container.clone(),
                map.clone(),
                &info,
            )));
        }
        hardware.push(made);
    }
    (hardware, mapper)
}
