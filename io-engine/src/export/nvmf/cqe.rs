//! A completion queue entry as a host reads it from a response capsule:
//! the sixteen bytes and the fields a host looks at. The target writes its
//! entries with [`Completion`](super::Completion); hosts (nvmf-perf, the
//! tests' hosts) read them with this.
//!
//! Thread: any (a plain value).

/// Sixteen bytes of completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cqe(pub [u8; 16]);

impl Cqe {
    /// The entry at the start of `b`, if its 16 bytes are there.
    pub fn from_slice(b: &[u8]) -> Option<Cqe> {
        b.first_chunk().map(|c: &[u8; 16]| Cqe(*c))
    }

    /// Dword 0.
    pub fn dw0(&self) -> u32 {
        u32::from_le_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }

    /// Dword 1.
    pub fn dw1(&self) -> u32 {
        u32::from_le_bytes([self.0[4], self.0[5], self.0[6], self.0[7]])
    }

    /// Submission queue head.
    pub fn sqhd(&self) -> u16 {
        u16::from_le_bytes([self.0[8], self.0[9]])
    }

    /// Submission queue ID.
    pub fn sqid(&self) -> u16 {
        u16::from_le_bytes([self.0[10], self.0[11]])
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

#[cfg(test)]
mod tests {
    use super::super::{Completion, Status};
    use super::*;

    #[test]
    fn a_host_reads_what_the_target_writes() {
        let mut c = Completion::new(0x1234, Status::LBA_OUT_OF_RANGE);
        (c.dw0, c.dw1, c.sqhd) = (7, 9, 3);
        let cqe = Cqe::from_slice(&c.to_bytes(2)).unwrap();
        assert_eq!(
            (
                cqe.dw0(),
                cqe.dw1(),
                cqe.sqhd(),
                cqe.sqid(),
                cqe.cid(),
                cqe.status()
            ),
            (7, 9, 3, 2, 0x1234, 0x080)
        );
        assert_eq!(Cqe::from_slice(&[0; 15]), None);
    }
}
