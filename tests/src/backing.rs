//! Backings for the tests of the `uring://` and `aio://` devices: scratch
//! files on the work disk, loop devices over them (`losetup`), and a small
//! ext4 file system in an image file, mounted through a loop device, that
//! a test can shut down (`FS_IOC_SHUTDOWN`) to make every IO to the files
//! in it fail.
//!
//! Everything is undone when dropped, on success and on panic alike: loop
//! devices are detached, file systems unmounted (lazily when still busy, so
//! a daemon that holds a file open cannot keep a mount alive past the test
//! run), files and directories removed. Files live under the system's
//! temporary directory (`std::env::temp_dir()`), never on a raw disk.
//!
//! Loop devices, mounts and FS_IOC_SHUTDOWN need root (and the daemon
//! under test, which opens the loop devices and the files in the mounts,
//! runs as the same user): without it they fail the test at once, with a
//! line saying so.
//!
//! Thread: the test threads.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::output_with_timeout;
use crate::tools::{TempDir, said, system_tool};

/// Longest a `losetup`, `mkfs.ext4`, `mount`, `umount` or `python3` run may take.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// `FS_IOC_SHUTDOWN` (`_IOR('X', 125, __u32)`).
pub const FS_IOC_SHUTDOWN: u32 = 0x8004_587d;

/// `FS_GOING_FLAGS_NOLOGFLUSH`: shut down without flushing the journal.
pub const SHUTDOWN_NOLOGFLUSH: u32 = 2;

/// Panics, saying why, unless this process runs as root.
pub fn require_root(what: &str) {
    assert!(
        rustix::process::geteuid().is_root(),
        "{what} needs root (loop devices, mounts, FS_IOC_SHUTDOWN, and a daemon that \
         opens them): run the tests as root"
    );
}

/// Runs `program args` (at most [`ADMIN_TIMEOUT`]) and panics, with what it
/// said, unless it succeeds; returns its stdout, trimmed.
pub fn admin_ok(program: &str, args: &[&str]) -> String {
    let mut cmd = Command::new(program);
    cmd.args(args);
    let out = output_with_timeout(cmd, ADMIN_TIMEOUT);
    assert!(
        out.status.success(),
        "`{program} {}` failed ({}):\n{}",
        args.join(" "),
        out.status,
        said(&out)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A scratch directory on the work disk for a test's backing files,
/// removed with its contents when dropped.
pub struct Scratch {
    dir: TempDir,
}

impl Scratch {
    /// A new, empty directory tagged `tag`.
    pub fn new(tag: &str) -> Scratch {
        Scratch {
            dir: TempDir::new(tag),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The path of `name` inside it (nothing is created).
    pub fn join(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Creates `name` as a sparse file of `mib` MiB and returns its path.
    pub fn file(&self, name: &str, mib: u64) -> PathBuf {
        let path = self.join(name);
        sized_file(&path, mib);
        path
    }
}

/// Creates (or truncates) `path` as a sparse file of `mib` MiB.
pub fn sized_file(path: &Path, mib: u64) {
    let f = std::fs::File::create(path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
    f.set_len(mib << 20)
        .unwrap_or_else(|e| panic!("cannot size {}: {e}", path.display()));
}

/// `len` bytes of `path` at `offset`, read through the page cache (which
/// the kernel keeps coherent with O_DIRECT writes to the same file).
pub fn read_at(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    let mut f =
        std::fs::File::open(path).unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    f.seek(SeekFrom::Start(offset))
        .unwrap_or_else(|e| panic!("cannot seek {}: {e}", path.display()));
    let mut buf = vec![0u8; len];
    f.read_exact(&mut buf)
        .unwrap_or_else(|e| panic!("cannot read {len} bytes of {}: {e}", path.display()));
    buf
}

/// A loop device over a file (`losetup -f --show`), detached when dropped.
pub struct LoopDevice {
    dev: PathBuf,
}

impl LoopDevice {
    /// Attaches `file` to the first free loop device (512-byte sectors).
    pub fn attach(file: &Path) -> LoopDevice {
        Self::attach_with(file, &[])
    }

    /// [`LoopDevice::attach`] with a logical block size of `sector_size`
    /// bytes (`losetup --sector-size`).
    pub fn attach_with_sector_size(file: &Path, sector_size: u32) -> LoopDevice {
        Self::attach_with(file, &["--sector-size", &sector_size.to_string()])
    }

    fn attach_with(file: &Path, extra: &[&str]) -> LoopDevice {
        require_root("a loop device");
        let losetup = system_tool("losetup", "mount");
        let mut args = extra.to_vec();
        args.extend(["-f", "--show", file.to_str().expect("a UTF-8 path")]);
        let dev = admin_ok(losetup.to_str().expect("a UTF-8 path"), &args);
        assert!(
            dev.starts_with("/dev/loop"),
            "losetup printed {dev:?}, not a loop device"
        );
        LoopDevice {
            dev: PathBuf::from(dev),
        }
    }

    /// The device's path, `/dev/loopN`.
    pub fn path(&self) -> &Path {
        &self.dev
    }

    /// Rereads the backing file's size (`losetup -c`): a file truncated
    /// smaller shrinks the device.
    pub fn set_capacity(&self) {
        admin_ok("losetup", &["-c", self.dev.to_str().expect("a UTF-8 path")]);
    }

    /// The device's size in bytes, as the kernel now has it.
    pub fn size_bytes(&self) -> u64 {
        let out = admin_ok(
            "blockdev",
            &["--getsize64", self.dev.to_str().expect("a UTF-8 path")],
        );
        out.parse()
            .unwrap_or_else(|e| panic!("blockdev --getsize64 printed {out:?}: {e}"))
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        // Detaching fails while something holds it open; then it is
        // marked to go as soon as the last holder closes it.
        let mut cmd = Command::new("losetup");
        cmd.arg("-d").arg(&self.dev);
        let out = output_with_timeout(cmd, ADMIN_TIMEOUT);
        if !out.status.success() {
            eprintln!(
                "losetup -d {} failed: {}",
                self.dev.display(),
                said(&out).trim()
            );
        }
    }
}

/// An ext4 file system in an image file on the work disk, mounted
/// (`mount -o loop`) on a directory beside it; unmounted and removed when
/// dropped.
pub struct Ext4Mount {
    /// `None` once deliberately left behind (a mount that would not go).
    scratch: Option<Scratch>,
    mountpoint: PathBuf,
    mounted: bool,
}

impl Ext4Mount {
    /// Makes a `mib` MiB image (`mkfs.ext4 -q`) and mounts it.
    pub fn new(tag: &str, mib: u64) -> Ext4Mount {
        require_root("an ext4 mount");
        let scratch = Scratch::new(tag);
        let image = scratch.file("fs.img", mib);
        let mountpoint = scratch.join("mnt");
        std::fs::create_dir(&mountpoint)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", mountpoint.display()));
        let mkfs = system_tool("mkfs.ext4", "e2fsprogs");
        admin_ok(
            mkfs.to_str().expect("a UTF-8 path"),
            &["-q", "-F", image.to_str().expect("a UTF-8 path")],
        );
        let mut fs = Ext4Mount {
            scratch: Some(scratch),
            mountpoint,
            mounted: false,
        };
        admin_ok(
            "mount",
            &[
                "-o",
                "loop",
                image.to_str().expect("a UTF-8 path"),
                fs.mountpoint.to_str().expect("a UTF-8 path"),
            ],
        );
        fs.mounted = true;
        fs
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// The path of `name` in the file system (nothing is created).
    pub fn join(&self, name: &str) -> PathBuf {
        self.mountpoint.join(name)
    }

    /// Shuts the file system down (`FS_IOC_SHUTDOWN`, NOLOGFLUSH) through
    /// an fd of its root directory: from then on every read and write of a
    /// file in it fails with EIO, as a dying disk's would.
    pub fn shut_down(&self) {
        let script = format!(
            "import fcntl, os, struct, sys\n\
             fd = os.open(sys.argv[1], os.O_RDONLY)\n\
             fcntl.ioctl(fd, {FS_IOC_SHUTDOWN:#x}, struct.pack('I', {SHUTDOWN_NOLOGFLUSH}))\n\
             os.close(fd)\n"
        );
        let python = system_tool("python3", "python3");
        admin_ok(
            python.to_str().expect("a UTF-8 path"),
            &[
                "-c",
                &script,
                self.mountpoint.to_str().expect("a UTF-8 path"),
            ],
        );
    }
}

impl Drop for Ext4Mount {
    fn drop(&mut self) {
        // mount's loop device (autoclear) goes with the file system.
        if self.mounted && !unmount(&self.mountpoint) {
            std::mem::forget(self.scratch.take());
        }
    }
}

/// A ramfs mounted on a scratch directory: a file system that refuses
/// O_DIRECT on every kernel (tmpfs accepts it since Linux 6.6), for the
/// tests of that refusal. Unmounted and removed when dropped.
pub struct Ramfs {
    /// `None` once deliberately left behind (a mount that would not go).
    scratch: Option<Scratch>,
    mountpoint: PathBuf,
}

impl Ramfs {
    /// Mounts a new ramfs.
    pub fn new(tag: &str) -> Ramfs {
        require_root("a ramfs mount");
        let scratch = Scratch::new(tag);
        let mountpoint = scratch.join("ramfs");
        std::fs::create_dir(&mountpoint)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", mountpoint.display()));
        admin_ok(
            "mount",
            &[
                "-t",
                "ramfs",
                "ramfs",
                mountpoint.to_str().expect("a UTF-8 path"),
            ],
        );
        Ramfs {
            scratch: Some(scratch),
            mountpoint,
        }
    }

    /// The path of `name` in it (nothing is created).
    pub fn join(&self, name: &str) -> PathBuf {
        self.mountpoint.join(name)
    }
}

impl Drop for Ramfs {
    fn drop(&mut self) {
        if !unmount(&self.mountpoint) {
            std::mem::forget(self.scratch.take());
        }
    }
}

/// Unmounts `mountpoint`, lazily when it is still busy (a daemon of a
/// failed test not yet killed): the kernel finishes when the last file
/// closes. Whether it is unmounted (or detached); `false` leaves the
/// directory to its owner, who must not remove it: that would delete the
/// file system's contents, not the mount.
fn unmount(mountpoint: &Path) -> bool {
    let mut cmd = Command::new("umount");
    cmd.arg(mountpoint);
    if output_with_timeout(cmd, ADMIN_TIMEOUT).status.success() {
        return true;
    }
    let mut lazy = Command::new("umount");
    lazy.arg("-l").arg(mountpoint);
    let out = output_with_timeout(lazy, ADMIN_TIMEOUT);
    if !out.status.success() {
        eprintln!(
            "umount -l {} failed: {}",
            mountpoint.display(),
            said(&out).trim()
        );
    }
    out.status.success()
}

/// `len` pseudo-random bytes (splitmix64 from `seed`): incompressible, and
/// different for each seed.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}
