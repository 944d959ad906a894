//! What a reactor says about a panic it caught: jobs, tasks and pollers
//! that panic are logged and dropped, and the reactor goes on.
//!
//! Thread: a reactor thread.

/// The message a panic carried, or `unknown panic`.
pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
