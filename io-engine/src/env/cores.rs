//! Core selection: which OS CPUs the engine runs its reactors on.
//!
//! Thread: any. Nothing here keeps state; [`allowed_cpus`] asks the kernel on
//! every call.
//!
//! A [`CoreSet`] comes from a hex mask in SPDK's form (`-m 0x3`), from a list
//! (`-l 0,2-3`), or by default from the first CPU this process may run on
//! (the daemon sizes its default from the CPU quota instead:
//! [`super::core_sizing`]). It is then checked against the process's
//! allowed CPUs (its affinity, as set by `taskset` or a cgroup cpuset)
//! before any reactor thread is started.
//!
//! Binaries exit with status 2 when they get a [`CoreError`], like any other
//! invalid command line; this module only returns the error.

use std::fmt;

use rustix::process::getpid;
use rustix::thread::{CpuSet, sched_getaffinity};
use thiserror::Error;

/// CPU ids must be below this: the size of the kernel CPU mask that
/// `sched_setaffinity` and `sched_getaffinity` take here.
pub const MAX_CPUS: u32 = CpuSet::MAX_CPU as u32;

/// Why a core mask or list was refused, or the cores are not usable.
///
/// Binaries exit with status 2 on any of these.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CoreError {
    /// The mask, list or set names no core at all.
    #[error(
        "the core {what} is empty: name at least one core, as a hex mask such as `0x3` or a list such as `0,2-3`"
    )]
    Empty {
        /// `mask`, `list` or `set`.
        what: &'static str,
    },
    /// The text is not a valid mask or list.
    #[error("malformed core {what} `{text}`: {reason}")]
    Malformed {
        /// `mask` or `list`.
        what: &'static str,
        /// The whole text given.
        text: String,
        /// What is wrong with it and how to write it instead.
        reason: String,
    },
    /// A mask with no bit set.
    #[error("core mask `{text}` selects no cores: set at least one bit, e.g. `0x1` for core 0")]
    ZeroMask {
        /// The mask as given.
        text: String,
    },
    /// A CPU id too large for the kernel CPU mask.
    #[error("core {cpu} is out of range: CPU ids must be below {MAX_CPUS}")]
    OutOfRange {
        /// The offending CPU id.
        cpu: u64,
    },
    /// Both a mask and a list were given.
    #[error("both a core mask and a core list were given: pass only one of them")]
    BothGiven,
    /// A core count was given with a core mask or list.
    #[error("a core count was given with a core mask or list: pass only one of them")]
    CountWithCores,
    /// A core count larger than the set of CPUs the process may run on.
    #[error(
        "--core-count {count} asks for {count} cores but this process may run on {} ({available}); \
         ask for fewer, or start the process with a wider CPU affinity (taskset, cgroup cpuset)",
        .available.len()
    )]
    TooFewAllowed {
        /// The count asked for.
        count: usize,
        /// The cores the process may run on.
        available: CoreSet,
    },
    /// Some cores are not in the process's allowed set.
    #[error(
        "{} not available to this process (available: {available}); choose cores from the \
         available set, or start the process with a wider CPU affinity (taskset, cgroup cpuset)",
        missing_phrase(.missing)
    )]
    Unavailable {
        /// The requested cores the process may not run on.
        missing: CoreSet,
        /// The cores the process may run on.
        available: CoreSet,
    },
    /// The kernel refused to tell which CPUs the process may use.
    #[error("cannot read this process's CPU affinity (sched_getaffinity failed: {errno})")]
    Affinity {
        /// The error the kernel returned.
        errno: rustix::io::Errno,
    },
}

/// "core 5 is" or "cores 5,7 are", for [`CoreError::Unavailable`].
fn missing_phrase(missing: &CoreSet) -> String {
    if missing.len() == 1 {
        format!("core {missing} is")
    } else {
        format!("cores {missing} are")
    }
}

/// A non-empty set of OS CPU ids, sorted and without duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CoreSet {
    cpus: Vec<u32>,
}

impl CoreSet {
    /// Builds a set from CPU ids in any order; duplicates are merged.
    ///
    /// Fails if there are none, or one is not below [`MAX_CPUS`].
    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> Result<CoreSet, CoreError> {
        let mut cpus: Vec<u32> = cpus.into_iter().collect();
        if let Some(&cpu) = cpus.iter().find(|&&cpu| cpu >= MAX_CPUS) {
            return Err(CoreError::OutOfRange { cpu: cpu.into() });
        }
        cpus.sort_unstable();
        cpus.dedup();
        if cpus.is_empty() {
            return Err(CoreError::Empty { what: "set" });
        }
        Ok(CoreSet { cpus })
    }

    /// Parses a hex CPU mask as SPDK's `-m` takes it: bit N selects CPU N.
    ///
    /// The `0x`/`0X` prefix is optional, the mask may be longer than 64 bits
    /// and surrounding whitespace is ignored. An empty mask, a non-hex digit
    /// and a mask of zero are refused.
    pub fn parse_mask(s: &str) -> Result<CoreSet, CoreError> {
        let text = s.trim();
        if text.is_empty() {
            return Err(CoreError::Empty { what: "mask" });
        }
        let digits = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))
            .unwrap_or(text);
        let malformed = |reason: String| CoreError::Malformed {
            what: "mask",
            text: s.to_owned(),
            reason,
        };
        if digits.is_empty() {
            return Err(malformed(
                "no hex digits after the `0x` prefix; write e.g. `0x3` for cores 0 and 1".into(),
            ));
        }
        let mut cpus = Vec::new();
        // The last digit holds CPUs 0-3, the one before it 4-7, and so on.
        for (nibble, c) in digits.chars().rev().enumerate() {
            let value = c.to_digit(16).ok_or_else(|| {
                malformed(format!(
                    "`{c}` is not a hex digit; a mask is hex digits 0-9 and a-f, e.g. `0x3`"
                ))
            })?;
            for bit in 0..4 {
                if value & (1 << bit) != 0 {
                    let cpu = nibble as u64 * 4 + bit;
                    let cpu = u32::try_from(cpu)
                        .ok()
                        .filter(|&cpu| cpu < MAX_CPUS)
                        .ok_or(CoreError::OutOfRange { cpu })?;
                    cpus.push(cpu);
                }
            }
        }
        if cpus.is_empty() {
            return Err(CoreError::ZeroMask { text: s.to_owned() });
        }
        CoreSet::from_cpus(cpus)
    }

    /// Parses a CPU list as SPDK's `-l` takes it, e.g. `0,2-3`.
    ///
    /// Items are CPU ids or inclusive ranges `a-b`, separated by commas;
    /// whitespace around items is ignored and duplicates are merged. An empty
    /// list, an empty item (`0,,1`), a reversed range (`3-1`) and anything
    /// that is not a decimal number are refused.
    pub fn parse_list(s: &str) -> Result<CoreSet, CoreError> {
        if s.trim().is_empty() {
            return Err(CoreError::Empty { what: "list" });
        }
        let malformed = |reason: String| CoreError::Malformed {
            what: "list",
            text: s.to_owned(),
            reason,
        };
        let number = |n: &str, item: &str| -> Result<u32, CoreError> {
            let n = n.trim();
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed(format!(
                    "`{item}` is not a CPU id or a range of them; write e.g. `0,2-3`"
                )));
            }
            match n.parse::<u32>() {
                Ok(cpu) if cpu < MAX_CPUS => Ok(cpu),
                // All digits, so only too large a number fails to parse.
                _ => Err(CoreError::OutOfRange {
                    cpu: n.parse().unwrap_or(u64::MAX),
                }),
            }
        };
        let mut cpus = Vec::new();
        for item in s.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(malformed(
                    "empty item (two commas in a row, or one at either end)".into(),
                ));
            }
            match item.split_once('-') {
                None => cpus.push(number(item, item)?),
                Some((first, last)) => {
                    let (first, last) = (number(first, item)?, number(last, item)?);
                    if first > last {
                        return Err(malformed(format!(
                            "range `{item}` is reversed; write it as `{last}-{first}`"
                        )));
                    }
                    cpus.extend(first..=last);
                }
            }
        }
        CoreSet::from_cpus(cpus)
    }

    /// The core set a binary runs on, from its mask option (`-m`) or its
    /// list option (`-l`).
    ///
    /// At most one may be given. With neither, the set is the first CPU the
    /// process may run on (see [`allowed_cpus`]).
    pub fn from_args(mask: Option<&str>, list: Option<&str>) -> Result<CoreSet, CoreError> {
        match (mask, list) {
            (Some(_), Some(_)) => Err(CoreError::BothGiven),
            (Some(mask), None) => CoreSet::parse_mask(mask),
            (None, Some(list)) => CoreSet::parse_list(list),
            (None, None) => CoreSet::from_cpus([allowed_cpus()?.cpus[0]]),
        }
    }

    /// Checks that the process may run on every core of the set.
    ///
    /// The error names the cores it may not use and those it may.
    pub fn check_available(&self) -> Result<(), CoreError> {
        self.check_within(&allowed_cpus()?)
    }

    /// Checks that every core of the set is in `available`.
    pub(super) fn check_within(&self, available: &CoreSet) -> Result<(), CoreError> {
        let missing: Vec<u32> = self
            .iter()
            .filter(|&cpu| !available.contains(cpu))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(CoreError::Unavailable {
            missing: CoreSet { cpus: missing },
            available: available.clone(),
        })
    }

    /// The CPU ids, ascending.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + ExactSizeIterator + '_ {
        self.cpus.iter().copied()
    }

    /// How many cores the set holds (at least one).
    #[expect(clippy::len_without_is_empty, reason = "a CoreSet is never empty")]
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    /// The CPU ids, ascending.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.cpus.binary_search(&cpu).is_ok()
    }
}

/// Prints the set as a compact list that [`CoreSet::parse_list`] reads back:
/// `0,2-3`.
impl fmt::Display for CoreSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.cpus.as_slice();
        let mut sep = "";
        while let Some(&first) = rest.first() {
            // Length of the run of consecutive ids that starts at `first`.
            let run = rest
                .iter()
                .zip(first..)
                .take_while(|&(&cpu, expected)| cpu == expected)
                .count();
            let last = rest[run - 1];
            if run == 1 {
                write!(f, "{sep}{first}")?;
            } else {
                write!(f, "{sep}{first}-{last}")?;
            }
            sep = ",";
            rest = &rest[run..];
        }
        Ok(())
    }
}

/// The CPUs this process may run on: the affinity of its main thread, which
/// is what `taskset` or the cgroup cpuset gave it.
///
/// Call it before the main thread pins itself to one core, or the answer is
/// that core.
pub fn allowed_cpus() -> Result<CoreSet, CoreError> {
    let set = sched_getaffinity(Some(getpid())).map_err(|errno| CoreError::Affinity { errno })?;
    CoreSet::from_cpus((0..MAX_CPUS).filter(|&cpu| set.is_set(cpu as usize)))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn set(cpus: &[u32]) -> CoreSet {
        CoreSet::from_cpus(cpus.iter().copied()).unwrap()
    }

    fn malformed(result: Result<CoreSet, CoreError>) -> (String, String) {
        match result {
            Err(CoreError::Malformed { text, reason, .. }) => (text, reason),
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[test]
    fn mask_accepts_prefixes_and_case() {
        assert_eq!(CoreSet::parse_mask("0x3").unwrap().cpus(), &[0, 1]);
        assert_eq!(CoreSet::parse_mask("0X3").unwrap().cpus(), &[0, 1]);
        assert_eq!(CoreSet::parse_mask("3").unwrap().cpus(), &[0, 1]);
        assert_eq!(CoreSet::parse_mask("0xA").unwrap().cpus(), &[1, 3]);
        assert_eq!(CoreSet::parse_mask("0xa").unwrap().cpus(), &[1, 3]);
        assert_eq!(CoreSet::parse_mask(" 0x10 ").unwrap().cpus(), &[4]);
        assert_eq!(CoreSet::parse_mask("0x0001").unwrap().cpus(), &[0]);
        assert_eq!(
            CoreSet::parse_mask("0xff").unwrap().cpus(),
            &[0, 1, 2, 3, 4, 5, 6, 7]
        );
    }

    #[test]
    fn mask_longer_than_64_bits() {
        // Bit 64 and bit 0: 17 hex digits.
        let mask = CoreSet::parse_mask("0x10000000000000001").unwrap();
        assert_eq!(mask.cpus(), &[0, 64]);
        // Bit 130 and leading zeros well beyond 64 bits.
        let mask =
            CoreSet::parse_mask(&format!("0x{}4{}", "0".repeat(40), "0".repeat(32))).unwrap();
        assert_eq!(mask.cpus(), &[130]);
    }

    #[test]
    fn mask_rejects_empty() {
        assert_eq!(
            CoreSet::parse_mask(""),
            Err(CoreError::Empty { what: "mask" })
        );
        assert_eq!(
            CoreSet::parse_mask("  "),
            Err(CoreError::Empty { what: "mask" })
        );
        let (text, reason) = malformed(CoreSet::parse_mask("0x"));
        assert_eq!(text, "0x");
        assert!(reason.contains("no hex digits"), "{reason}");
    }

    #[test]
    fn mask_rejects_non_hex() {
        for bad in ["0xg", "0x3z", "12 3", "-0x1", "0x-1", "0o17", "0x1_0"] {
            let (text, _) = malformed(CoreSet::parse_mask(bad));
            assert_eq!(text, bad);
        }
        let err = CoreSet::parse_mask("0x3z").unwrap_err().to_string();
        assert_eq!(
            err,
            "malformed core mask `0x3z`: `z` is not a hex digit; a mask is hex digits 0-9 and \
             a-f, e.g. `0x3`"
        );
    }

    #[test]
    fn mask_rejects_zero() {
        for zero in ["0", "0x0", "0x0000000000000000000000"] {
            assert_eq!(
                CoreSet::parse_mask(zero),
                Err(CoreError::ZeroMask { text: zero.into() })
            );
        }
    }

    #[test]
    fn mask_rejects_cpus_beyond_the_kernel_mask() {
        let mask = format!("0x1{}", "0".repeat(MAX_CPUS as usize / 4));
        assert_eq!(
            CoreSet::parse_mask(&mask),
            Err(CoreError::OutOfRange {
                cpu: MAX_CPUS.into()
            })
        );
        // The highest valid CPU is accepted.
        let mask = format!("0x8{}", "0".repeat(MAX_CPUS as usize / 4 - 1));
        assert_eq!(CoreSet::parse_mask(&mask).unwrap().cpus(), &[MAX_CPUS - 1]);
    }

    #[test]
    fn list_accepts_ids_ranges_and_whitespace() {
        assert_eq!(CoreSet::parse_list("0").unwrap().cpus(), &[0]);
        assert_eq!(CoreSet::parse_list("0,2-3").unwrap().cpus(), &[0, 2, 3]);
        assert_eq!(
            CoreSet::parse_list(" 0 , 2 - 3 ").unwrap().cpus(),
            &[0, 2, 3]
        );
        assert_eq!(CoreSet::parse_list("5-5").unwrap().cpus(), &[5]);
        assert_eq!(CoreSet::parse_list("7,1").unwrap().cpus(), &[1, 7]);
    }

    #[test]
    fn list_merges_duplicates() {
        assert_eq!(CoreSet::parse_list("1,1,0-2,2").unwrap().cpus(), &[0, 1, 2]);
    }

    #[test]
    fn list_rejects_empty() {
        assert_eq!(
            CoreSet::parse_list(""),
            Err(CoreError::Empty { what: "list" })
        );
        assert_eq!(
            CoreSet::parse_list(" \t"),
            Err(CoreError::Empty { what: "list" })
        );
    }

    #[test]
    fn list_rejects_empty_items() {
        for bad in ["0,,1", ",0", "0,", "0, ,1"] {
            let (text, reason) = malformed(CoreSet::parse_list(bad));
            assert_eq!(text, bad);
            assert!(reason.contains("empty item"), "{bad}: {reason}");
        }
    }

    #[test]
    fn list_rejects_reversed_ranges() {
        let (_, reason) = malformed(CoreSet::parse_list("0,3-1"));
        assert_eq!(reason, "range `3-1` is reversed; write it as `1-3`");
    }

    #[test]
    fn list_rejects_non_numbers() {
        for bad in [
            "a", "0,x", "1-", "-1", "1-2-3", "+1", "0x1", "1.5", "1 2", "0-b",
        ] {
            let (text, reason) = malformed(CoreSet::parse_list(bad));
            assert_eq!(text, bad);
            assert!(reason.contains("is not a CPU id"), "{bad}: {reason}");
        }
    }

    #[test]
    fn list_rejects_cpus_beyond_the_kernel_mask() {
        let too_big = MAX_CPUS.to_string();
        assert_eq!(
            CoreSet::parse_list(&too_big),
            Err(CoreError::OutOfRange {
                cpu: MAX_CPUS.into()
            })
        );
        // A huge range is refused before it is expanded.
        assert_eq!(
            CoreSet::parse_list("0-4294967295"),
            Err(CoreError::OutOfRange {
                cpu: u32::MAX.into()
            })
        );
        assert_eq!(
            CoreSet::parse_list("99999999999999999999"),
            Err(CoreError::OutOfRange { cpu: u64::MAX })
        );
    }

    #[test]
    fn from_cpus_sorts_merges_and_refuses_empty() {
        assert_eq!(set(&[3, 1, 3]).cpus(), &[1, 3]);
        assert_eq!(
            CoreSet::from_cpus([]),
            Err(CoreError::Empty { what: "set" })
        );
        assert_eq!(
            CoreSet::from_cpus([MAX_CPUS]),
            Err(CoreError::OutOfRange {
                cpu: MAX_CPUS.into()
            })
        );
    }

    #[test]
    fn display_is_a_compact_list() {
        assert_eq!(set(&[0]).to_string(), "0");
        assert_eq!(set(&[0, 2, 3]).to_string(), "0,2-3");
        assert_eq!(set(&[0, 1, 2, 3]).to_string(), "0-3");
        assert_eq!(set(&[1, 3, 5]).to_string(), "1,3,5");
        assert_eq!(set(&[0, 1, 4, 6, 7, 8, 10]).to_string(), "0-1,4,6-8,10");
    }

    #[test]
    fn accessors() {
        let cores = set(&[4, 0, 2]);
        assert_eq!(cores.len(), 3);
        assert_eq!(cores.iter().collect::<Vec<_>>(), vec![0, 2, 4]);
        assert!(cores.contains(2));
        assert!(!cores.contains(1));
    }

    #[test]
    fn from_args_takes_one_or_the_default() {
        assert_eq!(
            CoreSet::from_args(Some("0x6"), None).unwrap().cpus(),
            &[1, 2]
        );
        assert_eq!(
            CoreSet::from_args(None, Some("1-2")).unwrap().cpus(),
            &[1, 2]
        );
        assert_eq!(
            CoreSet::from_args(Some("0x1"), Some("0")),
            Err(CoreError::BothGiven)
        );
        assert_eq!(
            CoreSet::from_args(Some("0xq"), None)
                .unwrap_err()
                .to_string(),
            "malformed core mask `0xq`: `q` is not a hex digit; a mask is hex digits 0-9 and \
             a-f, e.g. `0x3`"
        );
        let first = allowed_cpus().unwrap().cpus()[0];
        assert_eq!(CoreSet::from_args(None, None).unwrap().cpus(), &[first]);
    }

    #[test]
    fn allowed_cpus_matches_the_kernel() {
        let allowed = allowed_cpus().unwrap();
        let online = std::thread::available_parallelism().unwrap().get();
        // available_parallelism reads the same affinity mask (or a cgroup
        // quota, which can only lower it).
        assert!(allowed.len() >= online, "{allowed} vs {online}");
        allowed.check_available().unwrap();
    }

    #[test]
    fn check_within_names_missing_and_available() {
        let available = set(&[0, 1]);
        set(&[0]).check_within(&available).unwrap();
        set(&[0, 1]).check_within(&available).unwrap();
        let err = set(&[0, 5]).check_within(&available).unwrap_err();
        assert_eq!(
            err,
            CoreError::Unavailable {
                missing: set(&[5]),
                available: available.clone()
            }
        );
        assert!(
            err.to_string()
                .starts_with("core 5 is not available to this process (available: 0-1)"),
            "{err}"
        );
        let err = set(&[1, 5, 7]).check_within(&available).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cores 5,7 are not available to this process (available: 0-1)"),
            "{err}"
        );
    }

    #[test]
    fn check_available_refuses_a_cpu_outside_the_affinity() {
        let allowed = allowed_cpus().unwrap();
        let outside = (0..MAX_CPUS).find(|&cpu| !allowed.contains(cpu)).unwrap();
        let err = set(&[outside]).check_available().unwrap_err();
        assert_eq!(
            err,
            CoreError::Unavailable {
                missing: set(&[outside]),
                available: allowed
            }
        );
    }

    fn core_sets() -> impl Strategy<Value = CoreSet> {
        prop::collection::btree_set(0..300u32, 1..40).prop_map(|cpus| set(&Vec::from_iter(cpus)))
    }

    /// The hex mask of a set, built independently of the parser.
    fn to_mask(cores: &CoreSet) -> String {
        let top = *cores.cpus().last().unwrap() as usize;
        let mut nibbles = vec![0u8; top / 4 + 1];
        for cpu in cores.iter() {
            nibbles[cpu as usize / 4] |= 1 << (cpu % 4);
        }
        let digits: String = nibbles.iter().rev().map(|n| format!("{n:x}")).collect();
        format!("0x{digits}")
    }

    proptest! {
        #[test]
        fn display_parses_back(cores in core_sets()) {
            prop_assert_eq!(CoreSet::parse_list(&cores.to_string()).unwrap(), cores);
        }

        #[test]
        fn mask_and_list_agree(cores in core_sets()) {
            let from_mask = CoreSet::parse_mask(&to_mask(&cores)).unwrap();
            let from_list = CoreSet::parse_list(&cores.to_string()).unwrap();
            prop_assert_eq!(&from_mask, &from_list);
            prop_assert_eq!(from_mask, cores);
        }

        #[test]
        fn mask_bits_are_the_cpus(bits in any::<u128>().prop_filter("non-zero", |b| *b != 0)) {
            let cores = CoreSet::parse_mask(&format!("{bits:#x}")).unwrap();
            let expected: Vec<u32> = (0..128).filter(|i| bits & (1 << i) != 0).collect();
            prop_assert_eq!(cores.cpus(), expected.as_slice());
        }
    }
}
