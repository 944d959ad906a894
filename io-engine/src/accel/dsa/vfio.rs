//! The VFIO backend: DSA functions bound to vfio-pci, driven entirely
//! from userspace (after SPDK's `lib/idxd/idxd_user.c`).
//!
//! [`open_all`] finds the DSA functions in sysfs (the PCI ids of
//! [`spec::DEVICE_IDS`]) and opens those bound to vfio-pci with the VFIO
//! plumbing env provides and I/OAT's backend uses too ([`open_functions`]:
//! notes with the bind commands for a function on another driver, the
//! IOMMU, hugepage and container checks, one container and its IOMMU
//! mapper).
//! For each function it turns bus mastering on, maps BAR0 and runs
//! [`configure`], maps BAR2's page of WQ 0's portal
//! ([`spec::portal_offset`]) and builds a [`Portal`] on it (dedicated WQ,
//! MOVDIR64B); addresses in descriptors are the IOVAs of the container's
//! mappings ([`MappedMemory`]).
//!
//! [`configure`] is what a userspace driver does to the function before it
//! can submit (Linux `idxd_device_config`), through BAR0 registers seen
//! through the [`Registers`] seam: read the capabilities (VERSION, GENCAP,
//! WQCAP, GRPCAP, ENGCAP, OPCAP, the table offsets), reset a device left
//! enabled, put WQ 0 and every engine in group 0, configure WQ 0 as a
//! dedicated WQ of every entry with the device's transfer and batch
//! limits, enable the device, then the WQ (CMD and CMDSTS, DSA spec
//! "Registers"), and report the WQ as [`WqInfo`].
//!
//! Everything is tested against a fake sysfs tree, a fake VFIO and a fake
//! register file; no run on hardware has been made (docs/dsa.md).
//!
//! Thread: the thread that builds the module discovers, opens and
//! configures; a [`VfioWq`] is then submitted to by the reactor holding
//! its channel (and dropped, resetting the function, by whichever thread
//! drops the module).

use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::driver::Hardware;
use super::portal::{Portal, Retry, WorkQueue, WqInfo, WqMode};
use super::spec::{
    self, Descriptor, PortalKind, cmd, cmdsts, gencap, gensts, grpcfg, offsets, swerr, wqcap, wqcfg,
};
use crate::env::dma::{DmaMapper, DmaMemory, IovaMap, MappedMemory};
use crate::env::vfio::{
    BarMemory, Kind, MsixTable, PciConfig, PciFunction, RegionInfo, Registers, SysfsRoot,
    VfioConfig, VfioDeviceOps, VfioOps, open_functions, scan_ids,
};

/// How the shared VFIO steps name this backend in their notes.
pub const KIND: Kind = Kind {
    tag: "dsa",
    what: "DSA through VFIO",
    kernel_driver: "idxd",
    kernel_hint: " (or leave it on idxd and configure a user work queue with accel-config, \
                  docs/dsa.md)",
};

/// How long each configuration step may take.
pub const CONFIGURE_TIMEOUT: Duration = Duration::from_secs(1);

/// What [`open_all`] found.
pub struct Found {
    /// WQ 0 of each function opened and configured, as the driver's
    /// hardware.
    pub hardware: Vec<Hardware>,
    /// Maps every DMA region into the functions' VFIO container (the
    /// IOMMU) once registered with env; `None` when no function was
    /// opened.
    pub mapper: Option<Arc<dyn DmaMapper>>,
    /// One line per finding, each telling what to do.
    pub notes: Vec<String>,
}

/// Finds the DSA functions under `root` and opens each one bound to
/// vfio-pci through `ops`. With `quiet` (the idxd backend already gave
/// work queues) functions left on idxd, and the absence of any DSA
/// function, are not noted.
pub fn open_all(root: &SysfsRoot, ops: &dyn VfioOps, quiet: bool) -> Found {
    let mut notes = Vec::new();
    let functions = match scan_ids(root, spec::is_dsa) {
        Ok(f) => f,
        Err(e) => {
            if !quiet {
                notes.push(format!(
                    "dsa: cannot read {} ({e}); is sysfs mounted? DSA through VFIO is not used",
                    root.pci_devices().display()
                ));
            }
            return Found {
                hardware: Vec::new(),
                mapper: None,
                notes,
            };
        }
    };
    let functions: Vec<PciFunction> = functions
        .into_iter()
        .filter(|f| !(quiet && f.driver.as_deref() == Some(KIND.kernel_driver)))
        .collect();
    if functions.is_empty() {
        if !quiet {
            notes.push(format!(
                "dsa: no DSA function in {} (Intel vendor 0x8086, device {}); this host has no \
                 DSA (Sapphire Rapids and later Xeons), or it is disabled in the firmware",
                root.pci_devices().display(),
                spec::DEVICE_IDS
                    .iter()
                    .map(|d| format!("{d:#06x}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        return Found {
            hardware: Vec::new(),
            mapper: None,
            notes,
        };
    }
    let (hardware, mapper) = open_functions(
        root,
        ops,
        KIND,
        functions,
        &mut notes,
        |f, dev, map, notes| match open_one(&f.bdf, dev, map) {
            Ok(wq) => Some(Hardware {
                wq: Arc::new(wq),
                keep: None,
            }),
            Err(e) => {
                notes.push(format!("{e}; it is not used"));
                None
            }
        },
    );
    Found {
        hardware,
        mapper,
        notes,
    }
}

/// The BAR2 window of WQ 0's portal (the unlimited MSI-X one), checked
/// against what VFIO says of BAR2.
pub fn portal_window(bar2: &RegionInfo) -> Result<Range<u64>, String> {
    let start = spec::portal_offset(
        0,
        PortalKind {
            limited: false,
            ims: false,
        },
    ) as u64;
    let w = start..start + spec::PORTAL_SIZE as u64;
    if !bar2.mmap {
        return Err("BAR2 (the portals) cannot be mmapped".into());
    }
    if bar2.size < w.end {
        return Err(format!(
            "BAR2 is only {} bytes: WQ 0's portal is at {:#x}..{:#x}",
            bar2.size, w.start, w.end
        ));
    }
    if let Some(areas) = &bar2.sparse
        && !areas.iter().any(|a| a.start <= w.start && w.end <= a.end)
    {
        return Err(format!(
            "no mmappable part of BAR2 holds WQ 0's portal ({:#x}..{:#x})",
            w.start, w.end
        ));
    }
    Ok(w)
}

/// Bus mastering, BAR0, the configuration, BAR2's portal page: WQ 0 of
/// the function `name`, opened as `dev`, its memory translated through
/// `map`. Errors are messages naming the function. A function that fails
/// part way is reset (a device left enabled
/// must not keep a configuration nobody uses).
pub fn open_one(
    name: &str,
    dev: Arc<dyn VfioDeviceOps>,
    map: &Arc<IovaMap>,
) -> Result<VfioWq, String> {
    let r = open_parts(name, &dev);
    match r {
        Ok((portal, page, regs, info)) => Ok(VfioWq {
            portal,
            _page: page,
            regs: Mutex::new(regs),
            info,
            memory: MappedMemory::new(map.clone()),
            dev,
        }),
        Err(e) => {
            dev.reset();
            Err(e)
        }
    }
}

/// What [`open_one`] maps and configures: the portal, its page, BAR0 and
/// WQ 0's description.
type Parts = (Portal, Box<dyn BarMemory>, Box<dyn Registers>, WqInfo);

fn open_parts(name: &str, dev: &Arc<dyn VfioDeviceOps>) -> Result<Parts, String> {
    // Bus master enable (SPDK's `idxd_user` probe, through the PCI layer).
    VfioConfig(dev.clone()).set_bus_master(true);
    let bar0 = dev.bar_info(spec::MMIO_BAR);
    let msix = MsixTable::find(|off| dev.config_read16(off)).filter(|t| t.bar == 0);
    // All of BAR0: the WQCFG and GRPCFG tables sit where OFFSETS says.
    let window = bar0
        .register_window(bar0.size, msix.as_ref().map(|t| &t.table))
        .map_err(|e| format!("dsa {name}: cannot map BAR0: {e}"))?;
    let regs = dev
        .map_bar(spec::MMIO_BAR, window)
        .map_err(|e| format!("dsa {name}: cannot map BAR0 ({e}); check `dmesg`"))?;
    // Its messages name the function already.
    let configured = configure(regs.as_ref(), name, CONFIGURE_TIMEOUT)?;
    let window =
        portal_window(&dev.bar_info(spec::WQ_BAR)).map_err(|e| format!("dsa {name}: {e}"))?;
    let page = dev.map_bar_memory(spec::WQ_BAR, window).map_err(|e| {
        format!("dsa {name}: cannot map WQ 0's portal in BAR2 ({e}); check `dmesg`")
    })?;
    if page.len() < spec::PORTAL_SIZE {
        return Err(format!(
            "dsa {name}: the portal mapping is only {} bytes",
            page.len()
        ));
    }
    // SAFETY: `page` maps WQ 0's portal page of BAR2 (uncached: vfio-pci
    // maps BARs so), kept in the `VfioWq` next to the portal and dropped
    // after it (field order); `configure` made WQ 0 dedicated.
    let portal = unsafe { Portal::new(page.addr(), WqMode::Dedicated) }
        .map_err(|e| format!("dsa {name}: {e}"))?;
    Ok((portal, page, regs, configured.wq))
}

/// SWERR, when it holds an error (then acknowledged), and the device's
/// state when it is not enabled; `None` when all is well.
pub fn device_error(regs: &dyn Registers) -> Option<String> {
    let w0 = regs.read64(spec::SWERR);
    let st = gensts::state(regs.read32(spec::GENSTS));
    let mut parts = Vec::new();
    if w0 & swerr::VALID != 0 {
        let code = swerr::error(w0);
        parts.push(format!(
            "SWERR error {code:#x} ({}), operation {}{}",
            spec::status::name(code),
            swerr::operation(w0),
            if w0 & swerr::OVERFLOW != 0 {
                ", more errors were lost"
            } else {
                ""
            }
        ));
        // SAFETY: acknowledging SWERR (writing its valid and overflow
        // bits back, as Linux's `idxd_misc_thread`) starts no DMA.
        unsafe { regs.write64(spec::SWERR, w0 & swerr::ACK) };
    }
    if st != gensts::ENABLED {
        parts.push(format!("the device is {}", gensts::name(st)));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// WQ 0 of a DSA function opened through VFIO. Dropping it resets the
/// function (its WQ and device configuration go with it).
pub struct VfioWq {
    portal: Portal,
    _page: Box<dyn BarMemory>,
    /// BAR0, for SWERR and GENSTS (a lock: `Registers` is not `Sync`).
    regs: Mutex<Box<dyn Registers>>,
    info: WqInfo,
    memory: MappedMemory,
    dev: Arc<dyn VfioDeviceOps>,
}

// SAFETY: `submit` is one MOVDIR64B of the descriptor to the dedicated
// WQ's portal after a store fence (`Portal::submit`); `memory` gives the
// IOVAs at which the container's IOMMU maps each window (the container's
// mapper inserts a window only once the IOMMU maps it, and removes it
// before unmapping: `open_functions`' promise), so the device reaches
// exactly the buffers named; `info` is WQ 0 as `configure` wrote it and
// read it back (WQCFG's size and limits).
unsafe impl WorkQueue for VfioWq {
    fn info(&self) -> &WqInfo {
        &self.info
    }

    fn memory(&self) -> &dyn DmaMemory {
        &self.memory
    }

    unsafe fn submit(&self, desc: &Descriptor) -> Result<(), Retry> {
        // SAFETY: the caller's contract.
        unsafe { self.portal.submit(desc) }
    }

    /// SWERR and the device's state ([`device_error`]).
    fn device_error(&self) -> Option<String> {
        let regs = self.regs.lock().unwrap_or_else(PoisonError::into_inner);
        device_error(regs.as_ref())
    }
}

impl Drop for VfioWq {
    fn drop(&mut self) {
        self.dev.reset();
    }
}

/// What the configuration found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured {
    /// The version register.
    pub version: u32,
    /// WQ 0 as configured.
    pub wq: WqInfo,
    /// Engines put in group 0.
    pub engines: u32,
}

/// Reads the capabilities and configures and enables WQ 0 of the device
/// behind `regs` (bus mastering must be on: enabling the device checks
/// it). `name` names it in messages; each step waits at most `timeout`.
pub fn configure(
    regs: &dyn Registers,
    name: &str,
    timeout: Duration,
) -> Result<Configured, String> {
    let version = regs.read32(spec::VERSION);
    let gcap = regs.read64(spec::GENCAP);
    let wcap = regs.read64(spec::WQCAP);
    let engines = (regs.read64(spec::ENGCAP) & spec::ENGCAP_ENGINES_MASK) as u32;
    let opcap = [0, 1, 2, 3].map(|i| regs.read64(spec::OPCAP + 8 * i));
    let table = regs.read64(spec::OFFSETS);
    if wqcap::num_wqs(wcap) == 0 || wqcap::total_size(wcap) == 0 {
        return Err(format!("dsa {name}: WQCAP {wcap:#x} reports no work queue"));
    }
    if engines == 0 {
        return Err(format!("dsa {name}: ENGCAP reports no engine"));
    }
    if wcap & wqcap::DEDICATED == 0 {
        return Err(format!(
            "dsa {name}: WQCAP {wcap:#x}: no dedicated work queues (the driver submits with \
             MOVDIR64B to a dedicated WQ through VFIO: shared WQs need a PASID)"
        ));
    }
    if gcap & gencap::CONFIG_SUPPORT == 0 {
        return Err(format!(
            "dsa {name}: GENCAP {gcap:#x}: the configuration is not writable (the device comes \
             configured; use it through the kernel's idxd driver, --dsa)"
        ));
    }
    if gensts::state(regs.read32(spec::GENSTS)) != gensts::DISABLED {
        command(regs, name, cmd::RESET_DEVICE, 0, timeout)?;
        if gensts::state(regs.read32(spec::GENSTS)) != gensts::DISABLED {
            return Err(format!("dsa {name}: still enabled after a device reset"));
        }
    }
    // Group 0: WQ 0 and every engine.
    let g = offsets::grpcfg(table);
    // SAFETY: configuration registers of a disabled device; none starts
    // DMA (only a WQ's portal does, and no descriptor is submitted here).
    unsafe {
        regs.write64(g + grpcfg::WQS, 1);
        for w in 1..4 {
            regs.write64(g + grpcfg::WQS + 8 * w, 0);
        }
        let mask = if engines >= 64 {
            u64::MAX
        } else {
            (1 << engines) - 1
        };
        regs.write64(g + grpcfg::ENGINES, mask);
        regs.write32(g + grpcfg::FLAGS, 0);
    }
    // WQ 0: dedicated, every entry, priority 1, the device's limits.
    let size = wqcap::total_size(wcap);
    let xfer_shift = ((gcap >> 16) & 0x1f) as u32;
    let batch_shift = ((gcap >> 21) & 0xf) as u32;
    let w = offsets::wqcfg(table);
    let entry = wqcap::wqcfg_size(wcap);
    let dw = |d: usize| wqcfg::offset(w, entry, 0, d);
    // SAFETY: configuration registers of a disabled device, as above.
    unsafe {
        regs.write32(dw(wqcfg::SIZE), size);
        regs.write32(dw(wqcfg::THRESHOLD), 0);
        regs.write32(dw(wqcfg::MODE), wqcfg::MODE_DEDICATED | wqcfg::priority(1));
        regs.write32(dw(wqcfg::MAX), wqcfg::max(xfer_shift, batch_shift));
    }
    command(regs, name, cmd::ENABLE_DEVICE, 0, timeout)?;
    let st = regs.read32(spec::GENSTS);
    if gensts::state(st) != gensts::ENABLED {
        return Err(format!(
            "dsa {name}: the device is {} after enable",
            gensts::name(gensts::state(st))
        ));
    }
    command(regs, name, cmd::ENABLE_WQ, 0, timeout)?;
    if wqcfg::state(regs.read32(dw(wqcfg::STATE))) != wqcfg::STATE_ENABLED {
        return Err(format!("dsa {name}: WQ 0 is not enabled after enable"));
    }
    let max = regs.read32(dw(wqcfg::MAX));
    Ok(Configured {
        version,
        engines,
        wq: WqInfo {
            name: format!("{name}/wq0"),
            mode: WqMode::Dedicated,
            size,
            max_transfer: wqcfg::max_transfer(max),
            max_batch: wqcfg::max_batch(max),
            opcap,
            block_on_fault: false,
        },
    })
}

/// Writes command `c` with `operand` to CMD and waits for CMDSTS to say it
/// finished; an error code becomes a message.
fn command(
    regs: &dyn Registers,
    name: &str,
    c: u32,
    operand: u32,
    timeout: Duration,
) -> Result<(), String> {
    // SAFETY: device and WQ commands (reset, enable) start no DMA: only a
    // descriptor written to a portal does.
    unsafe { regs.write32(spec::CMD, cmd::value(c, operand)) };
    let start = Instant::now();
    loop {
        let st = regs.read32(spec::CMDSTS);
        if st & cmdsts::ACTIVE == 0 {
            return match cmdsts::err(st) {
                cmdsts::SUCCESS => Ok(()),
                e => Err(format!(
                    "dsa {name}: command {c} failed: CMDSTS error {e:#x} ({})",
                    cmd_error(e)
                )),
            };
        }
        if start.elapsed() > timeout {
            return Err(format!(
                "dsa {name}: command {c} still active after {timeout:?}"
            ));
        }
        std::thread::sleep(Duration::from_micros(10));
    }
}

/// CMDSTS error codes by name.
fn cmd_error(e: u32) -> &'static str {
    match e {
        cmdsts::INVAL_CMD => "invalid command",
        cmdsts::INVAL_WQIDX => "invalid WQ index",
        cmdsts::HW_ERR => "hardware error",
        cmdsts::ERR_DEV_ENABLED => "the device is already enabled",
        cmdsts::ERR_CONFIG => "configuration error",
        cmdsts::ERR_BUSMASTER_EN => "bus mastering is off",
        cmdsts::ERR_WQ_SIZE_ERANGE => "WQ sizes above the total",
        cmdsts::ERR_GRP_CONFIG => "group configuration error",
        cmdsts::ERR_DEV_NOTEN => "the device is not enabled",
        cmdsts::ERR_WQ_SIZE => "WQ size 0",
        cmdsts::ERR_WQ_MODE => "WQ mode not supported",
        cmdsts::ERR_MAX_BATCH_SIZE => "WQ maximum batch size above GENCAP's",
        cmdsts::ERR_MAX_XFER_SIZE => "WQ maximum transfer size above GENCAP's",
        _ => "see the DSA specification, Command Status",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::accel::dsa::spec::opcode;
    use crate::env::vfio::fake::{FakeFunction, FakeSysfs, FakeVfio};

    /// A DSA register file: 8 KiB of BAR0, with CMD acting on GENSTS and
    /// the WQ state, and a log of every write.
    struct Fake {
        mem: Mutex<Vec<u8>>,
        writes: Mutex<Vec<(usize, u64)>>,
        /// CMDSTS error for this command, if any.
        fail: Option<(u32, u32)>,
        bus_master: bool,
    }

    const WQCFG_TABLE: usize = 0x500;
    const GRPCFG_TABLE: usize = 0x400;

    impl Fake {
        fn new(enabled: bool) -> Fake {
            let f = Fake {
                mem: Mutex::new(vec![0; 0x2000]),
                writes: Mutex::new(Vec::new()),
                fail: None,
                bus_master: true,
            };
            f.put64(spec::VERSION, 0x100);
            f.put64(
                spec::GENCAP,
                gencap::with_shifts(gencap::CONFIG_SUPPORT | gencap::BLOCK_ON_FAULT, 31, 10),
            );
            f.put64(
                spec::WQCAP,
                wqcap::DEDICATED | wqcap::SHARED | (8 << 16) | 128,
            );
            f.put64(spec::ENGCAP, 4);
            let caps = spec::opcap_of(&[opcode::MEMMOVE, opcode::BATCH, opcode::CRCGEN]);
            for (i, c) in caps.iter().enumerate() {
                f.put64(spec::OPCAP + 8 * i, *c);
            }
            f.put64(
                spec::OFFSETS,
                (((WQCFG_TABLE / offsets::MULT) << 16) | (GRPCFG_TABLE / offsets::MULT)) as u64,
            );
            if enabled {
                f.put64(spec::GENSTS, gensts::ENABLED as u64);
            }
            f
        }

        fn put64(&self, off: usize, v: u64) {
            self.mem.lock().unwrap()[off..off + 8].copy_from_slice(&v.to_le_bytes());
        }

        fn get(&self, off: usize, n: usize) -> u64 {
            let m = self.mem.lock().unwrap();
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&m[off..off + n]);
            u64::from_le_bytes(b)
        }

        fn set(&self, off: usize, n: usize, v: u64) {
            self.mem.lock().unwrap()[off..off + n].copy_from_slice(&v.to_le_bytes()[..n]);
        }

        fn run(&self, v: u32) {
            let c = cmd::command(v);
            let err = match self.fail {
                Some((fc, e)) if fc == c => e,
                _ => match c {
                    cmd::ENABLE_DEVICE if !self.bus_master => cmdsts::ERR_BUSMASTER_EN,
                    cmd::ENABLE_DEVICE => {
                        self.set(spec::GENSTS, 4, gensts::ENABLED as u64);
                        0
                    }
                    cmd::RESET_DEVICE => {
                        self.set(spec::GENSTS, 4, gensts::DISABLED as u64);
                        0
                    }
                    cmd::ENABLE_WQ => {
                        let off = wqcfg::offset(WQCFG_TABLE, 32, cmd::operand(v) as usize, 6);
                        self.set(off, 4, 1 << 30);
                        0
                    }
                    _ => cmdsts::INVAL_CMD,
                },
            };
            self.set(spec::CMDSTS, 4, err as u64);
        }
    }

    impl Registers for Fake {
        fn read8(&self, off: usize) -> u8 {
            self.get(off, 1) as u8
        }
        fn read16(&self, off: usize) -> u16 {
            self.get(off, 2) as u16
        }
        fn read32(&self, off: usize) -> u32 {
            self.get(off, 4) as u32
        }
        fn read64(&self, off: usize) -> u64 {
            self.get(off, 8)
        }
        unsafe fn write8(&self, off: usize, v: u8) {
            self.set(off, 1, v as u64);
        }
        unsafe fn write16(&self, off: usize, v: u16) {
            self.set(off, 2, v as u64);
        }
        unsafe fn write32(&self, off: usize, v: u32) {
            self.writes.lock().unwrap().push((off, v as u64));
            self.set(off, 4, v as u64);
            if off == spec::CMD {
                self.run(v);
            }
        }
        unsafe fn write64(&self, off: usize, v: u64) {
            self.writes.lock().unwrap().push((off, v));
            self.set(off, 8, v);
        }
    }

    const T: Duration = Duration::from_millis(100);

    /// The commands written to CMD, in order.
    fn commands(f: &Fake) -> Vec<u32> {
        f.writes
            .lock()
            .unwrap()
            .iter()
            .filter(|(o, _)| *o == spec::CMD)
            .map(|(_, v)| cmd::command(*v as u32))
            .collect()
    }

    #[test]
    fn configures_group_0_and_a_dedicated_wq_then_enables_both() {
        let f = Fake::new(true);
        let c = configure(&f, "0000:6a:01.0", T).unwrap();
        assert_eq!(c.engines, 4);
        assert_eq!(c.wq.mode, WqMode::Dedicated);
        assert_eq!(c.wq.size, 128);
        assert_eq!(c.wq.max_transfer, 1 << 31);
        assert_eq!(c.wq.max_batch, 1024);
        assert!(c.wq.supports(opcode::CRCGEN) && !c.wq.supports(opcode::COMPARE));
        let writes = f.writes.lock().unwrap().clone();
        assert_eq!(
            commands(&f),
            vec![cmd::RESET_DEVICE, cmd::ENABLE_DEVICE, cmd::ENABLE_WQ],
            "an enabled device is reset first"
        );
        let at = |off: usize| writes.iter().position(|(o, _)| *o == off).unwrap();
        let wq_mode = wqcfg::offset(WQCFG_TABLE, 32, 0, wqcfg::MODE);
        // Configuration before the device is enabled.
        let enable = writes
            .iter()
            .position(|(o, v)| *o == spec::CMD && cmd::command(*v as u32) == cmd::ENABLE_DEVICE)
            .unwrap();
        assert!(at(GRPCFG_TABLE + grpcfg::ENGINES) < enable);
        assert!(at(wq_mode) < enable);
        assert_eq!(f.read64(GRPCFG_TABLE + grpcfg::WQS), 1);
        assert_eq!(f.read64(GRPCFG_TABLE + grpcfg::ENGINES), 0xf);
        assert_eq!(
            f.read32(wq_mode),
            wqcfg::MODE_DEDICATED | wqcfg::priority(1)
        );
        assert_eq!(
            f.read32(wqcfg::offset(WQCFG_TABLE, 32, 0, wqcfg::SIZE)),
            128
        );
    }

    #[test]
    fn command_errors_and_missing_capabilities_are_named() {
        let mut f = Fake::new(false);
        f.bus_master = false;
        let e = configure(&f, "d", T).unwrap_err();
        assert!(e.contains("bus mastering is off"), "{e}");
        let mut f = Fake::new(false);
        f.fail = Some((cmd::ENABLE_WQ, cmdsts::ERR_MAX_XFER_SIZE));
        let e = configure(&f, "d", T).unwrap_err();
        assert!(e.contains("maximum transfer size"), "{e}");
        let f = Fake::new(false);
        f.put64(spec::WQCAP, wqcap::SHARED | (8 << 16) | 128);
        let e = configure(&f, "d", T).unwrap_err();
        assert!(e.contains("no dedicated work queues"), "{e}");
        let f = Fake::new(false);
        f.put64(spec::GENCAP, 0);
        assert!(configure(&f, "d", T).unwrap_err().contains("not writable"));
        let f = Fake::new(false);
        f.put64(spec::ENGCAP, 0);
        assert!(configure(&f, "d", T).unwrap_err().contains("no engine"));
    }

    // -----------------------------------------------------------------
    // Discovery and opening, on a fake sysfs tree and a fake VFIO
    // -----------------------------------------------------------------

    /// A fake sysfs tree for these tests.
    fn tree() -> FakeSysfs {
        FakeSysfs::new("dsa-vfio")
    }

    /// The register file of the function last opened behind a fake VFIO.
    type LastRegs = Arc<Mutex<Option<Arc<Fake>>>>;

    /// VFIO with DSA register files behind it: BAR0 of 8 KiB, BAR2 of
    /// 128 KiB (as Linux's idxd sizes it for 8 WQs), no MSI-X capability;
    /// the register file of the function last opened goes to the
    /// [`LastRegs`] returned.
    fn dsa_vfio() -> (FakeVfio, LastRegs) {
        let last: LastRegs = Arc::default();
        let bar = |size| RegionInfo {
            size,
            mmap: true,
            sparse: None,
            msix_mappable: true,
        };
        let l = last.clone();
        let vfio = FakeVfio::new(
            vec![bar(0x2000), RegionInfo::default(), bar(0x20000)],
            Arc::new(move |_, _| {
                let regs = Arc::new(Fake::new(true));
                *l.lock().unwrap() = Some(regs.clone());
                Arc::new(Bar0(regs))
            }),
        );
        (vfio, last)
    }

    /// The register file as the function behind a fake device (no
    /// configuration space but the command register, which the fake
    /// keeps), and as its mapped BAR0.
    struct Bar0(Arc<Fake>);

    impl FakeFunction for Bar0 {
        fn registers(&self, index: u32) -> Box<dyn Registers> {
            assert_eq!(index, spec::MMIO_BAR, "registers are in BAR0 only");
            Box::new(Bar0(self.0.clone()))
        }
    }

    impl Registers for Bar0 {
        fn read8(&self, off: usize) -> u8 {
            self.0.read8(off)
        }
        fn read16(&self, off: usize) -> u16 {
            self.0.read16(off)
        }
        fn read32(&self, off: usize) -> u32 {
            self.0.read32(off)
        }
        fn read64(&self, off: usize) -> u64 {
            self.0.read64(off)
        }
        unsafe fn write8(&self, off: usize, v: u8) {
            // SAFETY: the caller's contract (a fake: no DMA).
            unsafe { self.0.write8(off, v) }
        }
        unsafe fn write16(&self, off: usize, v: u16) {
            // SAFETY: as above.
            unsafe { self.0.write16(off, v) }
        }
        unsafe fn write32(&self, off: usize, v: u32) {
            // SAFETY: as above.
            unsafe { self.0.write32(off, v) }
        }
        unsafe fn write64(&self, off: usize, v: u64) {
            // SAFETY: as above.
            unsafe { self.0.write64(off, v) }
        }
    }

    #[test]
    fn finds_dsa_functions_and_notes_the_ones_on_other_drivers() {
        let t = tree();
        // An I/OAT function on vfio-pci is not DSA's.
        t.function("0000:00:04.0", 0x8086, 0x2021, Some("vfio-pci"), Some(3));
        t.function("0000:6a:01.0", 0x8086, 0x0b25, Some("idxd"), Some(10));
        t.function("0000:e7:01.0", 0x8086, 0x0b25, None, Some(11));
        let fns = scan_ids(&t.sysfs(), spec::is_dsa).unwrap();
        let bdfs: Vec<&str> = fns.iter().map(|f| f.bdf.as_str()).collect();
        assert_eq!(bdfs, ["0000:6a:01.0", "0000:e7:01.0"]);
        let (vfio, _) = dsa_vfio();
        let found = open_all(&t.sysfs(), &vfio, false);
        assert!(found.hardware.is_empty() && found.mapper.is_none());
        let n = found.notes.join("\n");
        assert!(
            n.contains(
                "dsa 0000:6a:01.0 (8086:0b25): bound to the kernel's idxd driver; bind it to \
                 vfio-pci: `modprobe vfio-pci; echo 0000:6a:01.0 > \
                 /sys/bus/pci/devices/0000:6a:01.0/driver/unbind;"
            ) && n.contains("accel-config"),
            "{n}"
        );
        assert!(
            n.contains("dsa 0000:e7:01.0 (8086:0b25): bound to no driver; bind it to vfio-pci"),
            "{n}"
        );
        assert!(vfio.state.opened.lock().unwrap().is_empty());
        // When idxd gave work queues, functions left on it are not noted.
        let found = open_all(&t.sysfs(), &vfio, true);
        let n = found.notes.join("\n");
        assert!(
            !n.contains("0000:6a:01.0") && n.contains("0000:e7:01.0"),
            "{n}"
        );
        // No DSA function at all.
        let t = tree();
        let n = open_all(&t.sysfs(), &vfio, false).notes.join("\n");
        assert!(
            n.contains("no DSA function in") && n.contains("0x0b25"),
            "{n}"
        );
        assert!(open_all(&t.sysfs(), &vfio, true).notes.is_empty());
    }

    #[test]
    fn opens_configures_and_maps_wq_0s_portal() {
        let t = tree();
        t.function("0000:6a:01.0", 0x8086, 0x0b25, Some("vfio-pci"), Some(10));
        let (vfio, last) = dsa_vfio();
        let found = open_all(&t.sysfs(), &vfio, false);
        let seen = &vfio.state;
        assert_eq!(*seen.opened.lock().unwrap(), ["0000:6a:01.0"]);
        // Bus mastering on (bit 2 of the command register).
        assert!(seen.command.lock().unwrap()["0000:6a:01.0"] & 0x4 != 0);
        // BAR0 whole, then the configuration sequence on it.
        assert_eq!(*seen.bar_maps.lock().unwrap(), [(0, 0..0x2000)]);
        let regs = last.lock().unwrap().clone().unwrap();
        assert_eq!(
            commands(&regs),
            [cmd::RESET_DEVICE, cmd::ENABLE_DEVICE, cmd::ENABLE_WQ]
        );
        // BAR2: WQ 0's unlimited MSI-X portal, one page.
        assert_eq!(*seen.memory_maps.lock().unwrap(), [(2, 0..0x1000)]);
        if crate::accel::dsa::portal::has_movdir64b() {
            assert_eq!(found.hardware.len(), 1, "{:?}", found.notes);
            assert!(found.mapper.is_some());
            let wq = &found.hardware[0].wq;
            assert_eq!(wq.info().name, "0000:6a:01.0/wq0");
            assert_eq!(wq.info().mode, WqMode::Dedicated);
            assert_eq!(wq.info().size, 128);
            assert_eq!(wq.device_error(), None);
            drop(found);
            assert_eq!(seen.resets.load(Ordering::Relaxed), 1, "reset on drop");
        } else {
            // This CPU cannot submit to a dedicated WQ: a note says so.
            assert!(found.hardware.is_empty() && found.mapper.is_none());
            let n = found.notes.join("\n");
            assert!(
                n.contains("dsa 0000:6a:01.0: this CPU has no MOVDIR64B"),
                "{n}"
            );
            assert_eq!(
                seen.resets.load(Ordering::Relaxed),
                1,
                "a function refused after its configuration is reset"
            );
        }
    }

    #[test]
    fn a_portal_outside_bar2_is_refused() {
        let small = RegionInfo {
            size: 0x800,
            mmap: true,
            sparse: None,
            msix_mappable: true,
        };
        assert!(portal_window(&small).unwrap_err().contains("BAR2 is only"));
        let sparse = RegionInfo {
            size: 0x20000,
            mmap: true,
            sparse: Some(vec![0x4000..0x8000, 0x8000..0x20000]),
            msix_mappable: true,
        };
        assert!(
            portal_window(&sparse)
                .unwrap_err()
                .contains("no mmappable part")
        );
        let none = RegionInfo {
            mmap: false,
            ..sparse.clone()
        };
        assert!(
            portal_window(&none)
                .unwrap_err()
                .contains("cannot be mmapped")
        );
        let t = tree();
        t.function("0000:6a:01.0", 0x8086, 0x0b25, Some("vfio-pci"), Some(10));
        let (mut vfio, _) = dsa_vfio();
        vfio.bars[2] = small;
        let found = open_all(&t.sysfs(), &vfio, false);
        assert!(found.hardware.is_empty());
        assert!(vfio.state.memory_maps.lock().unwrap().is_empty());
        let n = found.notes.join("\n");
        assert!(
            n.contains("dsa 0000:6a:01.0: BAR2 is only 2048 bytes"),
            "{n}"
        );
        assert_eq!(vfio.state.resets.load(Ordering::Relaxed), 1, "reset");
    }

    #[test]
    fn device_error_reports_and_acknowledges_swerr() {
        let regs = Fake::new(true);
        assert_eq!(device_error(&regs), None, "an enabled device without SWERR");
        let w0 = swerr::VALID | ((spec::status::CRA_ALIGN as u64) << 8);
        regs.put64(spec::SWERR, w0);
        regs.put64(spec::GENSTS, gensts::HALT as u64);
        let e = device_error(&regs).unwrap();
        assert!(
            e.contains("SWERR error 0x1b (completion record address misaligned)")
                && e.contains("the device is halted"),
            "{e}"
        );
        let writes = regs.writes.lock().unwrap().clone();
        assert!(
            writes.contains(&(spec::SWERR, w0 & swerr::ACK)),
            "{writes:?}"
        );
    }
}
