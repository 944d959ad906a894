//! [`check_memory`]: refuses, before anything is mapped, a region that
//! cannot be had, so a request never gets the process OOM-killed.
//!
//! Thread: any.

use super::{DmaError, HUGEPAGE_SIZE, hugepage_info};

/// Memory kept free beside any region: the rest of the process (and the
/// kernel) needs some too.
pub const MEMORY_RESERVE: u64 = 64 << 20;

/// Checks, before mapping, that a region of `len` bytes can be had: from
/// free hugepages, or else from normal memory (`MemAvailable`, and this
/// process's cgroup v2 `memory.max` less `memory.current`), keeping
/// [`MEMORY_RESERVE`] free. Mapping more than that would get the process
/// OOM-killed when the pages are faulted in.
pub fn check_memory(len: usize) -> Result<(), DmaError> {
    let len_rounded = len
        .checked_next_multiple_of(HUGEPAGE_SIZE)
        .ok_or(DmaError::TooLarge { len })?;
    if let Ok(hp) = hugepage_info()
        && hp.page_size_bytes as usize == HUGEPAGE_SIZE
        && hp.available().saturating_mul(hp.page_size_bytes) >= len_rounded as u64
    {
        return Ok(());
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").map_err(|e| DmaError::Meminfo {
        reason: e.to_string(),
    })?;
    let mut available = mem_available(&meminfo)?;
    let mut limit = "MemAvailable in /proc/meminfo";
    if let Some(room) = cgroup_room()
        && room < available
    {
        available = room;
        limit = "this process's cgroup memory.max";
    }
    if (len_rounded as u64).saturating_add(MEMORY_RESERVE) > available {
        return Err(DmaError::OutOfMemory {
            len,
            available: available.saturating_sub(MEMORY_RESERVE),
            limit,
            reserve: MEMORY_RESERVE,
        });
    }
    Ok(())
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
pub(super) fn mem_available(meminfo: &str) -> Result<u64, DmaError> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .ok_or_else(|| DmaError::Meminfo {
            reason: "no MemAvailable line".into(),
        })?;
    let kb = line
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .map_err(|_| DmaError::Meminfo {
            reason: format!("MemAvailable is not a number: {line:?}"),
        })?;
    Ok(kb.saturating_mul(1024))
}

/// Room left under this process's cgroup v2 memory limit, if it has one.
fn cgroup_room() -> Option<u64> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    room_under(&read("memory.max")?, &read("memory.current")?)
}

/// `memory.max - memory.current`, or `None` for an unlimited ("max") cgroup.
pub(super) fn room_under(max: &str, current: &str) -> Option<u64> {
    let max = max.trim().parse::<u64>().ok()?;
    let current = current.trim().parse::<u64>().ok()?;
    Some(max.saturating_sub(current))
}
