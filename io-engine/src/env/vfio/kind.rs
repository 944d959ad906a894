//! [`Kind`]: which module a generic VFIO step works for (I/OAT, DSA), as
//! its notes and log lines name it.
//!
//! Thread: any (a plain value).

/// Which module a generic VFIO step works for, as its messages name it.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// The prefix of its notes (`ioat`, `dsa`).
    pub tag: &'static str,
    /// The engine by name (`I/OAT`, `DSA`).
    pub what: &'static str,
    /// The kernel driver that owns such functions (`ioatdma`, `idxd`).
    pub kernel_driver: &'static str,
    /// What to say after the kernel driver's bind note (may be empty).
    pub kernel_hint: &'static str,
}
