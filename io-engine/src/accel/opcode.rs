//! The accel operations: what a task asks a module to do.
//!
//! Thread: any; a plain value.

use std::fmt;
use std::str::FromStr;

/// An accel operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Opcode {
    /// Copy `len` bytes from `src` to `dst` (non-overlapping).
    Copy = 0,
    /// Fill `len` bytes of `dst` with one byte.
    Fill = 1,
    /// Compare `len` bytes of `src` and `src2`.
    Compare = 2,
    /// Copy `src` to both `dst` and `dst2` (4 KiB aligned destinations).
    Dualcast = 3,
    /// CRC-32C of the source vectors.
    Crc32c = 4,
    /// Copy the source vectors to `dst` and compute their CRC-32C.
    CopyCrc32c = 5,
}

impl Opcode {
    /// Every opcode, in wire order.
    pub const ALL: [Opcode; 6] = [
        Opcode::Copy,
        Opcode::Fill,
        Opcode::Compare,
        Opcode::Dualcast,
        Opcode::Crc32c,
        Opcode::CopyCrc32c,
    ];
    /// Number of opcodes.
    pub const COUNT: usize = 6;

    /// The name used by flags, the API and metrics: `copy`, `fill`,
    /// `compare`, `dualcast`, `crc32c`, `copy_crc32c`.
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Copy => "copy",
            Opcode::Fill => "fill",
            Opcode::Compare => "compare",
            Opcode::Dualcast => "dualcast",
            Opcode::Crc32c => "crc32c",
            Opcode::CopyCrc32c => "copy_crc32c",
        }
    }

    /// Index into per-opcode tables.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }
}

impl serde::Serialize for Opcode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Opcode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Opcode::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown accel opcode {s:?}: expected one of copy, fill, compare, dualcast, crc32c, copy_crc32c"
                )
            })
    }
}
