//! The CPU's last-level cache: how large it is, for code that decides
//! whether data it writes is worth keeping in the cache (the malloc device
//! streams writes past the cache when its memory is larger than this).
//!
//! Thread: any. The size is read from sysfs once, at the first call.

use std::sync::OnceLock;

/// Assumed when sysfs does not say (no `/sys`, an unusual kernel): the L3
/// of one Zen 5 CCD or of a mid-size Xeon.
pub const FALLBACK_BYTES: usize = 32 << 20;

/// Bytes of the largest cache level CPU 0 reports in
/// `/sys/devices/system/cpu/cpu0/cache` (one instance of it: the cache a
/// core shares with its neighbours, not all of the machine's), or
/// [`FALLBACK_BYTES`].
pub fn last_level_bytes() -> usize {
    static LLC: OnceLock<usize> = OnceLock::new();
    *LLC.get_or_init(|| read_sysfs("/sys/devices/system/cpu/cpu0/cache").unwrap_or(FALLBACK_BYTES))
}

/// The size of the highest-level data or unified cache under `dir`.
fn read_sysfs(dir: &str) -> Option<usize> {
    let mut best: Option<(u32, usize)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let read = |f: &str| std::fs::read_to_string(path.join(f)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        if kind.trim() == "Instruction" {
            continue;
        }
        let (Ok(level), Some(size)) = (level.trim().parse::<u32>(), parse_size(&size)) else {
            continue;
        };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, size));
        }
    }
    best.map(|(_, size)| size)
}

/// sysfs's cache size: bytes, or with a `K`, `M` or `G` suffix.
fn parse_size(text: &str) -> Option<usize> {
    let t = text.trim();
    let (digits, shift) = match t.as_bytes().last()? {
        b'K' => (&t[..t.len() - 1], 10),
        b'M' => (&t[..t.len() - 1], 20),
        b'G' => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: usize = digits.parse().ok()?;
    n.checked_mul(1 << shift).filter(|&b| b > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("0K"), None);
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size("12Q"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn the_highest_level_data_cache_wins() {
        let dir = std::env::temp_dir().join(format!("io-engine-cache-{}", std::process::id()));
        let put = |idx: &str, level: &str, kind: &str, size: &str| {
            let d = dir.join(idx);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("level"), level).unwrap();
            std::fs::write(d.join("type"), kind).unwrap();
            std::fs::write(d.join("size"), size).unwrap();
        };
        put("index0", "1", "Data", "48K\n");
        put("index1", "1", "Instruction", "32K\n");
        put("index2", "2", "Unified", "1024K\n");
        put("index3", "3", "Unified", "32768K\n");
        put("index4", "4", "Instruction", "99M\n");
        assert_eq!(read_sysfs(dir.to_str().unwrap()), Some(32 << 20));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(read_sysfs(dir.to_str().unwrap()), None);
    }

    #[test]
    fn this_machine_reports_a_cache() {
        let b = last_level_bytes();
        assert!(b >= 1 << 20, "last-level cache of {b} bytes");
    }
}
