//! [`VfioFailure`]: what went wrong at the ioctl level of the VFIO
//! backend.
//!
//! Thread: any (a plain value).

use std::fmt;

/// What went wrong at the ioctl level.
#[derive(Debug)]
pub enum VfioFailure {
    /// `/dev/vfio/vfio` could not be opened.
    Container(std::io::Error),
    /// The container lacks the type-1 IOMMU backend.
    NoType1,
    /// The group file could not be opened.
    GroupOpen(u32, std::io::Error),
    /// The group has devices not bound to vfio-pci.
    NotViable(u32),
    /// An IOMMU call (named) failed with this error.
    Iommu(&'static str, std::io::Error),
    /// Anything else, with the call that failed.
    Other(String),
}

impl fmt::Display for VfioFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VfioFailure::Container(e) => write!(f, "cannot open /dev/vfio/vfio: {e}"),
            VfioFailure::NoType1 => f.write_str("the VFIO container has no type-1 IOMMU backend"),
            VfioFailure::GroupOpen(g, e) => write!(f, "cannot open /dev/vfio/{g}: {e}"),
            VfioFailure::NotViable(g) => write!(f, "IOMMU group {g} is not viable"),
            VfioFailure::Iommu(call, e) => write!(f, "{call}: {e}"),
            VfioFailure::Other(s) => f.write_str(s),
        }
    }
}
