//! A completion queue entry as the host reads it from a response capsule.
//!
//! Thread: any (a plain value).

/// Sixteen bytes of completion.
#[derive(Debug, Clone, Copy)]
pub struct Cqe(pub [u8; 16]);

impl Cqe {
    /// The entry at the start of `b` (at least 16 bytes).
    pub fn from_slice(b: &[u8]) -> Cqe {
        let mut c = [0u8; 16];
        c.copy_from_slice(&b[..16]);
        Cqe(c)
    }

    /// Dword 0.
    pub fn dw0(&self) -> u32 {
        u32::from_le_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }

    /// Dword 1.
    pub fn dw1(&self) -> u32 {
        u32::from_le_bytes([self.0[4], self.0[5], self.0[6], self.0[7]])
    }

    /// Command identifier.
    pub fn cid(&self) -> u16 {
        u16::from_le_bytes([self.0[12], self.0[13]])
    }

    /// Status: type in bits 10:8, code in bits 7:0 (0: success).
    pub fn status(&self) -> u16 {
        (u16::from_le_bytes([self.0[14], self.0[15]]) >> 1) & 0x7FF
    }
}
