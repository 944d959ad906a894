//! A submission queue entry as a command capsule carries it (NVMe Base
//! 2.0, figure 88; fabrics commands, NVMe over Fabrics 1.1 figure 7): the
//! fields the target reads, by name, and the setters a host builds one
//! with (nvmf-perf, the end-to-end tests' host).
//!
//! Thread: any (a plain value); used on the connection's reactor.

/// Opcodes of the admin command set the target answers.
pub mod admin {
    /// Get Log Page.
    pub const GET_LOG_PAGE: u8 = 0x02;
    /// Identify.
    pub const IDENTIFY: u8 = 0x06;
    /// Abort.
    pub const ABORT: u8 = 0x08;
    /// Set Features.
    pub const SET_FEATURES: u8 = 0x09;
    /// Get Features.
    pub const GET_FEATURES: u8 = 0x0A;
    /// Asynchronous Event Request.
    pub const ASYNC_EVENT: u8 = 0x0C;
    /// Keep Alive.
    pub const KEEP_ALIVE: u8 = 0x18;
    /// Fabrics commands (FCTYPE in byte 4).
    pub const FABRICS: u8 = 0x7F;
}

/// Opcodes of the NVM command set.
pub mod io {
    /// Flush.
    pub const FLUSH: u8 = 0x00;
    /// Write.
    pub const WRITE: u8 = 0x01;
    /// Compare.
    pub const COMPARE: u8 = 0x05;
    /// Read.
    pub const READ: u8 = 0x02;
    /// Write Zeroes.
    pub const WRITE_ZEROES: u8 = 0x08;
    /// Dataset Management.
    pub const DSM: u8 = 0x09;
    /// Copy.
    pub const COPY: u8 = 0x19;
}

/// Fabrics command types.
pub mod fctype {
    /// Property Set.
    pub const PROPERTY_SET: u8 = 0x00;
    /// Connect.
    pub const CONNECT: u8 = 0x01;
    /// Property Get.
    pub const PROPERTY_GET: u8 = 0x04;
    /// Authentication Send (DH-HMAC-CHAP messages to the controller).
    pub const AUTH_SEND: u8 = 0x05;
    /// Authentication Receive (DH-HMAC-CHAP messages to the host).
    pub const AUTH_RECEIVE: u8 = 0x06;
    /// Disconnect.
    pub const DISCONNECT: u8 = 0x08;
}

/// SGL descriptor type bytes (type << 4 | subtype) NVMe/TCP uses.
pub mod sgl {
    /// Data block, offset addressing: data in the capsule.
    pub const IN_CAPSULE: u8 = 0x01;
    /// Transport data block: data by R2T/H2CData or C2HData.
    pub const TRANSPORT: u8 = 0x5A;
}

/// The 1024 bytes of a Connect's data: controller `cntlid` (0xFFFF: a new
/// one, for an admin queue), subsystem `subnqn`, host `hostnqn` (each NQN
/// cut at 255 bytes, NUL-padded).
pub fn connect_data(cntlid: u16, subnqn: &str, hostnqn: &str) -> [u8; 1024] {
    let mut data = [0u8; 1024];
    data[16..18].copy_from_slice(&cntlid.to_le_bytes());
    for (at, nqn) in [(256, subnqn), (512, hostnqn)] {
        let b = nqn.as_bytes();
        let b = b.get(..255).unwrap_or(b);
        if let Some(field) = data.get_mut(at..at + b.len()) {
            field.copy_from_slice(b);
        }
    }
    data
}

/// One 64-byte command.
#[derive(Clone, Copy)]
pub struct Command(pub [u8; 64]);

impl Command {
    /// Command `opcode` for namespace `nsid`, every other field 0.
    pub fn new(opcode: u8, nsid: u32) -> Command {
        Command([0; 64])
            .with_bytes(0, &[opcode])
            .with_bytes(4, &nsid.to_le_bytes())
    }

    /// A fabrics command of type `fctype` (byte 4).
    pub fn fabrics(fctype: u8) -> Command {
        Command::new(admin::FABRICS, 0).with_bytes(4, &[fctype])
    }

    /// A Connect of queue `qid` with `sqsize` entries (0-based), connect
    /// attributes `cattr` and a keep-alive timeout of `kato_ms`; its data
    /// is [`connect_data`].
    pub fn connect(qid: u16, sqsize: u16, cattr: u8, kato_ms: u32) -> Command {
        Command::fabrics(fctype::CONNECT)
            .with_bytes(42, &qid.to_le_bytes())
            .with_bytes(44, &sqsize.to_le_bytes())
            .with_bytes(46, &[cattr])
            .with_bytes(48, &kato_ms.to_le_bytes())
    }

    /// A Read or Write (`opcode`) of `nlb` blocks at `slba` of namespace
    /// `nsid`.
    pub fn rw(opcode: u8, nsid: u32, slba: u64, nlb: u32) -> Command {
        Command::new(opcode, nsid)
            .with_cdw(10, slba as u32)
            .with_cdw(11, (slba >> 32) as u32)
            .with_cdw(12, nlb - 1)
    }

    /// The command with the bytes at `at` set to `v` (the part of `v`
    /// that fits in the 64 bytes).
    pub fn with_bytes(mut self, at: usize, v: &[u8]) -> Command {
        let room = self.0.get_mut(at..).unwrap_or_default();
        let n = v.len().min(room.len());
        if let (Some(dst), Some(src)) = (room.get_mut(..n), v.get(..n)) {
            dst.copy_from_slice(src);
        }
        self
    }

    /// The command with dword `n` (10 to 15) set to `v`.
    pub fn with_cdw(self, n: usize, v: u32) -> Command {
        self.with_bytes(n * 4, &v.to_le_bytes())
    }

    /// Sets the command identifier.
    pub fn set_cid(&mut self, cid: u16) {
        *self = self.with_bytes(2, &cid.to_le_bytes());
    }

    /// Sets the data pointer: one SGL descriptor of `len` bytes of type
    /// `kind` ([`sgl::IN_CAPSULE`] or [`sgl::TRANSPORT`]), offset 0.
    pub fn set_sgl(&mut self, len: u32, kind: u8) {
        *self = self
            .with_bytes(24, &[0; 8])
            .with_bytes(32, &len.to_le_bytes())
            .with_bytes(36, &[0, 0, 0, kind]);
    }

    /// The command at the start of `b`, if its 64 bytes are there.
    #[inline]
    pub fn from_slice(b: &[u8]) -> Option<Command> {
        b.first_chunk().map(|c: &[u8; 64]| Command(*c))
    }

    /// The `N` bytes at `at` (zeroes past the end: the accessors below
    /// only ask for fields inside the 64 bytes).
    #[inline]
    fn bytes_at<const N: usize>(&self, at: usize) -> [u8; N] {
        self.0
            .get(at..)
            .and_then(|b| b.first_chunk::<N>())
            .copied()
            .unwrap_or([0; N])
    }

    #[inline]
    fn u16_at(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.bytes_at(at))
    }

    #[inline]
    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes_at(at))
    }

    #[inline]
    fn u64_at(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes_at(at))
    }

    /// Opcode.
    pub fn opcode(&self) -> u8 {
        self.0[0]
    }

    /// Command identifier.
    pub fn cid(&self) -> u16 {
        self.u16_at(2)
    }

    /// Namespace identifier.
    pub fn nsid(&self) -> u32 {
        self.u32_at(4)
    }

    /// Fabrics command type (byte 4 of a fabrics command).
    pub fn fctype(&self) -> u8 {
        self.0[4]
    }

    /// Command dword `n` (10 to 15).
    pub fn cdw(&self, n: usize) -> u32 {
        self.u32_at(n * 4)
    }

    /// The data pointer's SGL descriptor: (address or offset, length, type).
    pub fn sgl(&self) -> (u64, u32, u8) {
        (self.u64_at(24), self.u32_at(32), self.0[39])
    }

    /// Starting LBA of a Read, Write or Write Zeroes (CDW10-11).
    pub fn slba(&self) -> u64 {
        self.u64_at(40)
    }

    /// Blocks of a Read, Write or Write Zeroes (CDW12 bits 15:0, 0-based).
    pub fn nlb(&self) -> u64 {
        (self.cdw(12) & 0xFFFF) as u64 + 1
    }

    /// Connect: record format (must be 0).
    pub fn connect_recfmt(&self) -> u16 {
        self.u16_at(40)
    }

    /// Connect: queue id.
    pub fn connect_qid(&self) -> u16 {
        self.u16_at(42)
    }

    /// Connect: submission queue size (0-based).
    pub fn connect_sqsize(&self) -> u16 {
        self.u16_at(44)
    }

    /// Connect: connect attributes.
    pub fn connect_cattr(&self) -> u8 {
        self.0[46]
    }

    /// Connect: keep alive timeout in milliseconds.
    pub fn connect_kato(&self) -> u32 {
        self.u32_at(48)
    }

    /// AUTH_Send / AUTH_Receive: SPSP0, SPSP1 and SECP (bytes 41-43).
    pub fn auth_protocol(&self) -> (u8, u8, u8) {
        (self.0[41], self.0[42], self.0[43])
    }

    /// AUTH_Send: transfer length; AUTH_Receive: allocation length.
    pub fn auth_len(&self) -> u32 {
        self.u32_at(44)
    }

    /// Property Get/Set: whether the property is 8 bytes.
    pub fn property_is_8_bytes(&self) -> bool {
        self.0[40] & 1 != 0
    }

    /// Property Get/Set: the property's offset.
    pub fn property_offset(&self) -> u32 {
        self.u32_at(44)
    }

    /// Property Set: the value.
    pub fn property_value(&self) -> u64 {
        self.u64_at(48)
    }
}
