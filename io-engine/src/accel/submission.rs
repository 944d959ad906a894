//! How a module took a submission: its answer to
//! [`ModuleChannel::submit`](super::ModuleChannel::submit), as Firecracker's
//! block engines answer `Submitted` or `Executed`.
//!
//! Thread: any; a plain value.

/// How a module took the tasks of one submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Submission {
    /// Every task finished inside the call and was reported in `done`,
    /// in task order (the software module): the module holds none of
    /// them.
    Executed,
    /// The module holds the tasks it did not report in `done` and
    /// reports them from its poll (an offload engine).
    Submitted,
}
