//! The kernel idxd backend: work queues that the kernel's idxd driver
//! exposes as character devices (`/dev/dsa/wqD.Q`), configured by
//! `accel-config` as user work queues, opened and their portal page
//! mapped, as SPDK's kernel-mode idxd does (`lib/idxd/idxd_kernel.c`). No
//! VFIO: the device works in the process's address space through its
//! PASID (shared virtual addressing), so descriptors carry virtual
//! addresses ([`SvaMemory`]).
//!
//! Discovery reads sysfs under a root ([`SysfsRoot`]): every
//! `bus/dsa/devices/dsaN` and its `wqN.M` (`state`, `mode`, `type`,
//! `size`, `max_transfer_size`, `max_batch_size`), so the logic and every
//! message is tested against a fake tree. Each work queue that cannot be
//! used becomes a note saying which file says so and what to change.
//!
//! Thread: the thread that builds the module (the binaries' main thread).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::driver::Hardware;
use super::portal::{Portal, Retry, WorkQueue, WqInfo, WqMode};
use super::spec::{self, Descriptor, opcode};
use crate::env::dma::{DmaBuffer, DmaMemory, DmaRegion, Window};
use crate::env::vfio::SysfsRoot;

/// A user work queue found in sysfs, usable as far as sysfs can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserWq {
    /// `dsa0/wq0.1`.
    pub name: String,
    /// Its character device, `/dev/dsa/wq0.1`.
    pub cdev: PathBuf,
    /// Dedicated (MOVDIR64B) or shared (ENQCMD).
    pub dedicated: bool,
    /// Entries.
    pub size: u32,
    /// Largest transfer, bytes.
    pub max_transfer: u64,
    /// Most descriptors per batch.
    pub max_batch: u32,
    /// The device's operations (its `op_cap`).
    pub opcap: [u64; 4],
}

/// What discovery found: usable work queues, and a note for everything
/// that is not.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Work queues to open.
    pub wqs: Vec<UserWq>,
    /// One line per problem, saying what to change.
    pub notes: Vec<String>,
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn read_num(p: &Path) -> Option<u64> {
    read(p)?.parse().ok()
}

const CONFIGURE: &str = "configure one with accel-config, e.g. `accel-config config-wq \
     dsa0/wq0.0 --group-id=0 --mode=dedicated --type=user --name=io-engine --size=16 \
     --priority=10 && accel-config config-engine dsa0/engine0.0 --group-id=0 && accel-config \
     enable-device dsa0 && accel-config enable-wq dsa0/wq0.0` (see docs/dsa.md)";

/// The user work queues under `root` (all of them, or only the `wanted`
/// names such as `dsa0/wq0.1` or `wq0.1`), sorted by name, and notes for
/// the rest.
pub fn discover(root: &SysfsRoot, wanted: &[String]) -> Discovery {
    let mut d = Discovery::default();
    let bus = root.sys.join("bus/dsa");
    let devices = bus.join("devices");
    let entries = match std::fs::read_dir(&devices) {
        Ok(e) => e,
        Err(_) => {
            d.notes.push(format!(
                "dsa: no DSA device: {} does not exist (the idxd driver is not loaded, \
                 `modprobe idxd`, or this machine has no Data Streaming Accelerator: it comes \
                 with Xeon Sapphire Rapids and later)",
                bus.display()
            ));
            return d;
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    let devs: Vec<&String> = names.iter().filter(|n| is_device(n)).collect();
    if devs.is_empty() {
        d.notes.push(format!(
            "dsa: no DSA device under {}: this machine has no Data Streaming Accelerator \
             the idxd driver manages (an IAA device, iax*, is not one)",
            devices.display()
        ));
        return d;
    }
    for dev in devs {
        let dir = devices.join(dev);
        let state = read(&dir.join("state")).unwrap_or_default();
        if state != "enabled" {
            d.notes.push(format!(
                "dsa {dev}: the device is {} ({}): {CONFIGURE}",
                if state.is_empty() {
                    "in no known state"
                } else {
                    &state
                },
                dir.join("state").display()
            ));
            continue;
        }
        if read(&dir.join("pasid_enabled")).as_deref() == Some("0") {
            d.notes.push(format!(
                "dsa {dev}: shared virtual addressing is off ({} is 0): descriptors would \
                 need physical addresses; boot with the IOMMU in scalable mode \
                 (intel_iommu=on,sm_on) or use the device through VFIO",
                dir.join("pasid_enabled").display()
            ));
            continue;
        }
        let prefix = format!("wq{}.", &dev[3..]);
        let wqs: Vec<&String> = names.iter().filter(|n| n.starts_with(&prefix)).collect();
        let mut usable = 0;
        for wq in &wqs {
            let full = format!("{dev}/{wq}");
            if !wanted.is_empty() && !wanted.iter().any(|w| w == &full || w == *wq) {
                continue;
            }
            match check_wq(
                root,
                &devices.join(wq),
                dev,
                wq,
                op_cap(&dir.join("op_cap")),
            ) {
                Ok(info) => {
                    usable += 1;
                    d.wqs.push(info);
                }
                Err(note) => d.notes.push(note),
            }
        }
        if wqs.is_empty() {
            d.notes.push(format!(
                "dsa {dev}: no work queue is configured (no {prefix}* under {}): {CONFIGURE}",
                devices.display()
            ));
        } else if usable == 0 && wanted.is_empty() {
            d.notes.push(format!(
                "dsa {dev}: none of its {} work queues is an enabled user work queue",
                wqs.len()
            ));
        }
    }
    for w in wanted {
        let found = d
            .wqs
            .iter()
            .any(|q| &q.name == w || q.name.ends_with(&format!("/{w}")));
        let noted = d.notes.iter().any(|n| n.contains(w.as_str()));
        if !found && !noted {
            d.notes.push(format!(
                "dsa: no work queue {w} under {} (`accel-config list` shows them)",
                devices.display()
            ));
        }
    }
    d
}

/// The operations of DSA 1.0 ([`opcode::DSA1`]), assumed when a kernel
/// has no `op_cap`.
const DSA1_OPS: [u64; 4] = spec::opcap_of(opcode::DSA1);

/// A device's `op_cap` file: the 256-bit OPCAP as comma-separated 32-bit
/// hex words, most significant first (Linux prints the bitmap so); the
/// DSA 1.0 set when it is missing or unreadable.
fn op_cap(p: &Path) -> [u64; 4] {
    let Some(text) = read(p) else {
        return DSA1_OPS;
    };
    let words: Option<Vec<u32>> = text
        .split(',')
        .map(|w| u32::from_str_radix(w.trim().trim_start_matches("0x"), 16).ok())
        .collect();
    let Some(words) = words.filter(|w| !w.is_empty() && w.len() <= 8) else {
        return DSA1_OPS;
    };
    let mut caps = [0u64; 4];
    for (i, w) in words.iter().rev().enumerate() {
        caps[i / 2] |= (*w as u64) << (32 * (i % 2));
    }
    caps
}

/// `dsa0`, `dsa12`: a DSA device directory.
fn is_device(n: &str) -> bool {
    n.strip_prefix("dsa")
        .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether work queue `wq` of `dev` (its sysfs directory `dir`) can be
/// opened from userspace, and what it offers.
fn check_wq(
    root: &SysfsRoot,
    dir: &Path,
    dev: &str,
    wq: &str,
    opcap: [u64; 4],
) -> Result<UserWq, String> {
    let name = format!("{dev}/{wq}");
    let file = |f: &str| dir.join(f);
    let state = read(&file("state")).unwrap_or_default();
    if state != "enabled" {
        return Err(format!(
            "dsa {name}: the work queue is {} ({}): enable it with `accel-config enable-wq \
             {name}` once it is configured as a user work queue",
            if state.is_empty() {
                "in no known state"
            } else {
                &state
            },
            file("state").display()
        ));
    }
    let ty = read(&file("type")).unwrap_or_default();
    if ty != "user" {
        return Err(format!(
            "dsa {name}: the work queue's type is {:?} ({}), not \"user\": only a user work \
             queue has a character device a process can open; reconfigure it with \
             `accel-config config-wq {name} --type=user` (disable it first)",
            ty,
            file("type").display()
        ));
    }
    let dedicated = match read(&file("mode")).as_deref() {
        Some("dedicated") => true,
        Some("shared") => false,
        other => {
            return Err(format!(
                "dsa {name}: unknown work queue mode {other:?} in {}",
                file("mode").display()
            ));
        }
    };
    let size = read_num(&file("size")).unwrap_or(0);
    if size == 0 {
        return Err(format!(
            "dsa {name}: the work queue has no entries ({} is 0): give it some with \
             `accel-config config-wq {name} --size=16`",
            file("size").display()
        ));
    }
    let max_transfer = read_num(&file("max_transfer_size")).unwrap_or(0);
    if max_transfer == 0 {
        return Err(format!(
            "dsa {name}: {} is missing or 0",
            file("max_transfer_size").display()
        ));
    }
    let max_batch = read_num(&file("max_batch_size")).unwrap_or(1);
    Ok(UserWq {
        name,
        cdev: root.dev.join("dsa").join(wq),
        dedicated,
        size: size.min(u32::MAX as u64) as u32,
        max_transfer,
        max_batch: max_batch.min(u32::MAX as u64) as u32,
        opcap,
    })
}

/// What to tell the operator when opening `cdev` failed with `e`.
pub fn open_failure(info: &UserWq, e: &std::io::Error) -> String {
    let path = info.cdev.display();
    let what = match e.raw_os_error() {
        Some(libc::EACCES) => format!(
            "permission denied: give this user read and write access to {path} (`chown` or \
             `chmod 0660` with a group it is in, or a udev rule: SUBSYSTEM==\"dsa\", \
             MODE=\"0660\", GROUP=\"...\"), or run as root"
        ),
        Some(libc::EPERM) => "the idxd driver refused it (EPERM): a work queue without a PASID \
             (shared virtual addressing off) may be opened only with CAP_SYS_RAWIO; enable \
             scalable mode (intel_iommu=on,sm_on) or give the process CAP_SYS_RAWIO"
            .to_string(),
        Some(libc::ENOENT | libc::ENODEV | libc::ENXIO) => format!(
            "{path} does not exist: the work queue is not bound to the idxd user driver \
             (`accel-config enable-wq {}`)",
            info.name
        ),
        Some(libc::EBUSY) => {
            "another process holds the dedicated work queue: a dedicated work queue has one \
             user at a time; use another, or a shared one"
                .to_string()
        }
        _ => e.to_string(),
    };
    format!("dsa {}: cannot open {path}: {what}", info.name)
}

/// The system calls the backend makes, behind a seam so the tests can
/// fail them.
pub trait IdxdOps {
    /// Opens `info`'s character device and maps its portal.
    fn open_portal(&self, info: &UserWq) -> Result<Arc<dyn WorkQueue>, OpenError>;
}

/// Why a work queue could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// A system call failed.
    Io(std::io::Error),
    /// The CPU or the mapping cannot submit to it.
    Portal(String),
}

/// Opens every usable work queue the discovery found; those that fail
/// become notes.
pub fn open_all(d: Discovery, ops: &dyn IdxdOps) -> (Vec<Hardware>, Vec<String>) {
    let mut notes = d.notes;
    let mut hardware = Vec::new();
    for info in d.wqs {
        match ops.open_portal(&info) {
            Ok(wq) => hardware.push(Hardware { wq, keep: None }),
            Err(OpenError::Io(e)) => notes.push(open_failure(&info, &e)),
            Err(OpenError::Portal(e)) => notes.push(format!("dsa {}: {e}", info.name)),
        }
    }
    (hardware, notes)
}

/// Memory as a work queue with a PASID sees it: the process's address
/// space, every address at itself (shared virtual addressing). A buffer
/// that is not resident makes a page fault the driver resumes from.
#[derive(Debug, Clone, Copy)]
pub struct SvaMemory;

// SAFETY: a work queue opened through the idxd character device runs
// with this process's PASID (shared virtual addressing): the device reaches
// every address of the process's address space at the address itself, as
// the process does, for as long as the process lives (a page not resident
// is a page fault the driver resumes from, never another process's
// memory). So every buffer and the one window, all of it at IOVA = VA,
// are memory the device may access, mapped there for their whole life,
// and the window never changes (generation 0).
unsafe impl DmaMemory for SvaMemory {
    fn alloc(&self, len: usize) -> Result<DmaBuffer, String> {
        let region = DmaRegion::alloc(len).map_err(|e| e.to_string())?;
        let va = region.as_ptr().addr() as u64;
        // SAFETY: under shared virtual addressing (above) the device
        // reaches the region at its own virtual address, for as long as
        // the buffer holds the region.
        Ok(unsafe { DmaBuffer::new(Arc::new(region), va) })
    }

    fn window(&self, _addr: usize) -> Option<Window> {
        Some(Window {
            va: 0,
            len: usize::MAX,
            iova: 0,
        })
    }

    fn generation(&self) -> u64 {
        0
    }
}

/// The host's idxd character devices.
pub struct SystemIdxd;

impl IdxdOps for SystemIdxd {
    fn open_portal(&self, info: &UserWq) -> Result<Arc<dyn WorkQueue>, OpenError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&info.cdev)
            .map_err(OpenError::Io)?;
        // SAFETY: a fresh shared mapping of the work queue's portal page
        // (offset 0 of its character device, as SPDK's kernel-mode idxd
        // maps it), write-only; checked below and unmapped on drop.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                spec::PORTAL_SIZE,
                libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(OpenError::Io(std::io::Error::last_os_error()));
        }
        let mapping = PortalMapping(addr.cast());
        let mode = if info.dedicated {
            WqMode::Dedicated
        } else {
            WqMode::Shared
        };
        // SAFETY: `mapping` is the WQ's portal page, mapped until the
        // `IdxdWq` that owns both drops (fields drop in order: the portal
        // first); `mode` is what sysfs says the WQ is.
        let portal = unsafe { Portal::new(mapping.0, mode) }.map_err(OpenError::Portal)?;
        Ok(Arc::new(IdxdWq {
            portal,
            _mapping: mapping,
            _file: file,
            info: WqInfo {
                name: info.name.clone(),
                mode,
                size: info.size,
                max_transfer: info.max_transfer,
                max_batch: info.max_batch,
                opcap: info.opcap,
                block_on_fault: false,
            },
            mem: SvaMemory,
        }))
    }
}

/// A mapped portal page, unmapped on drop.
struct PortalMapping(*mut u8);

// SAFETY: a device mapping, not memory any thread owns; only `Portal`
// writes to it.
unsafe impl Send for PortalMapping {}
// SAFETY: as for `Send`.
unsafe impl Sync for PortalMapping {}

impl Drop for PortalMapping {
    fn drop(&mut self) {
        // SAFETY: the page mapped in `open_portal`, unmapped once.
        unsafe { libc::munmap(self.0.cast(), spec::PORTAL_SIZE) };
    }
}

/// A work queue of the kernel's idxd driver, opened.
struct IdxdWq {
    portal: Portal,
    _mapping: PortalMapping,
    _file: std::fs::File,
    info: WqInfo,
    mem: SvaMemory,
}

// SAFETY: submissions are single 64-byte portal writes (`Portal`), after
// a store fence; with shared virtual addressing the device reaches the
// process's memory at its virtual addresses, which `SvaMemory` gives;
// `info` is what sysfs reports of the enabled WQ.
unsafe impl WorkQueue for IdxdWq {
    fn info(&self) -> &WqInfo {
        &self.info
    }

    fn memory(&self) -> &dyn DmaMemory {
        &self.mem
    }

    unsafe fn submit(&self, desc: &Descriptor) -> Result<(), Retry> {
        // SAFETY: the caller's contract.
        unsafe { self.portal.submit(desc) }
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Deref;

    use super::*;
    use crate::env::vfio::fake::FakeSysfs;

    /// A sysfs and /dev tree under a temporary directory, with the DSA bus
    /// and its devices and work queues.
    struct Tree(FakeSysfs);

    impl Deref for Tree {
        type Target = FakeSysfs;
        fn deref(&self) -> &FakeSysfs {
            &self.0
        }
    }

    impl Tree {
        fn new() -> Tree {
            let t = FakeSysfs::new("idxd");
            std::fs::create_dir_all(t.root.join("dev/dsa")).unwrap();
            Tree(t)
        }

        fn bus(&self) {
            std::fs::create_dir_all(self.root.join("sys/bus/dsa/devices")).unwrap();
        }

        fn device(&self, name: &str, state: &str, pasid: &str) {
            let d = self.root.join("sys/bus/dsa/devices").join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("state"), format!("{state}\n")).unwrap();
            std::fs::write(d.join("pasid_enabled"), format!("{pasid}\n")).unwrap();
        }

        fn wq(&self, name: &str, files: &[(&str, &str)]) {
            let d = self.root.join("sys/bus/dsa/devices").join(name);
            std::fs::create_dir_all(&d).unwrap();
            for (f, v) in files {
                std::fs::write(d.join(f), format!("{v}\n")).unwrap();
            }
        }

        fn good_wq(&self, name: &str, mode: &str) {
            self.wq(
                name,
                &[
                    ("state", "enabled"),
                    ("type", "user"),
                    ("mode", mode),
                    ("size", "16"),
                    ("max_transfer_size", "2097152"),
                    ("max_batch_size", "32"),
                ],
            );
        }
    }

    fn notes(d: &Discovery) -> String {
        d.notes.join("\n")
    }

    #[test]
    fn no_bus_says_the_driver_or_the_device_is_missing() {
        let t = Tree::new();
        let d = discover(&t.sysfs(), &[]);
        assert!(d.wqs.is_empty());
        let n = notes(&d);
        assert!(
            n.contains("no DSA device") && n.contains("modprobe idxd"),
            "{n}"
        );
        assert!(n.contains("bus/dsa"), "{n}");
    }

    #[test]
    fn a_bus_without_dsa_devices_says_so() {
        let t = Tree::new();
        t.bus();
        t.wq("iax1", &[("state", "enabled")]);
        let d = discover(&t.sysfs(), &[]);
        assert!(d.wqs.is_empty());
        assert!(notes(&d).contains("no DSA device under"), "{}", notes(&d));
    }

    #[test]
    fn usable_user_wqs_are_found_with_their_limits() {
        let t = Tree::new();
        t.bus();
        t.device("dsa0", "enabled", "1");
        t.good_wq("wq0.1", "shared");
        t.good_wq("wq0.0", "dedicated");
        let d = discover(&t.sysfs(), &[]);
        assert!(d.notes.is_empty(), "{}", notes(&d));
        assert_eq!(d.wqs.len(), 2);
        let w = &d.wqs[0];
        assert_eq!(w.name, "dsa0/wq0.0");
        assert!(w.dedicated);
        assert_eq!(w.size, 16);
        assert_eq!(w.max_transfer, 2 << 20);
        assert_eq!(w.max_batch, 32);
        assert_eq!(w.cdev, t.root.join("dev/dsa/wq0.0"));
        assert!(!d.wqs[1].dedicated);
        // Only the one asked for.
        let d = discover(&t.sysfs(), &["dsa0/wq0.1".into()]);
        assert_eq!(d.wqs.len(), 1);
        assert_eq!(d.wqs[0].name, "dsa0/wq0.1");
        let d = discover(&t.sysfs(), &["wq0.7".into()]);
        assert!(d.wqs.is_empty());
        assert!(notes(&d).contains("no work queue wq0.7"), "{}", notes(&d));
    }

    #[test]
    fn each_unusable_wq_names_the_file_and_the_fix() {
        let t = Tree::new();
        t.bus();
        t.device("dsa0", "enabled", "1");
        t.wq("wq0.0", &[("state", "disabled"), ("type", "user")]);
        t.wq(
            "wq0.1",
            &[
                ("state", "enabled"),
                ("type", "kernel"),
                ("mode", "dedicated"),
            ],
        );
        t.wq(
            "wq0.2",
            &[
                ("state", "enabled"),
                ("type", "user"),
                ("mode", "shared"),
                ("size", "0"),
                ("max_transfer_size", "4096"),
            ],
        );
        let d = discover(&t.sysfs(), &[]);
        assert!(d.wqs.is_empty());
        let n = notes(&d);
        assert!(
            n.contains("dsa0/wq0.0: the work queue is disabled")
                && n.contains("wq0.0/state")
                && n.contains("accel-config enable-wq dsa0/wq0.0"),
            "{n}"
        );
        assert!(
            n.contains("type is \"kernel\"")
                && n.contains("wq0.1/type")
                && n.contains("--type=user"),
            "{n}"
        );
        assert!(n.contains("no entries") && n.contains("wq0.2/size"), "{n}");
        assert!(n.contains("none of its 3 work queues"), "{n}");
    }

    #[test]
    fn disabled_devices_missing_wqs_and_no_pasid_are_explained() {
        let t = Tree::new();
        t.bus();
        t.device("dsa0", "disabled", "1");
        t.device("dsa2", "enabled", "1");
        t.device("dsa4", "enabled", "0");
        t.good_wq("wq4.0", "dedicated");
        let d = discover(&t.sysfs(), &[]);
        assert!(d.wqs.is_empty());
        let n = notes(&d);
        assert!(
            n.contains("dsa dsa0: the device is disabled") && n.contains("accel-config"),
            "{n}"
        );
        assert!(
            n.contains("dsa dsa2: no work queue is configured") && n.contains("config-wq"),
            "{n}"
        );
        assert!(
            n.contains("pasid_enabled is 0") && n.contains("sm_on"),
            "{n}"
        );
    }

    struct Failing(i32);

    impl IdxdOps for Failing {
        fn open_portal(&self, _: &UserWq) -> Result<Arc<dyn WorkQueue>, OpenError> {
            Err(OpenError::Io(std::io::Error::from_raw_os_error(self.0)))
        }
    }

    #[test]
    fn open_failures_say_which_file_and_what_to_change() {
        let t = Tree::new();
        t.bus();
        t.device("dsa0", "enabled", "1");
        t.good_wq("wq0.0", "dedicated");
        for (errno, want) in [
            (libc::EACCES, "permission denied"),
            (libc::EPERM, "CAP_SYS_RAWIO"),
            (libc::ENOENT, "does not exist"),
            (libc::EBUSY, "another process"),
        ] {
            let (hw, notes) = open_all(discover(&t.sysfs(), &[]), &Failing(errno));
            assert!(hw.is_empty());
            let n = notes.join("\n");
            assert!(n.contains(want), "{errno}: {n}");
            assert!(
                n.contains(&t.root.join("dev/dsa/wq0.0").display().to_string()),
                "{errno}: names the file: {n}"
            );
        }
        // The real open of a file that is not a work queue's device fails
        // with a note, not a panic.
        let (hw, notes) = open_all(discover(&t.sysfs(), &[]), &SystemIdxd);
        assert!(hw.is_empty());
        assert!(notes.join("\n").contains("does not exist"), "{notes:?}");
    }

    #[test]
    fn op_cap_is_read_most_significant_word_first() {
        let t = Tree::new();
        let p = t.root.join("op_cap");
        std::fs::write(
            &p,
            "00000000,00000000,00000000,00000000,00000000,00000000,00000003,003f03ff\n",
        )
        .unwrap();
        let caps = op_cap(&p);
        assert!(spec::opcap_has(&caps, opcode::MEMMOVE));
        assert!(spec::opcap_has(&caps, opcode::COPY_CRC));
        assert!(spec::opcap_has(&caps, 32), "bit 32 from the second word");
        assert!(!spec::opcap_has(&caps, 0x0a));
        assert_eq!(op_cap(&t.root.join("missing")), DSA1_OPS);
    }

    #[test]
    fn sva_memory_is_the_address_space() {
        let m = SvaMemory;
        let b = m.alloc(4096).unwrap();
        assert_eq!(b.iova(), b.as_ptr() as u64);
        let w = m.window(0x1234_5678).unwrap();
        assert_eq!(w.iova + (0x1234_5678 - w.va) as u64, 0x1234_5678);
    }
}
