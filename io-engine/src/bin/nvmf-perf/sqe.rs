//! A 64-byte submission queue entry as the host builds it (NVMe Base 2.0
//! figure 88; fabrics commands, NVMe over Fabrics 1.1 figure 7), and the
//! opcodes nvmf-perf sends.
//!
//! Thread: any (a plain value).

/// Admin opcodes.
pub const IDENTIFY: u8 = 0x06;
/// Set Features.
pub const SET_FEATURES: u8 = 0x09;
/// Fabrics commands (FCTYPE in byte 4).
pub const FABRICS: u8 = 0x7F;
/// NVM command set: Write.
pub const WRITE: u8 = 0x01;
/// NVM command set: Read.
pub const READ: u8 = 0x02;
/// NVM command set: Copy.
pub const COPY: u8 = 0x19;
/// Fabrics command types.
pub const FCTYPE_PROPERTY_SET: u8 = 0x00;
/// Connect.
pub const FCTYPE_CONNECT: u8 = 0x01;
/// Property Get.
pub const FCTYPE_PROPERTY_GET: u8 = 0x04;
/// SGL descriptor type: data block, offset addressing (in the capsule).
pub const SGL_IN_CAPSULE: u8 = 0x01;
/// SGL descriptor type: transport data block (R2T/H2CData, C2HData).
pub const SGL_TRANSPORT: u8 = 0x5A;

/// One command.
#[derive(Clone, Copy)]
pub struct Sqe(pub [u8; 64]);

impl Sqe {
    /// Command `opcode` for namespace `nsid`.
    pub fn new(opcode: u8, nsid: u32) -> Sqe {
        let mut b = [0u8; 64];
        b[0] = opcode;
        b[4..8].copy_from_slice(&nsid.to_le_bytes());
        Sqe(b)
    }

    /// A fabrics command of type `fctype`.
    pub fn fabrics(fctype: u8) -> Sqe {
        let mut s = Sqe::new(FABRICS, 0);
        s.0[4] = fctype;
        s
    }

    /// Sets bytes at `at`.
    pub fn bytes(mut self, at: usize, v: &[u8]) -> Sqe {
        self.0[at..at + v.len()].copy_from_slice(v);
        self
    }

    /// Sets command dword `n` (10 to 15).
    pub fn cdw(self, n: usize, v: u32) -> Sqe {
        self.bytes(n * 4, &v.to_le_bytes())
    }

    /// Sets the command identifier.
    pub fn set_cid(&mut self, cid: u16) {
        self.0[2..4].copy_from_slice(&cid.to_le_bytes());
    }

    /// Sets the data pointer: one SGL descriptor of `len` bytes of type
    /// `kind` ([`SGL_IN_CAPSULE`] or [`SGL_TRANSPORT`]), offset 0.
    pub fn set_sgl(&mut self, len: u32, kind: u8) {
        self.0[24..32].fill(0);
        self.0[32..36].copy_from_slice(&len.to_le_bytes());
        self.0[36..39].fill(0);
        self.0[39] = kind;
    }

    /// A Read or Write of `nlb` blocks at `slba` of namespace `nsid`.
    pub fn rw(opcode: u8, nsid: u32, slba: u64, nlb: u32) -> Sqe {
        Sqe::new(opcode, nsid)
            .cdw(10, slba as u32)
            .cdw(11, (slba >> 32) as u32)
            .cdw(12, nlb - 1)
    }

    /// A Copy to `sdlba` of one source range (format 0, NR 0); the range
    /// list goes in the capsule.
    pub fn copy(nsid: u32, sdlba: u64) -> Sqe {
        Sqe::new(COPY, nsid)
            .cdw(10, sdlba as u32)
            .cdw(11, (sdlba >> 32) as u32)
            .cdw(12, 0)
    }
}

/// A Copy's source range entry, format 0 (NVMe NVM Command Set 1.0, figure
/// 34): bytes 8..16 SLBA, bytes 16..18 NLB (0-based).
pub fn copy_range(slba: u64, nlb: u32) -> [u8; 32] {
    let mut r = [0u8; 32];
    r[8..16].copy_from_slice(&slba.to_le_bytes());
    r[16..18].copy_from_slice(&((nlb - 1) as u16).to_le_bytes());
    r
}
