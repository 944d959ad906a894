//! Why DMA memory could not be had: [`DmaError`], each variant saying what
//! to do about it.
//!
//! Thread: any.

use thiserror::Error;

/// Why DMA memory could not be had.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DmaError {
    /// A region of no bytes was asked for.
    #[error("cannot allocate a DMA region of 0 bytes: ask for at least one byte")]
    ZeroLength,
    /// The length overflows when rounded up to whole hugepages.
    #[error(
        "cannot allocate a DMA region of {len} bytes: rounded up to 2 MiB it does not fit the \
         address space; ask for less"
    )]
    TooLarge {
        /// The length asked for.
        len: usize,
    },
    /// Fewer hugepages are available than the region needs.
    #[error(
        "cannot map {len} bytes of hugepage memory: only {available} free 2 MiB hugepages \
         ({needed} needed); reserve more with `echo {suggested} > /proc/sys/vm/nr_hugepages`"
    )]
    NotEnoughHugepages {
        /// The rounded length of the region.
        len: usize,
        /// Hugepages the region needs.
        needed: u64,
        /// Hugepages free and not reserved by other mappings.
        available: u64,
        /// A pool size that would leave enough free hugepages.
        suggested: u64,
    },
    /// The hugepage mapping failed although enough hugepages seem free.
    #[error(
        "cannot map {len} bytes of hugepage memory (mmap with MAP_HUGETLB failed: {errno}); \
         check HugePages_Free in /proc/meminfo and the hugetlb limit of this process's cgroup, \
         and reserve more with `echo N > /proc/sys/vm/nr_hugepages`"
    )]
    HugepageMap {
        /// The rounded length of the region.
        len: usize,
        /// The error the kernel returned.
        errno: rustix::io::Errno,
    },
    /// The normal-page mapping failed.
    #[error(
        "cannot map {len} bytes of memory (mmap failed: {errno}); ask for less, or raise the \
         memory limits of this process (ulimit -v, cgroup memory.max)"
    )]
    Map {
        /// The rounded length of the region.
        len: usize,
        /// The error the kernel returned.
        errno: rustix::io::Errno,
    },
    /// Not enough memory can be had for the region: refused before mapping,
    /// so a request never gets the process OOM-killed.
    #[error(
        "cannot allocate {len} bytes: only {available} bytes can be had ({limit}), keeping \
         {reserve} bytes in reserve; ask for less, free memory, or reserve hugepages \
         (`echo N > /proc/sys/vm/nr_hugepages`)"
    )]
    OutOfMemory {
        /// Bytes asked for.
        len: usize,
        /// Bytes that can be had.
        available: u64,
        /// What bounds `available`.
        limit: &'static str,
        /// Bytes kept free for the rest of the process.
        reserve: u64,
    },
    /// `/proc/meminfo` could not be read or understood.
    #[error(
        "cannot read the hugepage counters in /proc/meminfo: {reason}; check that /proc is mounted"
    )]
    Meminfo {
        /// What went wrong.
        reason: String,
    },
}
