//! The data structures admin commands return: Identify Controller and
//! Namespace (NVMe Base 2.0, figures 275-280), the namespace lists and
//! identification descriptors, and the log pages the target keeps.
//!
//! Thread: any (plain functions building bytes); used on the admin
//! queue's reactor.

/// Bytes of every Identify data structure.
pub const IDENTIFY_LEN: usize = 4096;

/// What Identify Controller says, besides constants.
pub struct ControllerFacts<'a> {
    /// Controller ID.
    pub cntlid: u16,
    /// Serial number (ASCII, padded with spaces).
    pub serial: &'a str,
    /// Model number.
    pub model: &'a str,
    /// The subsystem's NQN.
    pub subnqn: &'a str,
    /// Maximum data transfer size as a power of two of 4 KiB pages.
    pub mdts: u8,
    /// Command capsule size on I/O queues, in bytes (64 plus in-capsule
    /// data).
    pub capsule_bytes: u32,
    /// Namespaces (0 for the discovery controller).
    pub namespaces: u32,
    /// MAXCMD: commands a queue holds.
    pub max_commands: u16,
    /// Whether this is a discovery controller.
    pub discovery: bool,
    /// A volatile write cache is present (a namespace's device has one:
    /// hosts then send Flush).
    pub volatile_cache: bool,
}

/// Puts `s` in the `len` bytes at `at` of `b`, space-padded (cut short
/// if longer).
fn put_str(b: &mut [u8], at: usize, len: usize, s: &str) {
    if let Some(field) = b.get_mut(at..at + len) {
        field.fill(b' ');
        put(field, 0, s.as_bytes().get(..len).unwrap_or(s.as_bytes()));
    }
}

/// Puts `v` at `at` of `b` (the structures' fields all lie inside them).
fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(field) = b.get_mut(at..at + v.len()) {
        field.copy_from_slice(v);
    }
}

/// An NQN field's bytes: at most 255, NUL-padded.
fn nqn_bytes(nqn: &str) -> &[u8] {
    let b = nqn.as_bytes();
    b.get(..255).unwrap_or(b)
}

/// Identify Controller (CNS 01h).
pub fn controller(f: &ControllerFacts<'_>) -> Vec<u8> {
    let mut b = [0u8; IDENTIFY_LEN];
    // PCI vendor ids: none (a software target).
    put_str(&mut b, 4, 20, f.serial);
    put_str(&mut b, 24, 40, f.model);
    put_str(&mut b, 64, 8, env!("CARGO_PKG_VERSION"));
    b[72] = 6; // RAB
    b[77] = f.mdts;
    put(&mut b, 78, &f.cntlid.to_le_bytes());
    put(&mut b, 80, &0x0002_0000u32.to_le_bytes()); // VER 2.0
    if !f.discovery {
        // OAES: namespace attribute notices.
        put(&mut b, 92, &(1u32 << 8).to_le_bytes());
    }
    b[111] = if f.discovery { 2 } else { 1 }; // CNTRLTYPE
    b[259] = 3; // AERL: 4 outstanding AERs
    b[260] = 0x3; // FRMW: slot 1 read-only, one slot
    b[261] = 0x2; // LPA: command effects log
    b[262] = 0; // ELPE: one error log entry
    put(&mut b, 320, &10u16.to_le_bytes()); // KAS: 1 s granularity
    b[512] = 0x66; // SQES
    b[513] = 0x44; // CQES
    put(&mut b, 514, &f.max_commands.to_le_bytes()); // MAXCMD
    put(&mut b, 516, &f.namespaces.to_le_bytes()); // NN
    // ONCS: Compare (bit 0), Dataset Management (bit 2), Write Zeroes
    // (bit 3), Copy (bit 8); OCFS: Copy format 0.
    if !f.discovery {
        put(&mut b, 520, &(0b1101u16 | 1 << 8).to_le_bytes());
        put(&mut b, 534, &1u16.to_le_bytes());
    }
    b[525] = u8::from(f.volatile_cache); // VWC present
    // SGLS: SGLs supported, offset addressing (bit 20), transport data
    // blocks (bit 21).
    put(&mut b, 536, &(1u32 | 1 << 20 | 1 << 21).to_le_bytes());
    put(&mut b, 768, nqn_bytes(f.subnqn));
    // Fabrics: IOCCSZ and IORCSZ in 16-byte units, ICDOFF 0, MSDBD 1.
    put(&mut b, 1792, &(f.capsule_bytes / 16).to_le_bytes());
    put(&mut b, 1796, &1u32.to_le_bytes());
    b[1803] = 1;
    b.to_vec()
}

/// The Copy command's limits, in blocks and ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyLimits {
    /// MSSRL: blocks of one source range.
    pub range_blocks: u16,
    /// MCL: blocks of one command.
    pub command_blocks: u32,
    /// MSRC + 1: source ranges of one command.
    pub ranges: u8,
}

/// What Identify Namespace says.
pub struct NamespaceFacts {
    /// Blocks.
    pub blocks: u64,
    /// Block size in bytes (a power of two).
    pub block_size: u32,
    /// The device's UUID, as NGUID and UUID.
    pub uuid: [u8; 16],
    /// The Copy command's limits.
    pub copy: CopyLimits,
    /// Whether the device has a volatile write cache.
    pub volatile_cache: bool,
    /// The namespace is write protected (a read-only share): NSATTR bit 0.
    pub write_protected: bool,
}

/// Identify Namespace (CNS 00h).
pub fn namespace(n: &NamespaceFacts) -> Vec<u8> {
    let mut b = [0u8; IDENTIFY_LEN];
    put(&mut b, 0, &n.blocks.to_le_bytes()); // NSZE
    put(&mut b, 8, &n.blocks.to_le_bytes()); // NCAP
    put(&mut b, 16, &n.blocks.to_le_bytes()); // NUSE
    b[24] = 0; // NSFEAT
    b[25] = 0; // NLBAF: one format
    b[26] = 0; // FLBAS: format 0
    // DLFEAT: deallocated blocks read as zeroes, Write Zeroes may
    // deallocate.
    b[33] = 0x1 | 0x8;
    b[99] = u8::from(n.write_protected); // NSATTR: write protected
    put(&mut b, 74, &n.copy.range_blocks.to_le_bytes()); // MSSRL
    put(&mut b, 76, &n.copy.command_blocks.to_le_bytes()); // MCL
    b[80] = n.copy.ranges.saturating_sub(1); // MSRC
    put(&mut b, 104, &n.uuid); // NGUID
    let lbads = n.block_size.trailing_zeros();
    put(&mut b, 128, &(lbads << 16).to_le_bytes()); // LBAF0
    b.to_vec()
}

/// Active Namespace ID list (CNS 02h): the one namespace when it is above
/// `after`.
pub fn active_namespaces(after: u32) -> Vec<u8> {
    let mut b = vec![0u8; IDENTIFY_LEN];
    if after < 1 {
        put(&mut b, 0, &1u32.to_le_bytes());
    }
    b
}

/// Namespace Identification Descriptor list (CNS 03h): NGUID, UUID and
/// the command set (NVM).
pub fn namespace_descriptors(uuid: &[u8; 16]) -> Vec<u8> {
    let mut b = Vec::with_capacity(IDENTIFY_LEN);
    for (nidt, id) in [(2u8, &uuid[..]), (3u8, &uuid[..]), (4u8, &[0u8][..])] {
        b.extend_from_slice(&[nidt, id.len() as u8, 0, 0]);
        b.extend_from_slice(id);
    }
    b.resize(IDENTIFY_LEN, 0);
    b
}

/// The SMART / Health Information log (02h): data units (of 512,000
/// bytes) and commands read and written.
pub fn smart_log(bytes_read: u64, bytes_written: u64, reads: u64, writes: u64) -> Vec<u8> {
    let mut b = [0u8; 512];
    // Composite temperature: 20 C in kelvin.
    put(&mut b, 1, &293u16.to_le_bytes());
    b[3] = 100; // available spare
    b[4] = 10; // spare threshold
    let units = |bytes: u64| bytes.div_ceil(512_000) as u128;
    put(&mut b, 32, &units(bytes_read).to_le_bytes());
    put(&mut b, 48, &units(bytes_written).to_le_bytes());
    put(&mut b, 64, &(reads as u128).to_le_bytes());
    put(&mut b, 80, &(writes as u128).to_le_bytes());
    b.to_vec()
}

/// The Firmware Slot Information log (03h): slot 1 active.
pub fn firmware_log() -> Vec<u8> {
    let mut b = [0u8; 512];
    b[0] = 1;
    put_str(&mut b, 8, 8, env!("CARGO_PKG_VERSION"));
    b.to_vec()
}

/// The Commands Supported and Effects log (05h).
pub fn effects_log(discovery: bool) -> Vec<u8> {
    use super::command::{admin, io};
    let mut b = vec![0u8; 4096];
    let supported = 1u32;
    for op in [
        admin::GET_LOG_PAGE,
        admin::IDENTIFY,
        admin::ABORT,
        admin::SET_FEATURES,
        admin::GET_FEATURES,
        admin::ASYNC_EVENT,
        admin::KEEP_ALIVE,
    ] {
        put(&mut b, op as usize * 4, &supported.to_le_bytes());
    }
    if !discovery {
        // Writes change the namespace's content (LBCC, bit 1).
        for (op, effects) in [
            (io::FLUSH, supported),
            (io::WRITE, supported | 2),
            (io::READ, supported),
            (io::COMPARE, supported),
            (io::WRITE_ZEROES, supported | 2),
            (io::DSM, supported | 2),
            (io::COPY, supported | 2),
        ] {
            put(&mut b, 1024 + op as usize * 4, &effects.to_le_bytes());
        }
    }
    b
}

/// One discovery log entry (NVMe over Fabrics 1.1, figure 38).
pub struct DiscoveryEntry<'a> {
    /// The subsystem's NQN.
    pub subnqn: &'a str,
    /// Listener address (IPv4 or IPv6, as text).
    pub traddr: &'a str,
    /// Listener port.
    pub port: u16,
    /// Whether the address is IPv6.
    pub ipv6: bool,
    /// 3: this discovery subsystem; 2: an NVM subsystem.
    pub subtype: u8,
    /// The port's number.
    pub portid: u16,
}

/// The Discovery log page (70h).
pub fn discovery_log(generation: u64, entries: &[DiscoveryEntry<'_>]) -> Vec<u8> {
    let mut b = vec![0u8; 1024 * (1 + entries.len())];
    put(&mut b, 0, &generation.to_le_bytes());
    put(&mut b, 8, &(entries.len() as u64).to_le_bytes());
    for (i, e) in entries.iter().enumerate() {
        let at = 1024 * (i + 1);
        // TRTYPE TCP, ADRFAM, SUBTYPE, TREQ: secure channel not required.
        put(&mut b, at, &[3, if e.ipv6 { 2 } else { 1 }, e.subtype, 0x2]);
        put(&mut b, at + 4, &e.portid.to_le_bytes());
        put(&mut b, at + 6, &0xFFFFu16.to_le_bytes()); // dynamic controllers
        put(&mut b, at + 8, &128u16.to_le_bytes()); // ASQSZ
        put_str(&mut b, at + 32, 32, &e.port.to_string());
        put(&mut b, at + 256, nqn_bytes(e.subnqn));
        put_str(&mut b, at + 512, 256, e.traddr);
        // TSAS: no security.
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identify_controller_fields() {
        let facts = |volatile_cache| ControllerFacts {
            cntlid: 5,
            serial: "SN1",
            model: "io-engine",
            subnqn: "nqn.x:y",
            mdts: 5,
            capsule_bytes: 8192 + 64,
            namespaces: 1,
            max_commands: 128,
            discovery: false,
            volatile_cache,
        };
        let b = controller(&facts(false));
        assert_eq!(b[525], 0, "no volatile write cache");
        assert_eq!(controller(&facts(true))[525], 1, "VWC present");
        assert_eq!(&b[4..8], b"SN1 ");
        assert_eq!(b[77], 5);
        assert_eq!(u16::from_le_bytes([b[78], b[79]]), 5);
        assert_eq!(&b[768..775], b"nqn.x:y");
        assert_eq!(b[775], 0);
        assert_eq!(u32::from_le_bytes(b[1792..1796].try_into().unwrap()), 516);
    }

    #[test]
    fn namespace_and_descriptors() {
        let uuid = [7u8; 16];
        let copy = CopyLimits {
            range_blocks: 256,
            command_blocks: 4096,
            ranges: 128,
        };
        let b = namespace(&NamespaceFacts {
            blocks: 1000,
            block_size: 4096,
            uuid,
            copy,
            volatile_cache: false,
            write_protected: true,
        });
        assert_eq!(b[99], 1, "NSATTR: write protected");
        assert_eq!(u16::from_le_bytes([b[74], b[75]]), 256, "MSSRL");
        assert_eq!(
            u32::from_le_bytes(b[76..80].try_into().unwrap()),
            4096,
            "MCL"
        );
        assert_eq!(b[80], 127, "MSRC is 0-based");
        assert_eq!(u64::from_le_bytes(b[0..8].try_into().unwrap()), 1000);
        assert_eq!(b[128 + 2], 12, "LBADS");
        assert_eq!(&b[104..120], &uuid);
        let d = namespace_descriptors(&uuid);
        assert_eq!(&d[0..4], &[2, 16, 0, 0]);
        assert_eq!(&d[20..24], &[3, 16, 0, 0]);
        assert_eq!(&d[40..45], &[4, 1, 0, 0, 0]);
        assert_eq!(active_namespaces(0)[0..4], [1, 0, 0, 0]);
        assert_eq!(active_namespaces(1)[0..4], [0, 0, 0, 0]);
    }

    #[test]
    fn discovery_entries() {
        let b = discovery_log(
            3,
            &[DiscoveryEntry {
                subnqn: "nqn.a:b",
                traddr: "127.0.0.1",
                port: 4420,
                ipv6: false,
                subtype: 2,
                portid: 1,
            }],
        );
        assert_eq!(b.len(), 2048);
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 1);
        assert_eq!(&b[1024 + 32..1024 + 36], b"4420");
        assert_eq!(&b[1024 + 512..1024 + 521], b"127.0.0.1");
        assert_eq!(&b[1024 + 256..1024 + 263], b"nqn.a:b");
    }
}
