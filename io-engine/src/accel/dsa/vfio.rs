//! The VFIO backend's device configuration: what a userspace driver does
//! to a DSA function bound to vfio-pci before it can submit (SPDK's
//! `lib/idxd/idxd_user.c`, Linux `idxd_device_config`), through BAR0
//! registers seen as I/OAT's [`Registers`] seam: read the capabilities
//! (VERSION, GENCAP, WQCAP, GRPCAP, ENGCAP, OPCAP, the table offsets),
//! reset a device left enabled, put WQ 0 and every engine in group 0,
//! configure WQ 0 as a dedicated WQ of every entry with the device's
//! transfer and batch limits, enable the device, then the WQ (CMD and
//! CMDSTS, DSA spec "Registers"), and report the WQ as [`WqInfo`].
//!
//! Not written yet (see docs/dsa.md): opening the function through VFIO
//! and mapping BAR2 (WQ 0's portal at [`spec::portal_offset`]), which
//! needs I/OAT's VFIO device plumbing to map a second BAR. Everything here
//! is tested against a fake register file.
//!
//! Thread: the thread that builds the module.

use std::time::{Duration, Instant};

use super::portal::{WqInfo, WqMode};
use super::spec::{self, cmd, cmdsts, gencap, gensts, grpcfg, offsets, wqcap, wqcfg};
use crate::accel::ioat::Registers;

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

    use super::*;
    use crate::accel::dsa::spec::opcode;

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
        let cmds: Vec<u32> = writes
            .iter()
            .filter(|(o, _)| *o == spec::CMD)
            .map(|(_, v)| cmd::command(*v as u32))
            .collect();
        assert_eq!(
            cmds,
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
}
