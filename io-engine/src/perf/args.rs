//! Command-line values the benchmark binaries (`bdev-perf`, `accel-perf`)
//! share: sizes with a k/m suffix, as SPDK's tools take them, and run
//! times. Each returns a message naming the bad value, for clap to print.
//!
//! Thread: any; pure functions.

use super::MAX_SECONDS;

/// A size in bytes, plain or with a `k`/`m` suffix (KiB, MiB): `4096`,
/// `4k`, `1M`. `what` names the value in the error; it must be 1 to `max`
/// bytes.
pub fn parse_size(s: &str, what: &str, max: u64) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or with a k/m suffix)"))?;
    match n.checked_mul(mul) {
        Some(v) if (1..=max).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: the {what} must be 1 byte to {max} bytes")),
    }
}

/// A run time in seconds: above 0, at most [`MAX_SECONDS`] (30 days).
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= MAX_SECONDS => Ok(v),
        _ => Err(format!(
            "{s:?} is not a run time: give a number of seconds above 0 and at most {MAX_SECONDS} (30 days)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_suffixes_and_refuse_what_is_out_of_range() {
        assert_eq!(parse_size("4096", "IO size", u64::MAX), Ok(4096));
        assert_eq!(parse_size(" 4k ", "IO size", u64::MAX), Ok(4096));
        assert_eq!(parse_size("1M", "IO size", u64::MAX), Ok(1 << 20));
        assert_eq!(parse_size("1024m", "size", 1 << 30), Ok(1 << 30));
        let e = parse_size("1025m", "transfer size", 1 << 30).unwrap_err();
        assert!(
            e.contains("transfer size must be 1 byte to 1073741824"),
            "{e}"
        );
        assert!(parse_size("0", "IO size", u64::MAX).is_err());
        assert!(parse_size("18446744073709551615k", "IO size", u64::MAX).is_err());
        let e = parse_size("4x", "IO size", u64::MAX).unwrap_err();
        assert!(e.contains("is not a size"), "{e}");
    }

    #[test]
    fn run_times_are_positive_and_bounded() {
        assert_eq!(parse_seconds("0.5"), Ok(0.5));
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("NaN").is_err());
        assert!(parse_seconds(&(MAX_SECONDS * 2.0).to_string()).is_err());
    }
}
