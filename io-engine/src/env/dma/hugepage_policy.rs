//! [`HugepagePolicy`]: where a DMA region's pages come from.
//!
//! Thread: any.

/// Where a region's pages come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HugepagePolicy {
    /// Hugepages when enough are reserved, else normal pages with a warning
    /// (once per process).
    #[default]
    Prefer,
    /// Hugepages or an error saying how to reserve them.
    Require,
    /// Normal pages only, without a warning.
    Never,
}
