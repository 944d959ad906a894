//! How many reactors the daemon runs, and on which CPUs: from `-m`, `-l`
//! or `--core-count` when one is given, else from the cgroup CPU quota
//! (one reactor per whole CPU of it, so a busy reactor is never throttled
//! by the kernel), else the first allowed CPU (no surprise on a laptop).
//!
//! Thread: any. [`CoreSizing::choose`] is a pure function of the flags, the
//! allowed CPUs and the quota; the daemon reads those once at start.

use std::num::NonZeroUsize;

use super::core_source::CoreSource;
use super::cores::{CoreError, CoreSet};
use super::cpu_quota::CpuQuota;

/// Why the engine runs on the cores it runs on: what `engine info` and the
/// metrics show beside the cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreSizing {
    /// Which flag, or rule, chose the cores.
    pub source: CoreSource,
    /// The CPUs the process may run on (its affinity: taskset, cpuset).
    pub allowed: CoreSet,
    /// The cgroup CPU quota, if there is one.
    pub quota: Option<CpuQuota>,
}

impl CoreSizing {
    /// The cores to run reactors on, and why.
    ///
    /// At most one of `mask`, `list` and `count` may be given; their cores
    /// must be in `allowed`, and `count` takes the first `count` of them.
    /// With none, the first allowed CPUs, one per whole CPU of `quota`
    /// (at least one, at most all allowed), or only the first without a
    /// quota.
    pub fn choose(
        mask: Option<&str>,
        list: Option<&str>,
        count: Option<NonZeroUsize>,
        allowed: CoreSet,
        quota: Option<CpuQuota>,
    ) -> Result<(CoreSet, CoreSizing), CoreError> {
        let first = |n: usize| CoreSet::from_cpus(allowed.iter().take(n));
        let (cores, source) = match (mask, list, count) {
            (Some(_), Some(_), _) => return Err(CoreError::BothGiven),
            (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                return Err(CoreError::CountWithCores);
            }
            (Some(mask), None, None) => (CoreSet::parse_mask(mask)?, CoreSource::Mask),
            (None, Some(list), None) => (CoreSet::parse_list(list)?, CoreSource::List),
            (None, None, Some(count)) => {
                if count.get() > allowed.len() {
                    return Err(CoreError::TooFewAllowed {
                        count: count.get(),
                        available: allowed,
                    });
                }
                (first(count.get())?, CoreSource::Count)
            }
            (None, None, None) => match quota {
                Some(q) => (first(q.whole_cpus())?, CoreSource::CpuQuota),
                None => (first(1)?, CoreSource::FirstAllowed),
            },
        };
        cores.check_within(&allowed)?;
        Ok((
            cores,
            CoreSizing {
                source,
                allowed,
                quota,
            },
        ))
    }

    /// The warning to log when the CPUs do not match the quota: the
    /// allowed set is larger than the quota (the engine runs fewer
    /// reactors than it may), or the flags asked for more reactors than
    /// the quota (busy reactors get throttled). `None` when they match.
    pub fn warning(&self, cores: &CoreSet) -> Option<String> {
        let quota = self.quota?;
        let reactors = |n: usize| match n {
            1 => "1 reactor".to_owned(),
            n => format!("{n} reactors"),
        };
        match self.source {
            CoreSource::CpuQuota if quota.exceeded_by(self.allowed.len()) => Some(format!(
                "the cpuset allows {} CPUs ({}) but the CPU quota is {quota}: running {}; \
                 set CPU requests and limits to whole CPUs to use them all",
                self.allowed.len(),
                self.allowed,
                reactors(cores.len()),
            )),
            CoreSource::List | CoreSource::Mask | CoreSource::Count
                if quota.exceeded_by(cores.len()) =>
            {
                Some(format!(
                    "running {} as the {} asks, but the CPU quota is {quota}: the kernel \
                     will throttle busy reactors; ask for at most {} or raise the CPU limit",
                    reactors(cores.len()),
                    match self.source {
                        CoreSource::List => "core list",
                        CoreSource::Mask => "core mask",
                        _ => "core count",
                    },
                    reactors(quota.whole_cpus()),
                ))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[u32]) -> CoreSet {
        CoreSet::from_cpus(cpus.iter().copied()).unwrap()
    }

    fn quota(cpus_x100: u64) -> Option<CpuQuota> {
        CpuQuota::new(cpus_x100 * 1000, 100_000)
    }

    fn count(n: usize) -> Option<NonZeroUsize> {
        NonZeroUsize::new(n)
    }

    /// The cores and source chosen with no flag.
    fn by_default(allowed: &[u32], q: Option<CpuQuota>) -> (Vec<u32>, CoreSource) {
        let (cores, sizing) = CoreSizing::choose(None, None, None, set(allowed), q).unwrap();
        (cores.cpus().to_vec(), sizing.source)
    }

    #[test]
    fn without_flags_the_quota_sizes_the_reactors() {
        use CoreSource::{CpuQuota as Quota, FirstAllowed};
        assert_eq!(by_default(&[0, 1], None), (vec![0], FirstAllowed));
        assert_eq!(by_default(&[2, 5, 7], None), (vec![2], FirstAllowed));
        assert_eq!(by_default(&[0, 1], quota(100)), (vec![0], Quota));
        assert_eq!(by_default(&[0, 1], quota(199)), (vec![0], Quota));
        assert_eq!(by_default(&[0, 1], quota(200)), (vec![0, 1], Quota));
        // At least one reactor, at most every allowed CPU.
        assert_eq!(by_default(&[4, 6], quota(50)), (vec![4], Quota));
        assert_eq!(by_default(&[4, 6], quota(800)), (vec![4, 6], Quota));
        assert_eq!(by_default(&[1, 3, 5, 7], quota(250)), (vec![1, 3], Quota));
    }

    #[test]
    fn flags_win_over_the_quota() {
        let allowed = set(&[0, 1, 2, 3]);
        let choose = |m, l, c| CoreSizing::choose(m, l, c, allowed.clone(), quota(100));
        let (cores, sizing) = choose(Some("0xc"), None, None).unwrap();
        assert_eq!(
            (cores.cpus(), sizing.source),
            (&[2, 3][..], CoreSource::Mask)
        );
        let (cores, sizing) = choose(None, Some("1-2"), None).unwrap();
        assert_eq!(
            (cores.cpus(), sizing.source),
            (&[1, 2][..], CoreSource::List)
        );
        let (cores, sizing) = choose(None, None, count(3)).unwrap();
        assert_eq!(
            (cores.cpus(), sizing.source),
            (&[0, 1, 2][..], CoreSource::Count)
        );
        assert_eq!(sizing.allowed, allowed);
        assert_eq!(sizing.quota, quota(100));
    }

    #[test]
    fn bad_requests_are_refused() {
        let allowed = set(&[0, 1]);
        let choose = |m, l, c| CoreSizing::choose(m, l, c, allowed.clone(), None);
        assert_eq!(
            choose(Some("0x1"), Some("0"), None),
            Err(CoreError::BothGiven)
        );
        assert_eq!(
            choose(Some("0x1"), None, count(1)),
            Err(CoreError::CountWithCores)
        );
        assert_eq!(
            choose(None, Some("0"), count(1)),
            Err(CoreError::CountWithCores)
        );
        let err = choose(None, None, count(3)).unwrap_err();
        assert_eq!(
            err,
            CoreError::TooFewAllowed {
                count: 3,
                available: allowed.clone()
            }
        );
        assert!(
            err.to_string()
                .starts_with("--core-count 3 asks for 3 cores but this process may run on 2 (0-1)"),
            "{err}"
        );
        assert!(matches!(
            choose(None, Some("0,5"), None),
            Err(CoreError::Unavailable { .. })
        ));
        assert!(matches!(
            choose(Some("0xz"), None, None),
            Err(CoreError::Malformed { .. })
        ));
    }

    fn warning(
        mask: Option<&str>,
        c: Option<NonZeroUsize>,
        allowed: &[u32],
        q: Option<CpuQuota>,
    ) -> Option<String> {
        let (cores, sizing) = CoreSizing::choose(mask, None, c, set(allowed), q).unwrap();
        sizing.warning(&cores)
    }

    #[test]
    fn a_cpuset_larger_than_the_quota_is_named_with_both_numbers() {
        assert_eq!(
            warning(None, None, &[0, 1], quota(100)).unwrap(),
            "the cpuset allows 2 CPUs (0-1) but the CPU quota is 1.00 CPUs: running 1 reactor; \
             set CPU requests and limits to whole CPUs to use them all"
        );
        let w = warning(None, None, &[0, 1, 2], quota(250)).unwrap();
        assert!(
            w.starts_with(
                "the cpuset allows 3 CPUs (0-2) but the CPU quota is 2.50 CPUs: running 2 reactors"
            ),
            "{w}"
        );
        // As many CPUs as the quota, or no quota: nothing to say.
        assert_eq!(warning(None, None, &[0, 1], quota(200)), None);
        assert_eq!(warning(None, None, &[0, 1], quota(400)), None);
        assert_eq!(warning(None, None, &[0, 1], None), None);
    }

    #[test]
    fn flags_beyond_the_quota_are_obeyed_with_a_warning() {
        assert_eq!(
            warning(None, count(2), &[0, 1], quota(100)).unwrap(),
            "running 2 reactors as the core count asks, but the CPU quota is 1.00 CPUs: the \
             kernel will throttle busy reactors; ask for at most 1 reactor or raise the CPU limit"
        );
        let w = warning(Some("0x3"), None, &[0, 1], quota(150)).unwrap();
        assert!(
            w.starts_with("running 2 reactors as the core mask asks"),
            "{w}"
        );
        assert_eq!(warning(None, count(1), &[0, 1], quota(100)), None);
        assert_eq!(warning(None, count(2), &[0, 1], quota(200)), None);
        assert_eq!(warning(None, count(2), &[0, 1], None), None);
    }
}
