//! What this engine binary was built from: its version and git revision.
//!
//! Thread: any; constant data.

/// What the engine was built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// Package version.
    pub version: &'static str,
    /// Git revision, or "unknown".
    pub revision: &'static str,
}

/// This build.
pub const BUILD: BuildInfo = BuildInfo {
    version: env!("CARGO_PKG_VERSION"),
    revision: env!("IO_ENGINE_GIT_REVISION"),
};
