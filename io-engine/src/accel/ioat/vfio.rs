//! The I/OAT VFIO backend: finds I/OAT functions in sysfs (their PCI ids,
//! [`scan`]), opens them with the VFIO plumbing env provides
//! ([`open_functions`]: the bind notes, the IOMMU, hugepage and container
//! checks, one container and its IOMMU mapper), and makes each one an
//! I/OAT channel's [`Hardware`]: bus mastering on, the register page of
//! BAR0 mapped (never the MSI-X table: [`map_registers`],
//! [`RegionInfo::register_window`](crate::env::vfio::RegionInfo::register_window)), its memory translated through the
//! container's [`IovaMap`](crate::env::dma::IovaMap). The [`DmaMapper`] ([`Found::mapper`]) maps every
//! DMA region of the process into the IOMMU once the module's creator
//! registers it, so malloc devices and IO buffers are device-visible.
//!
//! Thread: the thread that builds the module (the daemon's, accel-perf's or
//! bdev-perf's main thread) discovers and opens the devices; the IOMMU
//! mapping calls then come from whichever thread makes or drops a DMA
//! region (see [`DmaMapper`]); BAR0 accesses from the reactor holding the
//! channel.
//!
//! Every ioctl sits behind [`VfioOps`] (the kernel in
//! [`SystemVfio`](crate::env::vfio::SystemVfio), a
//! fake in the tests), and sysfs is read under a root path
//! ([`SysfsRoot`]), so all the logic here is tested without hardware.
//! Every failure becomes a note that says what the operator should do; the
//! module then runs without that device (and the engine on software when
//! none is left). The generic part (`env::vfio`) is shared with the DSA
//! module's VFIO backend (`accel::dsa::vfio`).

use std::sync::Arc;

use super::driver::Hardware;
use super::spec;
use crate::env::dma::{DmaMapper, MappedMemory};
use crate::env::vfio::{
    Kind, MsixTable, PciConfig, PciFunction, Registers, SysfsRoot, VfioConfig, VfioDeviceOps,
    VfioFailure, VfioOps, open_functions, scan_ids,
};

/// The supported I/OAT functions under `root` (any driver), sorted by
/// address.
pub fn scan(root: &SysfsRoot) -> std::io::Result<Vec<PciFunction>> {
    scan_ids(root, spec::is_supported)
}

/// What [`open_all`] found: the devices to run channels on, the mapper
/// that makes DMA memory visible to them, and notes.
pub struct Found {
    /// Opened, bus-mastering functions with BAR0 mapped.
    pub hardware: Vec<Hardware>,
    /// Maps every DMA region into the functions' VFIO container (the
    /// IOMMU) once registered with env; `None` when no function was opened.
    pub mapper: Option<Arc<dyn DmaMapper>>,
    /// One line per finding, each telling what to do.
    pub notes: Vec<String>,
}

/// Maps `dev`'s registers: reads where its MSI-X table is (configuration
/// space) and what VFIO says of BAR0, and maps only the register page
/// ([`RegionInfo::register_window`](crate::env::vfio::RegionInfo::register_window)).
pub fn map_registers(dev: &dyn VfioDeviceOps) -> Result<Box<dyn Registers>, VfioFailure> {
    let msix = MsixTable::find(|off| dev.config_read16(off)).filter(|t| t.bar == 0);
    let needed = (spec::channel_base(0) + spec::chan::SIZE) as u64;
    let window = dev
        .bar_info(0)
        .register_window(needed, msix.as_ref().map(|t| &t.table))
        .map_err(VfioFailure::Other)?;
    dev.map_bar(0, window)
}

/// What a channel on a VFIO device keeps alive: the device, reset when
/// dropped (before the registration of the container's mapper goes: see
/// [`IoatDevices::start`](super::IoatDevices::start)).
struct Opened {
    dev: Arc<dyn VfioDeviceOps>,
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.dev.reset();
    }
}

/// Finds the I/OAT functions under `root`, keeps those in `wanted` (every
/// one when empty), and opens each one bound to vfio-pci through `ops`.
pub fn open_all(root: &SysfsRoot, ops: &dyn VfioOps, wanted: &[String]) -> Found {
    let mut notes = Vec::new();
    let hardware = Vec::new();
    let dir = root.pci_devices();
    let functions = match scan(root) {
        Ok(f) => f,
        Err(e) => {
            notes.push(format!(
                "ioat: cannot read {} ({e}); is sysfs mounted? I/OAT is not used",
                dir.display()
            ));
            return Found {
                hardware,
                mapper: None,
                notes,
            };
        }
    };
    for w in wanted {
        if !functions.iter().any(|f| &f.bdf == w) {
            notes.push(format!(
                "ioat {w}: no supported I/OAT function at that address in {} (check the \
                 address with `lspci -D -d 8086:`)",
                dir.display()
            ));
        }
    }
    let functions: Vec<PciFunction> = functions
        .into_iter()
        .filter(|f| wanted.is_empty() || wanted.contains(&f.bdf))
        .collect();
    if functions.is_empty() {
        if wanted.is_empty() {
            notes.push(format!(
                "ioat: no I/OAT function in {} (Intel vendor 0x8086 with a supported device \
                 id); this host has no I/OAT engine, or it is disabled in the firmware \
                 (\"Crystal Beach DMA\" / \"I/OAT\")",
                dir.display()
            ));
        }
        return Found {
            hardware,
            mapper: None,
            notes,
        };
    }
    let (hardware, mapper) = open_functions(
        root,
        ops,
        IOAT,
        functions,
        &mut notes,
        |f, dev, map, notes| {
            // Bus master enable (SPDK's `ioat_attach`).
            let pci = VfioConfig(dev.clone());
            pci.set_bus_master(true);
            let regs = match map_registers(dev.as_ref()) {
                Ok(r) => r,
                Err(e) => {
                    notes.push(format!(
                        "ioat {}: cannot map BAR0 ({e}); check `dmesg`; it is not used",
                        f.bdf
                    ));
                    return None;
                }
            };
            // SAFETY: `regs` and `pci` are this VFIO device's BAR0 and
            // configuration space; the device sits in the container whose
            // IOMMU mapper (`ContainerMapper`, the only writer of `map`) puts
            // every window of `map` into that IOMMU at the window's IOVA before
            // it inserts it, and removes it before unmapping
            // (`open_functions`' promise): the device reaches exactly the
            // memory `map` names, and the IOMMU refuses the rest.
            Some(unsafe {
                Hardware::new(
                    f.bdf.clone(),
                    regs,
                    Box::new(pci),
                    Arc::new(MappedMemory::new(map.clone())),
                    Some(Box::new(Opened { dev })),
                )
            })
        },
    );
    Found {
        hardware,
        mapper,
        notes,
    }
}

/// I/OAT's kind.
const IOAT: Kind = Kind {
    tag: "ioat",
    what: "I/OAT",
    kernel_driver: "ioatdma",
    kernel_hint: "",
};

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::Ordering;

    use super::super::driver::DriverConfig;
    use super::super::model::{IoatModel, ModelConfig, PowerOn};
    use super::super::{Ioat, IoatDevices, IoatOptions};
    use super::*;
    use crate::accel::{Accel, Module, Opcode, conformance};
    use crate::env::dma::register_mapper;
    use crate::env::vfio::RegionInfo;
    use crate::env::vfio::fake::{Fail, FakeFunction, FakeSysfs, FakeVfio, MSI_WINDOW};

    /// A fake sysfs tree for these tests.
    fn tree() -> FakeSysfs {
        FakeSysfs::new("vfio")
    }

    /// VFIO with I/OAT model devices behind it (their config space names
    /// the device id sysfs gives), translating through the fake's IOMMU.
    /// By default it acts as a current kernel on an I/OAT function: BAR0 of
    /// 16 KiB with the MSI-X table at 0x1000 (one entry; `lspci`: "Vector
    /// table: BAR=0 offset=00001000"), MSIX_MAPPABLE, an IOMMU of 48 bits
    /// that reports its IOVA ranges.
    fn ioat_vfio() -> FakeVfio {
        ioat_vfio_with(ModelConfig::default())
    }

    /// As [`ioat_vfio`], its model devices configured as `model` says.
    fn ioat_vfio_with(model: ModelConfig) -> FakeVfio {
        let bar0 = RegionInfo {
            size: 0x4000,
            mmap: true,
            sparse: None,
            msix_mappable: true,
        };
        FakeVfio {
            msix: Some(0x1000),
            ..FakeVfio::new(
                vec![bar0],
                Arc::new(move |f, iommu| {
                    Arc::new(IoatModel::with_map(
                        ModelConfig {
                            device_id: f.device,
                            ..model.clone()
                        },
                        iommu.clone(),
                    ))
                }),
            )
        }
    }

    /// vfio-pci before Linux 4.16: no MSIX_MAPPABLE; `sparse` areas
    /// (4.6 to 4.15: BAR0 but the MSI-X table's page) or none (older:
    /// any mmap overlapping the table fails).
    fn old_kernel(sparse: bool) -> FakeVfio {
        let mut f = ioat_vfio();
        f.bars[0].msix_mappable = false;
        if sparse {
            f.bars[0].sparse = Some(vec![0..0x1000, 0x2000..0x4000]);
        }
        f
    }

    /// The model behind a fake device: its configuration space (the fake
    /// keeps the command register and puts an MSI-X capability at 0x80 in
    /// front of the model's list) and its registers in BAR0.
    impl FakeFunction for IoatModel {
        fn config_read16(&self, off: u64) -> u16 {
            self.pci_config().read16(off)
        }
        fn config_write16(&self, off: u64, v: u16) {
            self.pci_config().write16(off, v)
        }
        fn config_write32(&self, off: u64, v: u32) {
            self.pci_config().write32(off, v)
        }
        fn registers(&self, index: u32) -> Box<dyn Registers> {
            assert_eq!(index, 0, "I/OAT maps only BAR0");
            Box::new(IoatModel::registers(self))
        }
    }

    fn two_functions() -> FakeSysfs {
        let t = tree();
        t.function("0000:00:04.0", 0x8086, 0x2021, Some("vfio-pci"), Some(7));
        t.function("0000:00:04.1", 0x8086, 0x2021, Some("vfio-pci"), Some(8));
        t
    }

    fn notes(t: &FakeSysfs, ops: &FakeVfio, wanted: &[&str]) -> (usize, String) {
        let wanted: Vec<String> = wanted.iter().map(|s| s.to_string()).collect();
        let f = open_all(&t.sysfs(), ops, &wanted);
        (f.hardware.len(), f.notes.join("\n"))
    }

    #[test]
    fn discovery_reads_vendor_device_driver_and_group() {
        let t = tree();
        t.function("0000:80:04.3", 0x8086, 0x6f23, Some("ioatdma"), Some(41));
        t.function("0000:00:04.0", 0x8086, 0x2021, Some("vfio-pci"), Some(12));
        t.function("0000:00:1f.2", 0x8086, 0xa102, Some("ahci"), Some(13));
        t.function("0000:03:00.0", 0x10de, 0x2021, None, None);
        t.function("0000:00:04.7", 0x8086, 0x0b00, None, None);
        let found = scan(&t.sysfs()).unwrap();
        let got: Vec<_> = found
            .iter()
            .map(|f| (f.bdf.as_str(), f.device, f.driver.as_deref(), f.iommu_group))
            .collect();
        assert_eq!(
            got,
            vec![
                ("0000:00:04.0", 0x2021, Some("vfio-pci"), Some(12)),
                ("0000:00:04.7", 0x0b00, None, None),
                ("0000:80:04.3", 0x6f23, Some("ioatdma"), Some(41)),
            ]
        );
        assert!(found[0].path.ends_with("0000:00:04.0"));
    }

    #[test]
    fn every_failure_says_what_to_do() {
        let ops = ioat_vfio();
        // No sysfs.
        let none = SysfsRoot {
            sys: PathBuf::from("/nonexistent/sys"),
            dev: PathBuf::from("/nonexistent/dev"),
        };
        let f = open_all(&none, &ops, &[]);
        assert!(f.hardware.is_empty());
        assert!(f.notes[0].contains("is sysfs mounted"), "{:?}", f.notes);
        // No I/OAT function.
        let t = tree();
        t.function("0000:00:1f.2", 0x8086, 0xa102, Some("ahci"), Some(1));
        let (n, s) = notes(&t, &ops, &[]);
        assert_eq!(n, 0);
        assert!(
            s.contains("no I/OAT function in") && s.contains("Crystal Beach"),
            "{s}"
        );
        // Bound to ioatdma, to another driver, to none; a wanted address
        // that is not there.
        let t = tree();
        t.function("0000:00:04.0", 0x8086, 0x2021, Some("ioatdma"), Some(3));
        t.function("0000:00:04.1", 0x8086, 0x2021, Some("pci-stub"), Some(4));
        t.function("0000:00:04.2", 0x8086, 0x2021, None, Some(5));
        let (n, s) = notes(
            &t,
            &ops,
            &[
                "0000:00:04.0",
                "0000:00:04.1",
                "0000:00:04.2",
                "0000:00:09.0",
            ],
        );
        assert_eq!(n, 0);
        assert!(
            s.contains(
                "ioat 0000:00:04.0 (8086:2021): bound to the kernel's ioatdma driver; bind it \
                 to vfio-pci: `modprobe vfio-pci; echo 0000:00:04.0 > \
                 /sys/bus/pci/devices/0000:00:04.0/driver/unbind; echo vfio-pci > \
                 /sys/bus/pci/devices/0000:00:04.0/driver_override; echo 0000:00:04.0 > \
                 /sys/bus/pci/drivers_probe`"
            ),
            "{s}"
        );
        assert!(
            s.contains("ioat 0000:00:04.1 (8086:2021): bound to driver pci-stub"),
            "{s}"
        );
        assert!(
            s.contains("ioat 0000:00:04.2 (8086:2021): bound to no driver; bind it to vfio-pci: `modprobe vfio-pci; echo vfio-pci"),
            "{s}"
        );
        assert!(
            s.contains("ioat 0000:00:09.0: no supported I/OAT function at that address"),
            "{s}"
        );
        // --ioat-devices restricts.
        let t = two_functions();
        let ops = ioat_vfio();
        let (n, _) = notes(&t, &ops, &["0000:00:04.1"]);
        assert_eq!(n, 1);
        // The IOMMU is off: no groups.
        let t = tree();
        t.function("0000:00:04.0", 0x8086, 0x2021, Some("vfio-pci"), None);
        let (n, s) = notes(&t, &ops, &[]);
        assert_eq!(n, 0);
        assert!(
            s.contains("the IOMMU is off") && s.contains("intel_iommu=on"),
            "{s}"
        );
        // No hugepages.
        let t = two_functions();
        let ops = FakeVfio {
            hugepages: 0,
            ..ioat_vfio()
        };
        let (n, s) = notes(&t, &ops, &[]);
        assert_eq!(n, 0);
        assert!(
            s.contains("no hugepages are reserved") && s.contains("nr_hugepages"),
            "{s}"
        );
        // No VFIO, or no permission for it.
        for (fail, want) in [
            (
                (|| VfioFailure::Container(std::io::ErrorKind::NotFound.into())) as Fail,
                "cannot open /dev/vfio/vfio: entity not found: load the VFIO driver (`modprobe vfio-pci`)",
            ),
            (
                || VfioFailure::Container(std::io::ErrorKind::PermissionDenied.into()),
                "run as root, or give this user /dev/vfio/vfio",
            ),
            (|| VfioFailure::NoType1, "vfio_iommu_type1"),
        ] {
            let ops = FakeVfio {
                container: Some(fail),
                ..ioat_vfio()
            };
            let (n, s) = notes(&t, &ops, &[]);
            assert_eq!(n, 0);
            assert!(s.contains(want) && s.contains("I/OAT is not used"), "{s}");
        }
        // A group that is not viable, or not ours to open.
        let mut ops = ioat_vfio();
        ops.device
            .insert("0000:00:04.0", || VfioFailure::NotViable(7));
        ops.device.insert("0000:00:04.1", || {
            VfioFailure::GroupOpen(8, std::io::ErrorKind::PermissionDenied.into())
        });
        let (n, s) = notes(&t, &ops, &[]);
        assert_eq!(n, 0);
        assert!(
            s.contains(
                "ioat 0000:00:04.0: IOMMU group 7 is not viable: every device of the group (`ls "
            ) && s.contains("/7/devices`) must be bound to vfio-pci or to no driver"),
            "{s}"
        );
        assert!(
            s.contains("ioat 0000:00:04.1: cannot open /dev/vfio/8")
                && s.contains("dev/vfio/8; it is not used"),
            "{s}"
        );
        // BAR0 that cannot be mapped.
        let ops = FakeVfio {
            bar_fails: true,
            ..ioat_vfio()
        };
        let (n, s) = notes(&t, &ops, &[]);
        assert_eq!(n, 0);
        assert!(s.contains("cannot map BAR0 (mmap of BAR0: EINVAL)"), "{s}");
    }

    #[test]
    fn bus_mastering_is_enabled_once() {
        let t = two_functions();
        let ops = ioat_vfio();
        ops.state
            .command
            .lock()
            .unwrap()
            .insert("0000:00:04.1".into(), 0x0006);
        let f = open_all(&t.sysfs(), &ops, &[]);
        assert_eq!(f.hardware.len(), 2);
        let cmd = ops.state.command.lock().unwrap().clone();
        assert_eq!(cmd["0000:00:04.0"], 0x0006, "bit 2 set, others kept");
        assert_eq!(cmd["0000:00:04.1"], 0x0006);
        assert_eq!(
            ops.state.config_writes.load(Ordering::Relaxed),
            1,
            "no write where it was already set"
        );
    }

    #[test]
    fn model_devices_behind_fake_vfio_pass_the_suite() {
        let t = two_functions();
        let ops = ioat_vfio();
        let f = open_all(&t.sysfs(), &ops, &[]);
        assert!(f.notes.is_empty(), "{:?}", f.notes);
        let mapper = f.mapper.expect("a container mapper once a device is open");
        assert_eq!(
            ops.state.maps.load(Ordering::Relaxed),
            0,
            "nothing is mapped before the creator registers the mapper"
        );
        let devices = IoatDevices::new(f.hardware, &DriverConfig::default(), mapper, f.notes);
        let mapping = register_mapper(devices.mapper());
        let ioat = Arc::new(devices.start(mapping));
        assert_eq!(ioat.channels(), 2, "{:?}", ioat.notes());
        // The rings were mapped into the IOMMU as they were made (the
        // models see nothing else).
        assert!(ops.state.maps.load(Ordering::Relaxed) >= 2);
        let accel = Accel::new(vec![ioat.clone() as Arc<dyn Module>], &[]).unwrap();
        assert_eq!(accel.assigned(Opcode::Copy), "ioat");
        // The suite's arena is made now: mapped by the backend as it is made.
        let a = accel.clone();
        std::thread::spawn(move || conformance::run_all(&a, 1 << 20))
            .join()
            .unwrap();
        assert_eq!(ioat.totals().failed, 0);
        drop(accel);
        drop(ioat);
        // Shutdown: both devices reset, every mapping removed.
        assert_eq!(ops.state.resets.load(Ordering::Relaxed), 2);
        assert_eq!(
            ops.state.maps.load(Ordering::Relaxed),
            ops.state.unmaps.load(Ordering::Relaxed)
        );
    }

    #[test]
    fn chanerr_int_and_device_control_go_through_the_vfio_config_region() {
        // Version 3.2 functions that power on halted with an error latched
        // in CHANERR_INT: they come up only if the driver clears it through
        // the config region before the reset.
        let t = two_functions();
        let ops = ioat_vfio_with(ModelConfig {
            cbver: 0x32,
            power_on: PowerOn::Halted(spec::chanerr::SRC_ADDR),
            ..ModelConfig::default()
        });
        let f = open_all(&t.sysfs(), &ops, &[]);
        let pci: Vec<_> = f.hardware.iter().map(|h| h.pci().device_id()).collect();
        assert_eq!(pci, vec![0x2021, 0x2021], "the device's config space");
        let mapper = f.mapper.expect("a container mapper");
        let devices = IoatDevices::new(f.hardware, &DriverConfig::default(), mapper, f.notes);
        let mapping = register_mapper(devices.mapper());
        let ioat = devices.start(mapping);
        assert_eq!(ioat.channels(), 2, "{:?}", ioat.notes());
        // Turning bus mastering off goes through the command register.
        let c = ops.open_container().unwrap();
        let dev = c.open_device(&scan(&t.sysfs()).unwrap()[0]).unwrap();
        let cfg = VfioConfig(Arc::from(dev));
        cfg.set_bus_master(false);
        assert_eq!(ops.state.command.lock().unwrap()["0000:00:04.0"], 0x0002);
        assert!(!cfg.function_reset(), "a VFIO reset cannot be confirmed");
    }

    #[test]
    fn only_the_register_page_of_bar0_is_mapped_never_the_msix_table() {
        // A current kernel (MSIX_MAPPABLE), 4.6-4.15 (sparse areas around
        // the table's page), older (an mmap over the table fails): the
        // register page is mapped on each, and only it.
        for (what, ops) in [
            ("current", ioat_vfio()),
            ("sparse", old_kernel(true)),
            ("old", old_kernel(false)),
        ] {
            let t = two_functions();
            let f = open_all(&t.sysfs(), &ops, &[]);
            assert!(f.notes.is_empty(), "{what}: {:?}", f.notes);
            assert_eq!(f.hardware.len(), 2, "{what}");
            assert_eq!(
                *ops.state.bar_maps.lock().unwrap(),
                vec![(0, 0..0x1000), (0, 0..0x1000)],
                "{what}"
            );
            assert!(ops.state.memory_maps.lock().unwrap().is_empty(), "{what}");
        }
        // The fake refuses what old vfio-pci refuses.
        let ops = old_kernel(false);
        let t = two_functions();
        let f = open_all(&t.sysfs(), &ops, &[]);
        let c = ops.open_container().unwrap();
        let dev = c.open_device(&scan(&t.sysfs()).unwrap()[0]).unwrap();
        assert!(dev.map_bar(0, 0..0x4000).is_err(), "the whole BAR");
        assert!(dev.map_bar(0, 0..0x2000).is_err(), "over the table's page");
        assert!(dev.map_bar(0, 0x2000..0x3000).is_ok(), "after it");
        drop(f);
        // A table on the register page of an old kernel: left out, and
        // the note says why.
        let ops = FakeVfio {
            msix: Some(0x800),
            ..old_kernel(false)
        };
        let (n, s) = notes(&two_functions(), &ops, &[]);
        assert_eq!(n, 0);
        assert!(
            s.contains("cannot map BAR0 (the registers (0x0..0x1000) share pages with the MSI-X table (0x800..0x810)"),
            "{s}"
        );
    }

    /// The module on the functions of `t` behind `ops`, its mapper
    /// registered as the binaries do.
    fn started_behind(t: &FakeSysfs, ops: &FakeVfio) -> Ioat {
        let f = open_all(&t.sysfs(), ops, &[]);
        assert!(f.notes.is_empty(), "{:?}", f.notes);
        let devices = IoatDevices::new(
            f.hardware,
            &DriverConfig::default(),
            f.mapper.expect("a container mapper once a device is open"),
            f.notes,
        );
        let mapping = register_mapper(devices.mapper());
        devices.start(mapping)
    }

    #[test]
    fn iovas_come_from_the_ranges_the_iommu_reports_and_the_suite_passes_through_them() {
        // An IOMMU of 39 bits (the smallest VT-d), with DMA regions whose
        // virtual addresses lie far above 2^39: IOVA = VA fails there.
        let t = two_functions();
        let ops = FakeVfio {
            iova_bits: 39,
            ..ioat_vfio()
        };
        let ioat = Arc::new(started_behind(&t, &ops));
        assert_eq!(ioat.channels(), 2, "{:?}", ioat.notes());
        let accel = Accel::new(vec![ioat.clone() as Arc<dyn Module>], &[]).unwrap();
        let a = accel.clone();
        std::thread::spawn(move || conformance::run_all(&a, 1 << 20))
            .join()
            .unwrap();
        assert_eq!(ioat.totals().failed, 0);
        let iovas = ops.state.iovas.lock().unwrap().clone();
        assert!(iovas.len() >= 3, "the rings and the arena: {iovas:x?}");
        assert!(
            iovas
                .iter()
                .all(|&i| i >> 39 == 0 && !MSI_WINDOW.contains(&i)),
            "{iovas:x?}"
        );
        assert!(
            crate::env::dma::live_regions()
                .iter()
                .any(|&(va, _)| va as u64 >> 39 != 0),
            "this test needs DMA regions above 2^39"
        );
        drop(accel);
        drop(ioat);
        assert_eq!(
            ops.state.maps.load(Ordering::Relaxed),
            ops.state.unmaps.load(Ordering::Relaxed)
        );
        assert!(ops.state.mapped.lock().unwrap().is_empty());
        // 46 and 48 bits, and a kernel that reports no ranges (the
        // fallback lies below 2^39): the channels start, every IOVA fits.
        for (bits, report) in [(46, true), (48, true), (39, false)] {
            let ops = FakeVfio {
                iova_bits: bits,
                report_iovas: report,
                ..ioat_vfio()
            };
            let ioat = started_behind(&t, &ops);
            assert_eq!(ioat.channels(), 2, "{bits}: {:?}", ioat.notes());
            let iovas = ops.state.iovas.lock().unwrap().clone();
            assert!(iovas.iter().all(|&i| i >> bits == 0), "{bits}: {iovas:x?}");
        }
    }

    #[test]
    fn this_host_has_no_usable_ioat_and_says_why() {
        // The real backend, on this machine's sysfs: no I/OAT function is
        // bound to vfio-pci here, so the module has no channel and notes.
        let devices = IoatDevices::open(&IoatOptions {
            hardware: true,
            ..IoatOptions::default()
        })
        .unwrap();
        let mapping = register_mapper(devices.mapper());
        let ioat = devices.start(mapping);
        if ioat.channels() == 0 {
            assert!(!ioat.supports(Opcode::Copy));
            let notes = ioat.notes().join("\n");
            assert!(notes.contains("run on the software module"), "{notes}");
            assert!(ioat.notes().len() >= 2, "{notes}");
        }
    }
}
