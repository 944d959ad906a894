//! How the software module pulls the next task's buffers toward the core
//! while the current task runs: a choice per processor design, because
//! what wins on one loses on another.
//!
//! - [`Prefetch::Paced`]: a copy pulls in the next task's whole source
//!   with `prefetchnta`, one line per 64 bytes it copies
//!   (`Kernels::copy_ahead`). The winner on AMD Zen 5 (docs/performance.md:
//!   malloc random reads 4.4 to 5.2 M IOPS against a burst before the copy).
//! - [`Prefetch::Burst`]: before each task, the first 1 KiB of the next
//!   task's source and 256 B of its destination, with `prefetcht0`, in
//!   one burst: what the memcpy ceiling's prefetching loop does, which was
//!   the fastest copy loop measured on an Intel Xeon (Emerald Rapids: 2.65
//!   M copies/s against 1.72 M plain), where the paced copy gave malloc
//!   1.02 M IOPS.
//! - [`Prefetch::Off`]: nothing; for measurements.
//!
//! [`Prefetch::for_cpu`] picks by vendor and family; the environment
//! variable `IO_ENGINE_ACCEL_PREFETCH` (`paced`, `burst`, `off`) overrides
//! it, for operators and benchmarks.
//!
//! Thread: any; the choice is made once, when the module is created.

use std::fmt;
use std::str::FromStr;

use crate::env::cpu::{CpuKind, Vendor};

/// The environment variable that overrides the choice.
pub const PREFETCH_ENV: &str = "IO_ENGINE_ACCEL_PREFETCH";

/// A prefetching strategy of the software module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefetch {
    /// The copy pulls in the next source, spread over its loop.
    Paced,
    /// A burst of prefetches of the next task's buffers before each task.
    Burst,
    /// No prefetching.
    Off,
}

impl Prefetch {
    /// The strategy for a kind of CPU: paced on AMD Zen (where it was
    /// measured best), a burst elsewhere (the memcpy ceiling's loop, the
    /// best measured on Intel Xeon).
    pub fn for_cpu(cpu: CpuKind) -> Prefetch {
        match cpu.vendor {
            Vendor::Amd if cpu.is_amd_zen() => Prefetch::Paced,
            _ => Prefetch::Burst,
        }
    }

    /// The strategy for this process: `IO_ENGINE_ACCEL_PREFETCH` when set
    /// (an unknown value is logged and ignored), else [`Prefetch::for_cpu`].
    pub fn for_this_process() -> Prefetch {
        Prefetch::chosen(std::env::var(PREFETCH_ENV).ok().as_deref(), CpuKind::this())
    }

    /// The override `value` if it names a strategy, else the one for `cpu`
    /// (an unknown value is logged).
    fn chosen(value: Option<&str>, cpu: CpuKind) -> Prefetch {
        let by_cpu = Prefetch::for_cpu(cpu);
        match value.map(str::parse::<Prefetch>) {
            Some(Ok(p)) => p,
            Some(Err(e)) => {
                tracing::warn!("{PREFETCH_ENV}: {e}; using {by_cpu} prefetch for {cpu}");
                by_cpu
            }
            None => by_cpu,
        }
    }
}

impl fmt::Display for Prefetch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Prefetch::Paced => "paced",
            Prefetch::Burst => "burst",
            Prefetch::Off => "off",
        })
    }
}

impl FromStr for Prefetch {
    type Err = String;

    fn from_str(s: &str) -> Result<Prefetch, String> {
        match s {
            "paced" => Ok(Prefetch::Paced),
            "burst" => Ok(Prefetch::Burst),
            "off" => Ok(Prefetch::Off),
            _ => Err(format!(
                "{s:?} is not a prefetch strategy (paced, burst, off)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zen_paces_and_other_cpus_burst() {
        let zen5 = CpuKind::from_cpuid(b"AuthenticAMD", 0x00B0_0F21);
        let emr = CpuKind::from_cpuid(b"GenuineIntel", 0x000C_06F2);
        let k10 = CpuKind::from_cpuid(b"AuthenticAMD", 0x0010_0F42);
        assert_eq!(Prefetch::for_cpu(zen5), Prefetch::Paced);
        assert_eq!(Prefetch::for_cpu(emr), Prefetch::Burst);
        assert_eq!(Prefetch::for_cpu(k10), Prefetch::Burst);
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for p in [Prefetch::Paced, Prefetch::Burst, Prefetch::Off] {
            assert_eq!(p.to_string().parse::<Prefetch>(), Ok(p));
        }
        assert!(
            "fast"
                .parse::<Prefetch>()
                .unwrap_err()
                .contains("paced, burst, off")
        );
    }
}
