//! [`FileDevice`]: what `uring` and `aio` devices share: identity, the
//! open backing, and which operations it serves.
//!
//! Thread: any (read-only after creation).

use super::backing::{Backing, BackingKind};
use crate::bdev::identity::Identity;
use crate::bdev::io::IoType;
use crate::bdev::uri::BdevSpec;

/// A device with a backing.
pub(super) struct FileDevice {
    pub(super) id: Identity,
    pub(super) backing: Backing,
}

impl FileDevice {
    pub(super) fn new(spec: BdevSpec, backing: Backing) -> FileDevice {
        FileDevice {
            id: Identity::new(spec),
            backing,
        }
    }

    /// Which operations the backing serves: a read-only one only reads (and
    /// flushes, which change nothing);
    /// unmap needs a backing that deallocates; copy is `copy_file_range`
    /// on a file (a block device's copy is the bdev layer's emulation).
    pub(super) fn supports(&self, op: IoType) -> bool {
        let writable = !self.backing.readonly;
        match op {
            IoType::Read | IoType::Flush => true,
            IoType::Write | IoType::WriteZeroes => writable,
            IoType::Unmap => writable && self.backing.discard,
            IoType::Copy => writable && self.backing.kind == BackingKind::File,
        }
    }

    /// The device's name, for logs.
    pub(super) fn name(&self) -> &str {
        &self.id.spec.name
    }
}
