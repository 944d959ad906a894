//! The memory this process's cgroup may use (`memory.max` on v2,
//! `memory.limit_in_bytes` on v1), the tightest of the cgroup and its
//! ancestors: what a Kubernetes memory limit sets, and where the kernel's
//! OOM killer steps in. The metrics report it next to the RSS, so an alert
//! can fire before the kill.
//!
//! Thread: any. Each call reads the files again (a pod's limit can be
//! resized in place).

use std::path::Path;

use super::cgroup::{Cgroup, CgroupVersion};

/// v1 writes "no limit" as the largest page-aligned `i64`; anything at or
/// above this (4 EiB) is no limit.
const V1_UNLIMITED: u64 = 1 << 62;

/// This process's memory limit in bytes; `None` when unlimited or unknown.
pub fn memory_limit() -> Option<u64> {
    memory_limit_in(Path::new("/"))
}

/// [`memory_limit`] under the filesystem root `root`; files that cannot be
/// found, read or parsed count as no limit (logged at debug level).
pub fn memory_limit_in(root: &Path) -> Option<u64> {
    let cgroup = Cgroup::of(root, "memory")?;
    let file = match cgroup.version {
        CgroupVersion::V2 => "memory.max",
        CgroupVersion::V1 => "memory.limit_in_bytes",
    };
    cgroup
        .each(file)
        .into_iter()
        .filter_map(|(path, text)| {
            parse_limit(&text)
                .inspect_err(|e| tracing::debug!("{}: {e}", path.display()))
                .ok()?
        })
        .min()
}

/// Parses `memory.max` or `memory.limit_in_bytes`: bytes, or `max` (v2) or
/// a value of [`V1_UNLIMITED`] or more (v1) for no limit (`Ok(None)`).
pub fn parse_limit(text: &str) -> Result<Option<u64>, String> {
    let text = text.trim();
    if text == "max" {
        return Ok(None);
    }
    let bytes: u64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of bytes"))?;
    Ok((bytes < V1_UNLIMITED).then_some(bytes))
}

#[cfg(test)]
mod tests {
    use super::super::cgroup::tests::{v1_root, v2_root};
    use super::*;

    #[test]
    fn limits_parse() {
        assert_eq!(parse_limit("max\n"), Ok(None));
        assert_eq!(parse_limit("1073741824\n"), Ok(Some(1 << 30)));
        assert_eq!(parse_limit("9223372036854771712\n"), Ok(None));
        assert_eq!(parse_limit("9223372036854710272"), Ok(None));
        assert!(parse_limit("").is_err());
        assert!(parse_limit("1G").is_err());
    }

    #[test]
    fn v2_takes_the_tightest_of_the_ancestors() {
        let root = v2_root("memory-v2", "/kubepods/pod1/ctr");
        assert_eq!(memory_limit_in(&root.0), None);
        root.write("sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n")
            .write("sys/fs/cgroup/kubepods/pod1/memory.max", "2147483648\n")
            .write("sys/fs/cgroup/kubepods/memory.max", "8589934592\n");
        assert_eq!(memory_limit_in(&root.0), Some(2 << 30));
    }

    #[test]
    fn v1_treats_the_huge_value_as_none() {
        let root = v1_root("memory-v1", "/engine");
        let unlimited = "9223372036854771712\n";
        root.write("sys/fs/cgroup/memory/memory.limit_in_bytes", unlimited)
            .write(
                "sys/fs/cgroup/memory/engine/memory.limit_in_bytes",
                unlimited,
            );
        assert_eq!(memory_limit_in(&root.0), None);
        root.write(
            "sys/fs/cgroup/memory/engine/memory.limit_in_bytes",
            "536870912\n",
        );
        assert_eq!(memory_limit_in(&root.0), Some(512 << 20));
    }
}
