//! Environment: what every layer stands on. Core sets and CPU pinning, the
//! cgroup limits (CPU quota, memory limit) and the reactor count sized from
//! them, core slots (a unique number per data-path thread), hugepage-backed DMA
//! memory, its IOVA and the memory check before mapping it, the cycle
//! clock, the size of the last-level cache, the VFIO plumbing that drives
//! PCI functions from userspace (`vfio`), Unix socket paths owned like
//! ports, and the TLS files (certificate chain, private key, CA bundle)
//! every TLS user reads through one loader (`tls_identity`, `tls_ca`), and
//! the server certificate resolver that picks up their renewal
//! (`reloading_cert`).
//!
//! Thread: any. Nothing here keeps per-core state.

pub mod affinity;
pub mod cache;
pub mod cgroup;
pub mod core_sizing;
pub mod core_slot;
pub mod core_source;
pub mod cores;
pub mod cpu;
pub mod cpu_quota;
pub mod dma;
pub mod logging;
pub mod memory_limit;
mod pem_file;
pub mod reloading_cert;
pub mod socket_path;
pub mod tls_ca;
pub mod tls_file;
pub mod tls_file_error;
pub mod tls_identity;
#[cfg(test)]
pub(crate) mod tls_scratch;
pub mod tsc;
pub mod vfio;
pub mod xorshift;
