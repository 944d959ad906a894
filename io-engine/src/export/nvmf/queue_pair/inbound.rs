//! The data of a Write or Compare arriving straight into its command's
//! IO buffer: which command, and which bytes of the buffer are still to
//! come.
//!
//! Thread: the queue's reactor.

/// Data arriving straight into the buffer of the command in slot `tag`
/// (bytes `at..end` of it still to come).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inbound {
    pub tag: u16,
    /// Where in the buffer this PDU's data started, and where the bytes
    /// read straight into the buffer start.
    pub start: usize,
    pub direct: usize,
    pub at: usize,
    pub end: usize,
    /// CRC-32C of the PDU's data before `direct` (data digests on and
    /// computed inline).
    pub crc: u32,
    /// Its digest is checked off the core, over the whole PDU's data.
    pub offload: bool,
    /// The PDU's flags.
    pub flags: u8,
}
