//! The CPU time this process may use: the CFS bandwidth quota of its
//! cgroup (`cpu.max` on v2, `cpu.cfs_quota_us` / `cpu.cfs_period_us` on
//! v1), the tightest of the cgroup and its ancestors. A Kubernetes CPU
//! limit is such a quota; a busy reactor beyond it is throttled by the
//! kernel, so the daemon runs no more reactors than whole CPUs of it
//! (see [`super::core_sizing`]).
//!
//! Thread: any. Read once at start by the daemon.

use std::fmt;
use std::path::Path;

use super::cgroup::{Cgroup, CgroupVersion};

/// A CPU quota: `quota_us` of CPU time in every `period_us`, i.e.
/// `quota_us / period_us` CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuQuota {
    quota_us: u64,
    period_us: u64,
}

impl CpuQuota {
    /// A quota of `quota_us` per `period_us`; `None` if either is zero.
    pub fn new(quota_us: u64, period_us: u64) -> Option<CpuQuota> {
        (quota_us > 0 && period_us > 0).then_some(CpuQuota {
            quota_us,
            period_us,
        })
    }

    /// The quota of this process, if its cgroup or an ancestor has one.
    pub fn of_this_process() -> Option<CpuQuota> {
        CpuQuota::read(Path::new("/"))
    }

    /// The quota under the filesystem root `root`: the tightest of this
    /// process's cpu cgroup and its ancestors; `None` without one, or when
    /// the files cannot be found or read (logged at debug level).
    pub fn read(root: &Path) -> Option<CpuQuota> {
        let cgroup = Cgroup::of(root, "cpu")?;
        let quotas = match cgroup.version {
            CgroupVersion::V2 => cgroup
                .each("cpu.max")
                .into_iter()
                .filter_map(|(path, text)| {
                    CpuQuota::parse_cpu_max(&text)
                        .inspect_err(|e| tracing::debug!("{}: {e}", path.display()))
                        .ok()?
                })
                .collect::<Vec<_>>(),
            CgroupVersion::V1 => cgroup
                .dirs
                .iter()
                .filter_map(|dir| {
                    let quota = super::cgroup::read(&dir.join("cpu.cfs_quota_us"))?;
                    let period = super::cgroup::read(&dir.join("cpu.cfs_period_us"))?;
                    CpuQuota::parse_cfs(&quota, &period)
                        .inspect_err(|e| tracing::debug!("{}: {e}", dir.display()))
                        .ok()?
                })
                .collect(),
        };
        quotas.into_iter().reduce(CpuQuota::tighter)
    }

    /// Parses a v2 `cpu.max`: `QUOTA PERIOD`, or `max PERIOD` (no quota:
    /// `Ok(None)`). The period is optional (100000 when left out).
    pub fn parse_cpu_max(text: &str) -> Result<Option<CpuQuota>, String> {
        let mut fields = text.split_whitespace();
        let quota = fields.next().ok_or("cpu.max is empty")?;
        let period = fields.next().unwrap_or("100000");
        if quota == "max" {
            return Ok(None);
        }
        let number = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("cpu.max: `{s}` is not a number of microseconds"))
        };
        Ok(CpuQuota::new(number(quota)?, number(period)?))
    }

    /// Parses v1's `cpu.cfs_quota_us` and `cpu.cfs_period_us`; a quota of
    /// -1 is no quota (`Ok(None)`).
    pub fn parse_cfs(quota: &str, period: &str) -> Result<Option<CpuQuota>, String> {
        let quota: i64 = quota
            .trim()
            .parse()
            .map_err(|_| format!("cpu.cfs_quota_us: `{}` is not a number", quota.trim()))?;
        let period: u64 = period
            .trim()
            .parse()
            .map_err(|_| format!("cpu.cfs_period_us: `{}` is not a number", period.trim()))?;
        Ok(u64::try_from(quota)
            .ok()
            .and_then(|q| CpuQuota::new(q, period)))
    }

    /// The smaller of two quotas.
    pub fn tighter(self, other: CpuQuota) -> CpuQuota {
        // a/b < c/d  <=>  a*d < c*b, exactly in u128.
        let mine = u128::from(self.quota_us) * u128::from(other.period_us);
        let theirs = u128::from(other.quota_us) * u128::from(self.period_us);
        if mine <= theirs { self } else { other }
    }

    /// The quota in CPUs, e.g. 1.5.
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us as f64
    }

    /// The whole CPUs in the quota, rounded down, and at least one.
    pub fn whole_cpus(&self) -> usize {
        usize::try_from(self.quota_us / self.period_us)
            .unwrap_or(usize::MAX)
            .max(1)
    }

    /// Whether `n` busy CPUs need more than the quota gives.
    pub fn exceeded_by(&self, n: usize) -> bool {
        u128::from(self.quota_us) < n as u128 * u128::from(self.period_us)
    }
}

/// `1.50 CPUs`.
impl fmt::Display for CpuQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.2} CPUs", self.cpus())
    }
}

#[cfg(test)]
mod tests {
    use super::super::cgroup::tests::{v1_root, v2_root};
    use super::*;

    fn quota(q: u64, p: u64) -> CpuQuota {
        CpuQuota::new(q, p).unwrap()
    }

    #[test]
    fn cpu_max_parses() {
        assert_eq!(CpuQuota::parse_cpu_max("max 100000\n"), Ok(None));
        assert_eq!(CpuQuota::parse_cpu_max("max"), Ok(None));
        assert_eq!(
            CpuQuota::parse_cpu_max("150000 100000\n"),
            Ok(Some(quota(150_000, 100_000)))
        );
        assert_eq!(
            CpuQuota::parse_cpu_max("50000"),
            Ok(Some(quota(50_000, 100_000)))
        );
        assert!(CpuQuota::parse_cpu_max("").is_err());
        assert!(CpuQuota::parse_cpu_max("lots 100000").is_err());
        assert!(CpuQuota::parse_cpu_max("100000 x").is_err());
    }

    #[test]
    fn cfs_files_parse() {
        assert_eq!(CpuQuota::parse_cfs("-1\n", "100000\n"), Ok(None));
        assert_eq!(
            CpuQuota::parse_cfs("200000\n", "100000\n"),
            Ok(Some(quota(200_000, 100_000)))
        );
        assert_eq!(CpuQuota::parse_cfs("100000", "0"), Ok(None));
        assert!(CpuQuota::parse_cfs("x", "100000").is_err());
        assert!(CpuQuota::parse_cfs("100000", "").is_err());
    }

    #[test]
    fn whole_cpus_round_down_to_at_least_one() {
        assert_eq!(quota(100_000, 100_000).whole_cpus(), 1);
        assert_eq!(quota(250_000, 100_000).whole_cpus(), 2);
        assert_eq!(quota(50_000, 100_000).whole_cpus(), 1);
        assert_eq!(quota(400_000, 100_000).whole_cpus(), 4);
        assert!(quota(150_000, 100_000).exceeded_by(2));
        assert!(!quota(200_000, 100_000).exceeded_by(2));
        assert_eq!(quota(150_000, 100_000).to_string(), "1.50 CPUs");
        assert_eq!(quota(1_000, 1_000).to_string(), "1.00 CPUs");
    }

    #[test]
    fn tighter_compares_ratios() {
        let one = quota(100_000, 100_000);
        let half = quota(25_000, 50_000);
        assert_eq!(one.tighter(half), half);
        assert_eq!(half.tighter(one), half);
        assert_eq!(one.tighter(quota(200_000, 200_000)), one);
    }

    #[test]
    fn v2_takes_the_tightest_of_the_ancestors() {
        let root = v2_root("quota-v2", "/kubepods/pod1/ctr");
        assert_eq!(CpuQuota::read(&root.0), None, "no cpu.max anywhere");
        root.write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
        assert_eq!(CpuQuota::read(&root.0), None, "max is no quota");
        // The pod's limit sits on the container's parent.
        root.write("sys/fs/cgroup/kubepods/pod1/cpu.max", "200000 100000\n")
            .write("sys/fs/cgroup/kubepods/cpu.max", "400000 100000\n");
        assert_eq!(CpuQuota::read(&root.0), Some(quota(200_000, 100_000)));
        root.write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "150000 100000\n");
        assert_eq!(CpuQuota::read(&root.0), Some(quota(150_000, 100_000)));
        // A malformed file counts as none; the others still count.
        root.write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "garbage\n");
        assert_eq!(CpuQuota::read(&root.0), Some(quota(200_000, 100_000)));
    }

    #[test]
    fn v1_reads_the_cfs_files() {
        let root = v1_root("quota-v1", "/engine");
        let cpu = "sys/fs/cgroup/cpu,cpuacct";
        root.write(&format!("{cpu}/cpu.cfs_quota_us"), "-1\n")
            .write(&format!("{cpu}/cpu.cfs_period_us"), "100000\n")
            .write(&format!("{cpu}/engine/cpu.cfs_quota_us"), "-1\n")
            .write(&format!("{cpu}/engine/cpu.cfs_period_us"), "100000\n");
        assert_eq!(CpuQuota::read(&root.0), None);
        root.write(&format!("{cpu}/engine/cpu.cfs_quota_us"), "100000\n");
        assert_eq!(CpuQuota::read(&root.0), Some(quota(100_000, 100_000)));
    }
}
