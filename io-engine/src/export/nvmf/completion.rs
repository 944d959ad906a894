//! Completion queue entries and the status codes the target answers with
//! (NVMe Base 2.0, figures 92-101).
//!
//! Thread: any (plain values); used on the connection's reactor.

/// A status: status code type in bits 10:8, status code in bits 7:0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status(pub u16);

impl Status {
    /// Successful Completion.
    pub const SUCCESS: Status = Status(0x000);
    /// Invalid Command Opcode.
    pub const INVALID_OPCODE: Status = Status(0x001);
    /// Invalid Field in Command.
    pub const INVALID_FIELD: Status = Status(0x002);
    /// Data Transfer Error.
    pub const DATA_TRANSFER_ERROR: Status = Status(0x004);
    /// Internal Error.
    pub const INTERNAL_ERROR: Status = Status(0x006);
    /// Namespace is Write Protected.
    pub const WRITE_PROTECTED: Status = Status(0x020);
    /// Transient Transport Error: a data digest did not match.
    pub const TRANSIENT_TRANSPORT_ERROR: Status = Status(0x022);
    /// Invalid Namespace or Format.
    pub const INVALID_NAMESPACE: Status = Status(0x00B);
    /// Command Sequence Error.
    pub const COMMAND_SEQUENCE_ERROR: Status = Status(0x00C);
    /// Data SGL Length Invalid.
    pub const SGL_LENGTH_INVALID: Status = Status(0x00F);
    /// SGL Descriptor Type Invalid.
    pub const SGL_TYPE_INVALID: Status = Status(0x011);
    /// LBA Out of Range.
    pub const LBA_OUT_OF_RANGE: Status = Status(0x080);
    /// Namespace Not Ready.
    pub const NAMESPACE_NOT_READY: Status = Status(0x082);
    /// Command specific: Asynchronous Event Request Limit Exceeded.
    pub const AER_LIMIT_EXCEEDED: Status = Status(0x105);
    /// Command specific: Invalid Log Page.
    pub const INVALID_LOG_PAGE: Status = Status(0x109);
    /// Command specific: Feature Identifier Not Saveable.
    pub const FEATURE_NOT_SAVEABLE: Status = Status(0x10D);
    /// Command specific: Command Size Limit Exceeded (a Copy beyond the
    /// advertised limits).
    pub const COMMAND_SIZE_LIMIT_EXCEEDED: Status = Status(0x183);
    /// Fabrics: Connect Incompatible Format.
    pub const CONNECT_INCOMPATIBLE_FORMAT: Status = Status(0x180);
    /// Fabrics: Connect Controller Busy.
    pub const CONNECT_CONTROLLER_BUSY: Status = Status(0x181);
    /// Fabrics: Connect Invalid Parameters.
    pub const CONNECT_INVALID_PARAMETERS: Status = Status(0x182);
    /// Fabrics: Connect Invalid Host.
    pub const CONNECT_INVALID_HOST: Status = Status(0x184);
    /// Fabrics: Authentication Required (a command other than AUTH_Send
    /// or AUTH_Receive on a queue that has not authenticated).
    pub const AUTH_REQUIRED: Status = Status(0x191);
    /// Media error: Write Fault.
    pub const WRITE_FAULT: Status = Status(0x280);
    /// Media error: Compare Failure.
    pub const COMPARE_FAILURE: Status = Status(0x285);

    /// Whether it is success.
    pub fn is_success(self) -> bool {
        self == Status::SUCCESS
    }
}

/// One completion queue entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Completion {
    /// Command specific dword 0.
    pub dw0: u32,
    /// Command specific dword 1.
    pub dw1: u32,
    /// Submission queue head.
    pub sqhd: u16,
    /// Command identifier.
    pub cid: u16,
    /// Status (without the phase bit).
    pub status: u16,
}

impl Completion {
    /// A completion of command `cid` with `status`.
    pub fn new(cid: u16, status: Status) -> Completion {
        Completion {
            cid,
            status: status.0,
            ..Completion::default()
        }
    }

    /// The 16 bytes on the wire (the phase bit is 0: fabrics have no
    /// phase; Do Not Retry is set on every error: retrying the same
    /// command cannot succeed here).
    pub fn to_bytes(&self, sqid: u16) -> [u8; 16] {
        let mut b = [0; 16];
        b[0..4].copy_from_slice(&self.dw0.to_le_bytes());
        b[4..8].copy_from_slice(&self.dw1.to_le_bytes());
        b[8..10].copy_from_slice(&self.sqhd.to_le_bytes());
        b[10..12].copy_from_slice(&sqid.to_le_bytes());
        b[12..14].copy_from_slice(&self.cid.to_le_bytes());
        let dnr = if self.status != 0 { 1 << 15 } else { 0 };
        let sf = (self.status & 0x7FF) << 1 | dnr;
        b[14..16].copy_from_slice(&sf.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_field_is_shifted_past_the_phase_bit() {
        let mut c = Completion::new(0x1234, Status::LBA_OUT_OF_RANGE);
        c.dw0 = 7;
        c.sqhd = 3;
        let b = c.to_bytes(2);
        assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), 7);
        assert_eq!(u16::from_le_bytes([b[8], b[9]]), 3);
        assert_eq!(u16::from_le_bytes([b[10], b[11]]), 2);
        assert_eq!(u16::from_le_bytes([b[12], b[13]]), 0x1234);
        let sf = u16::from_le_bytes([b[14], b[15]]);
        assert_eq!((sf >> 1) & 0xFF, 0x80);
        assert_eq!((sf >> 9) & 7, 0);
        assert_ne!(sf & 0x8000, 0, "DNR on an error");
        assert_eq!(
            Completion::new(1, Status::SUCCESS).to_bytes(0)[14..16],
            [0, 0]
        );
    }
}
