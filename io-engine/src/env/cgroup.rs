//! This process's cgroup for one controller (`cpu`, `memory`), found the
//! way the kernel tells it, on cgroup v1, v2 or a mix of both: the
//! membership in `/proc/self/cgroup`, the mount in `/proc/self/mountinfo`
//! (never an assumed `/sys/fs/cgroup`), and from them the directories of
//! the cgroup and of each ancestor up to the root of the mount, where a
//! limit may sit (a pod's limit is often on the pod's cgroup, the
//! container's parent).
//!
//! Thread: any. Nothing is kept: each call reads the files again.
//!
//! Every function takes the filesystem root (`/` outside tests), so that
//! unit tests run on sample trees in a temporary directory. Anything
//! missing or unreadable is "no cgroup" (logged at debug level), never an
//! error: a process outside any cgroup limit runs as on a laptop.

use std::path::{Component, Path, PathBuf};

/// The cgroup interface a controller is mounted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// One hierarchy per controller (`cpu.cfs_quota_us`,
    /// `memory.limit_in_bytes`).
    V1,
    /// The unified hierarchy (`cpu.max`, `memory.max`).
    V2,
}

/// The directories of this process's cgroup for one controller: its own
/// first, then each ancestor, ending at the root of the mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    /// The interface the controller is mounted with.
    pub version: CgroupVersion,
    /// The cgroup's directory, then its ancestors' up to the mount point.
    pub dirs: Vec<PathBuf>,
}

impl Cgroup {
    /// This process's cgroup for `controller` under the filesystem root
    /// `root`: the v1 hierarchy that holds the controller if there is one,
    /// else the v2 hierarchy (where the controller's files exist only if it
    /// is enabled). `None` when neither can be found.
    pub fn of(root: &Path, controller: &str) -> Option<Cgroup> {
        let membership = read(&root.join("proc/self/cgroup"))?;
        let mountinfo = read(&root.join("proc/self/mountinfo"))?;
        let (version, path) = membership_of(&membership, controller)?;
        let Some((mount_root, mount_point)) = mount_of(&mountinfo, version, controller) else {
            tracing::debug!(controller, "cgroup: no {version:?} mount in mountinfo");
            return None;
        };
        let Some(relative) = relative_to(&path, &mount_root) else {
            tracing::debug!(
                controller,
                "cgroup: {path} is outside the mount's root {mount_root}"
            );
            return None;
        };
        let top = root.join(mount_point.trim_start_matches('/'));
        let mut dir = top.join(&relative);
        let mut dirs = vec![dir.clone()];
        while dir != top && dir.pop() {
            dirs.push(dir.clone());
        }
        Some(Cgroup { version, dirs })
    }

    /// The contents of `file` in each directory that has it, own cgroup
    /// first; a file that exists but cannot be read is logged and skipped.
    pub fn each(&self, file: &str) -> Vec<(PathBuf, String)> {
        self.dirs
            .iter()
            .map(|dir| dir.join(file))
            .filter_map(|path| read(&path).map(|text| (path, text)))
            .collect()
    }
}

/// A file's contents; `None`, logged at debug level, when it cannot be read.
pub(super) fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .inspect_err(|e| tracing::debug!("cgroup: cannot read {}: {e}", path.display()))
        .ok()
}

/// The version and path of the cgroup holding `controller`, from
/// `/proc/self/cgroup` (`ID:CONTROLLERS:PATH` lines): a v1 line that lists
/// the controller, else the v2 line (`0::PATH`).
fn membership_of(text: &str, controller: &str) -> Option<(CgroupVersion, String)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some((CgroupVersion::V2, path.to_owned()));
        } else if controllers.split(',').any(|c| c == controller) {
            return Some((CgroupVersion::V1, path.to_owned()));
        }
    }
    v2
}

/// The root (inside the hierarchy) and mount point of the hierarchy of
/// `version` holding `controller`, from `/proc/self/mountinfo`.
fn mount_of(text: &str, version: CgroupVersion, controller: &str) -> Option<(String, String)> {
    text.lines().find_map(|line| {
        // ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER-OPTIONS
        let (head, tail) = line.split_once(" - ")?;
        let head: Vec<&str> = head.split(' ').collect();
        let tail: Vec<&str> = tail.split(' ').collect();
        let (root, mount_point) = (*head.get(3)?, *head.get(4)?);
        let found = match (version, *tail.first()?) {
            (CgroupVersion::V2, "cgroup2") => true,
            (CgroupVersion::V1, "cgroup") => tail
                .get(2)
                .is_some_and(|opts| opts.split(',').any(|o| o == controller)),
            _ => false,
        };
        found.then(|| (unescape(root), unescape(mount_point)))
    })
}

/// A mountinfo field with its octal escapes (`\040` for a space) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` (a cgroup path from `/proc/self/cgroup`) relative to `mount_root`
/// (the part of the hierarchy the mount shows); `None` if it lies outside,
/// or climbs with `..` (a cgroup namespace that does not contain it).
fn relative_to(path: &str, mount_root: &str) -> Option<PathBuf> {
    let relative = Path::new(path).strip_prefix(mount_root).ok()?;
    relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| relative.to_path_buf())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A temporary directory standing for `/`, removed on drop.
    pub(in crate::env) struct Root(pub(in crate::env) PathBuf);

    impl Root {
        /// An empty root named after `name` (unique per test).
        pub(in crate::env) fn new(name: &str) -> Root {
            let dir = std::env::temp_dir()
                .join(format!("io-engine-cgroup-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Root(dir)
        }

        /// Writes `text` to `path` (relative to the root), making its
        /// directories.
        pub(in crate::env) fn write(&self, path: &str, text: &str) -> &Root {
            let path = self.0.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
            self
        }
    }

    impl Drop for Root {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A v2-only host's files (as on most Kubernetes nodes), the process
    /// in `cgroup` (e.g. `/kubepods/pod1/ctr`).
    pub(in crate::env) fn v2_root(name: &str, cgroup: &str) -> Root {
        let root = Root::new(name);
        root.write("proc/self/cgroup", &format!("0::{cgroup}\n"))
            .write(
                "proc/self/mountinfo",
                "22 1 0:21 / / rw - ext4 /dev/sda1 rw\n\
                 30 22 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
            );
        root
    }

    /// This machine's layout: v1 controllers, v2 beside them at
    /// `/sys/fs/cgroup/unified`, the cpu controller with cpuacct.
    pub(in crate::env) fn v1_root(name: &str, cgroup: &str) -> Root {
        let root = Root::new(name);
        root.write(
            "proc/self/cgroup",
            &format!("4:memory:{cgroup}\n2:cpu,cpuacct:{cgroup}\n1:name=systemd:/\n0::/\n"),
        )
        .write(
            "proc/self/mountinfo",
            "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n\
             32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n\
             35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
             40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n\
             41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
        );
        root
    }

    #[test]
    fn v2_gives_the_cgroup_and_its_ancestors() {
        let root = v2_root("v2-dirs", "/kubepods/pod1/ctr");
        let cg = Cgroup::of(&root.0, "cpu").unwrap();
        assert_eq!(cg.version, CgroupVersion::V2);
        let top = root.0.join("sys/fs/cgroup");
        assert_eq!(
            cg.dirs,
            [
                top.join("kubepods/pod1/ctr"),
                top.join("kubepods/pod1"),
                top.join("kubepods"),
                top.clone()
            ]
        );
    }

    #[test]
    fn v1_takes_the_hierarchy_of_the_controller() {
        let root = v1_root("v1-dirs", "/engine");
        let cpu = Cgroup::of(&root.0, "cpu").unwrap();
        assert_eq!(cpu.version, CgroupVersion::V1);
        let top = root.0.join("sys/fs/cgroup/cpu,cpuacct");
        assert_eq!(cpu.dirs, [top.join("engine"), top]);
        let memory = Cgroup::of(&root.0, "memory").unwrap();
        assert_eq!(memory.dirs[0], root.0.join("sys/fs/cgroup/memory/engine"));
        // `cpuacct` is listed, but is not `cpu`: no partial matches.
        assert_eq!(
            membership_of("2:cpuacct:/a\n0::/b\n", "cpu"),
            Some((CgroupVersion::V2, "/b".into()))
        );
    }

    #[test]
    fn a_container_sees_its_cgroup_at_the_mount_root() {
        // Without a cgroup namespace the path is the host's, and the mount
        // shows only the container's part of the hierarchy.
        let root = Root::new("container");
        root.write("proc/self/cgroup", "0::/kubepods/pod1/ctr\n")
            .write(
                "proc/self/mountinfo",
                "30 22 0:26 /kubepods/pod1/ctr /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n",
            );
        let cg = Cgroup::of(&root.0, "memory").unwrap();
        assert_eq!(cg.dirs, [root.0.join("sys/fs/cgroup")]);
    }

    #[test]
    fn mount_points_are_unescaped() {
        let root = Root::new("escaped");
        root.write("proc/self/cgroup", "0::/a\n").write(
            "proc/self/mountinfo",
            "30 22 0:26 / /cg\\040roups rw - cgroup2 none rw\n",
        );
        let cg = Cgroup::of(&root.0, "cpu").unwrap();
        assert_eq!(cg.dirs[0], root.0.join("cg roups/a"));
        assert_eq!(unescape("a\\134b\\"), "a\\b\\");
    }

    #[test]
    fn anything_missing_is_no_cgroup() {
        let root = Root::new("missing");
        assert_eq!(Cgroup::of(&root.0, "cpu"), None);
        root.write("proc/self/cgroup", "0::/a\n");
        assert_eq!(Cgroup::of(&root.0, "cpu"), None, "no mountinfo");
        root.write(
            "proc/self/mountinfo",
            "22 1 0:21 / / rw - ext4 /dev/sda1 rw\n",
        );
        assert_eq!(Cgroup::of(&root.0, "cpu"), None, "no cgroup2 mount");
        root.write("proc/self/cgroup", "garbage\n");
        assert_eq!(Cgroup::of(&root.0, "cpu"), None, "no membership");
        // A path outside the mount's root, or climbing out of it.
        assert_eq!(relative_to("/a/b", "/c"), None);
        assert_eq!(relative_to("/../a", "/"), None);
        assert_eq!(relative_to("/a/b", "/a"), Some(PathBuf::from("b")));
        assert_eq!(relative_to("/", "/"), Some(PathBuf::new()));
    }
}
