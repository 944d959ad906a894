//! CPU pinning: binds the calling thread to one CPU or confines it to a
//! set, and tells which CPU a thread is on.
//!
//! Thread: any. Each call acts on the calling thread only.
//!
//! Reactors pin themselves with [`pin_current_thread`] when they start; the
//! set of CPUs they may choose from is
//! [`allowed_cpus`](super::cores::allowed_cpus). The daemon's control-plane
//! threads confine themselves to the CPUs left over with
//! [`confine_current_thread`].

use rustix::thread::{CpuSet, sched_getcpu, sched_setaffinity};
use thiserror::Error;

use super::cores::MAX_CPUS;

/// Why the calling thread could not be pinned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AffinityError {
    /// The CPU id does not fit the kernel CPU mask.
    #[error("cannot pin the calling thread to cpu {cpu}: CPU ids must be below {MAX_CPUS}")]
    OutOfRange {
        /// The CPU asked for.
        cpu: u32,
    },
    /// The kernel refused the new affinity.
    #[error(
        "cannot pin the calling thread to cpu {cpu} (sched_setaffinity failed: {errno}); check \
         that the cpu is online and in this process's allowed set (`taskset -p $PID`, cgroup \
         cpuset.cpus)"
    )]
    Pin {
        /// The CPU asked for.
        cpu: u32,
        /// The error the kernel returned.
        errno: rustix::io::Errno,
    },
}

/// Restricts the calling thread to run on exactly `cpu`.
///
/// The kernel moves the thread there before the call returns, so
/// [`current_cpu`] right after it reports `cpu`.
pub fn pin_current_thread(cpu: u32) -> Result<(), AffinityError> {
    if cpu >= MAX_CPUS {
        return Err(AffinityError::OutOfRange { cpu });
    }
    let mut set = CpuSet::new();
    set.set(cpu as usize);
    sched_setaffinity(None, &set).map_err(|errno| AffinityError::Pin { cpu, errno })
}

/// Restricts the calling thread to the CPUs of `cpus` (for threads that
/// must stay off the reactors' cores, such as the control plane's).
pub fn confine_current_thread(cpus: &[u32]) -> Result<(), AffinityError> {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        if cpu >= MAX_CPUS {
            return Err(AffinityError::OutOfRange { cpu });
        }
        set.set(cpu as usize);
    }
    let first = cpus.first().copied().unwrap_or(0);
    sched_setaffinity(None, &set).map_err(|errno| AffinityError::Pin { cpu: first, errno })
}

/// The CPU the calling thread is running on now (`sched_getcpu`).
///
/// Unless the thread is pinned, the answer may be stale by the time it is
/// read.
pub fn current_cpu() -> u32 {
    // CPU ids are below the kernel's NR_CPUS (at most 8192), so they fit.
    sched_getcpu() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::cores::allowed_cpus;

    #[test]
    fn pinning_moves_the_thread_to_each_allowed_cpu() {
        let allowed = allowed_cpus().unwrap();
        std::thread::spawn(move || {
            // Twice round, so each pin moves the thread off another cpu.
            for cpu in allowed.iter().chain(allowed.iter().rev()) {
                pin_current_thread(cpu).unwrap();
                assert_eq!(current_cpu(), cpu, "right after pinning to {cpu}");
                // It stays there across a reschedule.
                for _ in 0..100 {
                    std::thread::yield_now();
                }
                assert_eq!(current_cpu(), cpu, "after yielding on {cpu}");
                let affinity = rustix::thread::sched_getaffinity(None).unwrap();
                assert_eq!(affinity.count(), 1);
                assert!(affinity.is_set(cpu as usize));
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pinning_to_an_unavailable_cpu_fails() {
        let allowed = allowed_cpus().unwrap();
        let outside = (0..MAX_CPUS).find(|&cpu| !allowed.contains(cpu)).unwrap();
        std::thread::spawn(move || {
            let before = rustix::thread::sched_getaffinity(None).unwrap();
            let err = pin_current_thread(outside).unwrap_err();
            assert_eq!(
                err,
                AffinityError::Pin {
                    cpu: outside,
                    errno: rustix::io::Errno::INVAL
                }
            );
            assert!(err.to_string().contains(&format!("cpu {outside}")), "{err}");
            // A failed pin leaves the affinity as it was.
            assert_eq!(rustix::thread::sched_getaffinity(None).unwrap(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pinning_beyond_the_kernel_mask_fails() {
        assert_eq!(
            pin_current_thread(MAX_CPUS),
            Err(AffinityError::OutOfRange { cpu: MAX_CPUS })
        );
        assert_eq!(
            pin_current_thread(u32::MAX),
            Err(AffinityError::OutOfRange { cpu: u32::MAX })
        );
    }

    #[test]
    fn current_cpu_is_an_allowed_cpu() {
        assert!(allowed_cpus().unwrap().contains(current_cpu()));
    }
}
