//! The Intel Data Streaming Accelerator (DSA) programming interface: the
//! 64-byte descriptor, the 32-byte completion record, opcodes, flags and
//! status codes, the BAR0 registers a userspace (VFIO) driver reads and
//! programs, and the BAR2 work-submission portals.
//!
//! Source: the Intel DSA Architecture Specification (rev 2.0, document
//! 341204; "DSA spec" below, cited by section title: "Descriptor",
//! "Completion Record", the operation sections, "Registers", "Work
//! Submission Portals"). Every number here is cross-checked against
//! Linux's `include/uapi/linux/idxd.h` (descriptor, completion record,
//! opcodes, flags, status codes) and `drivers/dma/idxd/registers.h`
//! (registers, WQCFG, portals), and SPDK's `include/spdk/idxd_spec.h`
//! (the same, as a userspace driver uses them); the layouts carry
//! compile-time size and offset asserts. Where the headers disagree with
//! each other, the comment says which is followed.
//!
//! Thread: none; constants and plain-data types, used by the DSA driver
//! (on its reactor), the VFIO and idxd backends and the device model (on
//! its device thread).

/// Intel's PCI vendor id.
pub const VENDOR_INTEL: u16 = 0x8086;

/// PCI device ids of DSA functions (Linux `drivers/dma/idxd/init.c`
/// `idxd_pci_tbl`, ids from `registers.h` and `include/linux/pci_ids.h`):
/// Sapphire Rapids (`DSA_SPR0`), Granite Rapids-D (`DSA_GNRD`), Diamond
/// Rapids (`DSA_DMR`).
pub const DEVICE_IDS: &[u16] = &[0x0b25, 0x11fb, 0x1212];

/// Whether `vendor:device` is a DSA function.
pub fn is_dsa(vendor: u16, device: u16) -> bool {
    vendor == VENDOR_INTEL && DEVICE_IDS.contains(&device)
}

// ---------------------------------------------------------------------------
// Opcodes (DSA spec, "Descriptor", Operation field; Linux `enum dsa_opcode`)
// ---------------------------------------------------------------------------

/// Operation codes (the descriptor's byte 7).
pub mod opcode {
    /// No-op: only the completion record (and fence) semantics.
    pub const NOOP: u8 = 0x00;
    /// Batch: a list of descriptors in memory, submitted as one.
    pub const BATCH: u8 = 0x01;
    /// Drain: completes once every earlier descriptor of the WQ has.
    pub const DRAIN: u8 = 0x02;
    /// Memory move (copy; overlapping buffers allowed where GENCAP says).
    pub const MEMMOVE: u8 = 0x03;
    /// Fill with an 8-byte pattern.
    pub const MEMFILL: u8 = 0x04;
    /// Compare two buffers.
    pub const COMPARE: u8 = 0x05;
    /// Compare a buffer with an 8-byte pattern.
    pub const COMPVAL: u8 = 0x06;
    /// Create delta record.
    pub const CR_DELTA: u8 = 0x07;
    /// Apply delta record.
    pub const AP_DELTA: u8 = 0x08;
    /// Dualcast: one source to two destinations.
    pub const DUALCAST: u8 = 0x09;
    /// CRC generation (CRC-32C).
    pub const CRCGEN: u8 = 0x10;
    /// Copy with CRC generation.
    pub const COPY_CRC: u8 = 0x11;
    /// DIF check.
    pub const DIF_CHECK: u8 = 0x12;
    /// DIF insert.
    pub const DIF_INS: u8 = 0x13;
    /// DIF strip.
    pub const DIF_STRP: u8 = 0x14;
    /// DIF update.
    pub const DIF_UPDT: u8 = 0x15;
    /// Cache flush.
    pub const CFLUSH: u8 = 0x20;

    /// The operations of DSA 1.0 that the engine drives (all but the
    /// delta records, DIF and cache flush): what the idxd backend assumes
    /// when a kernel reports no `op_cap`, and what the device model
    /// implements.
    pub const DSA1: &[u8] = &[
        NOOP, BATCH, DRAIN, MEMMOVE, MEMFILL, COMPARE, COMPVAL, DUALCAST, CRCGEN, COPY_CRC,
    ];

    /// A name for messages.
    pub fn name(op: u8) -> &'static str {
        match op {
            NOOP => "no-op",
            BATCH => "batch",
            DRAIN => "drain",
            MEMMOVE => "memory move",
            MEMFILL => "fill",
            COMPARE => "compare",
            COMPVAL => "compare pattern",
            CR_DELTA => "create delta",
            AP_DELTA => "apply delta",
            DUALCAST => "dualcast",
            CRCGEN => "crc32c",
            COPY_CRC => "copy+crc32c",
            DIF_CHECK => "DIF check",
            DIF_INS => "DIF insert",
            DIF_STRP => "DIF strip",
            DIF_UPDT => "DIF update",
            CFLUSH => "cache flush",
            _ => "unknown",
        }
    }
}

// ---------------------------------------------------------------------------
// Descriptor flags (DSA spec, "Descriptor", Flags field; Linux
// `IDXD_OP_FLAG_*`, SPDK `IDXD_FLAG_*`)
// ---------------------------------------------------------------------------

/// Descriptor flags (bits 23:0 of the descriptor's second dword; bits
/// 23:16 are operation specific).
pub mod flags {
    /// Fence: within a batch, this descriptor waits for every earlier one
    /// of the batch to complete, and is abandoned when one of them failed.
    pub const FENCE: u32 = 1 << 0;
    /// Block on fault: a page fault is resolved (the device waits) instead
    /// of ending the operation with a partial completion. Valid only on a
    /// WQ whose WQCFG enables it (else "invalid flags").
    pub const BOF: u32 = 1 << 1;
    /// Completion Record Address Valid: the completion address is set.
    pub const CRAV: u32 = 1 << 2;
    /// Request Completion Record: write the record on success too (without
    /// it, a record is written only when the operation fails).
    pub const RCR: u32 = 1 << 3;
    /// Request Completion Interrupt.
    pub const RCI: u32 = 1 << 4;
    /// Completion record steering-tag selector.
    pub const CRSTS: u32 = 1 << 5;
    /// Check Result: compare the result with the Expected Result field;
    /// a difference ends with "success with false predicate", which stops
    /// later fenced descriptors of a batch.
    pub const CHECK_RESULT: u32 = 1 << 7;
    /// Cache control: writes go to the cache (1) or to memory (0), where
    /// GENCAP supports it.
    pub const CACHE_CONTROL: u32 = 1 << 8;
    /// Address 1 traffic-class selector.
    pub const ADDR1_TCS: u32 = 1 << 9;
    /// Address 2 traffic-class selector.
    pub const ADDR2_TCS: u32 = 1 << 10;
    /// Address 3 traffic-class selector.
    pub const ADDR3_TCS: u32 = 1 << 11;
    /// Completion record traffic-class selector.
    pub const CR_TCS: u32 = 1 << 12;
    /// Strict ordering of the destination writes.
    pub const STRICT_ORDER: u32 = 1 << 13;
    /// Destination readback: the device reads the destination back before
    /// completing (persistence to memory-side caches), where GENCAP
    /// supports it.
    pub const DEST_READBACK: u32 = 1 << 14;
    /// Destination steering-tag selector.
    pub const DSTS: u32 = 1 << 15;
    /// CRC generation and copy with CRC: read the 32-bit seed at the CRC
    /// Seed Address instead of the CRC Seed field (SPDK
    /// `IDXD_FLAG_CRC_READ_CRC_SEED`; how SPDK chains the descriptors of a
    /// scattered crc32c, each seeded with the previous record's CRC).
    pub const CRC_READ_SEED: u32 = 1 << 16;
    /// CRC generation and copy with CRC (rev 2.0): neither invert the seed
    /// on the way in nor the result on the way out (Intel's idxd-config
    /// `test/dsa.h` `BYPASS_CRC_INV_REF`).
    pub const CRC_BYPASS_INVERSION: u32 = 1 << 17;
    /// CRC generation and copy with CRC (rev 2.0): do not reflect the
    /// data bits (idxd-config `BYPASS_DATA_REF`).
    pub const CRC_BYPASS_REFLECTION: u32 = 1 << 18;
    /// The common flag bits (15:0); 23:16 are operation specific.
    pub const COMMON_MASK: u32 = 0xffff;
    /// All flag bits.
    pub const MASK: u32 = 0x00ff_ffff;
}

// ---------------------------------------------------------------------------
// Descriptor (DSA spec, "Descriptor"; Linux `struct dsa_hw_desc`)
// ---------------------------------------------------------------------------

/// Bytes of a descriptor.
pub const DESC_SIZE: usize = 64;
/// Alignment of a batch's descriptor list (DSA spec, "Batch": the
/// Descriptor List Address must be 64-byte aligned, else status
/// [`status::DESCLIST_ALIGN`]).
pub const DESC_LIST_ALIGN: u64 = 64;

/// One work descriptor: 64 bytes, 64-byte aligned, little endian.
///
/// Byte layout (DSA spec, "Descriptor"):
///
/// | bytes | field |
/// |-------|-------|
/// | 0-3   | PASID (19:0), privilege (31) |
/// | 4-7   | flags (23:0), opcode (31:24) |
/// | 8-15  | completion record address |
/// | 16-23 | source / pattern (fill) / descriptor list (batch) / readback |
/// | 24-31 | destination / source 2 (compare) / pattern (compare pattern) |
/// | 32-35 | transfer size / descriptor count (batch) |
/// | 36-37 | completion interrupt handle |
/// | 38-39 | reserved |
/// | 40-63 | operation specific: expected result (byte 40, with Check Result); destination 2 (dualcast, 40-47); CRC seed (crc, 40-43) and CRC seed address (48-55) |
///
/// A descriptor reaches a WQ only as a whole (MOVDIR64B or ENQCMD, a
/// 64-byte atomic write); the PASID dword is ignored on a WQ without
/// PASID, and ENQCMD replaces it with the process's PASID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, align(64))]
pub struct Descriptor {
    /// PASID (19:0) and privilege (31).
    pub pasid: u32,
    /// Flags (23:0) and opcode (31:24).
    pub flags_opcode: u32,
    /// Completion record address (32-byte aligned).
    pub completion: u64,
    /// Source address; the pattern of a fill; the descriptor list of a
    /// batch.
    pub src: u64,
    /// Destination address; the second source of a compare; the pattern of
    /// a compare pattern.
    pub dst: u64,
    /// Transfer size in bytes; the descriptor count of a batch.
    pub size: u32,
    /// Completion interrupt handle (with [`flags::RCI`]).
    pub int_handle: u16,
    /// Reserved (zero).
    pub rsvd: u16,
    /// Operation specific (bytes 40-63).
    pub op_specific: [u64; 3],
}

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Descriptor>() == DESC_SIZE);
    assert!(align_of::<Descriptor>() == DESC_SIZE);
    assert!(offset_of!(Descriptor, pasid) == desc::PASID);
    assert!(offset_of!(Descriptor, flags_opcode) == desc::FLAGS);
    assert!(offset_of!(Descriptor, completion) == desc::COMPLETION);
    assert!(offset_of!(Descriptor, src) == desc::SRC);
    assert!(offset_of!(Descriptor, dst) == desc::DST);
    assert!(offset_of!(Descriptor, size) == desc::SIZE);
    assert!(offset_of!(Descriptor, int_handle) == desc::INT_HANDLE);
    assert!(offset_of!(Descriptor, rsvd) == 38);
    assert!(offset_of!(Descriptor, op_specific) == desc::OP_SPECIFIC);
};

/// Byte offsets of the descriptor fields (for a descriptor in DMA memory,
/// read or written through atomic accessors).
pub mod desc {
    /// PASID and privilege (32 bits).
    pub const PASID: usize = 0;
    /// Flags and opcode (32 bits); the opcode is byte 7.
    pub const FLAGS: usize = 4;
    /// Completion record address (64 bits).
    pub const COMPLETION: usize = 8;
    /// Source / pattern / descriptor list (64 bits).
    pub const SRC: usize = 16;
    /// Destination / source 2 / compare pattern (64 bits).
    pub const DST: usize = 24;
    /// Transfer size / descriptor count (32 bits).
    pub const SIZE: usize = 32;
    /// Interrupt handle (16 bits).
    pub const INT_HANDLE: usize = 36;
    /// First operation-specific byte.
    pub const OP_SPECIFIC: usize = 40;
    /// Expected result (8 bits; compare, compare pattern with Check Result).
    pub const EXPECTED_RESULT: usize = 40;
    /// Destination 2 (64 bits; dualcast).
    pub const DEST2: usize = 40;
    /// CRC seed (32 bits; crc, copy+crc).
    pub const CRC_SEED: usize = 40;
    /// CRC seed address (64 bits; with [`super::flags::CRC_READ_SEED`]).
    pub const CRC_SEED_ADDR: usize = 48;
}

/// PASID field bits.
pub mod pasid {
    /// The PASID (19:0).
    pub const MASK: u32 = 0x000f_ffff;
    /// The privilege bit (31): supervisor request.
    pub const PRIV: u32 = 1 << 31;
    /// Reserved bits (30:20).
    pub const RESERVED: u32 = !(MASK | PRIV);
}

impl Descriptor {
    /// A descriptor with `opcode` and `flags` (bits beyond 23:0 dropped),
    /// every other field zero.
    pub const fn new(opcode: u8, flags: u32) -> Descriptor {
        Descriptor {
            pasid: 0,
            flags_opcode: (flags & flags::MASK) | (opcode as u32) << 24,
            completion: 0,
            src: 0,
            dst: 0,
            size: 0,
            int_handle: 0,
            rsvd: 0,
            op_specific: [0; 3],
        }
    }

    /// The opcode.
    pub const fn opcode(&self) -> u8 {
        (self.flags_opcode >> 24) as u8
    }

    /// The flags (23:0).
    pub const fn flags(&self) -> u32 {
        self.flags_opcode & flags::MASK
    }

    /// Sets the flags (23:0), keeping the opcode.
    pub const fn set_flags(&mut self, f: u32) {
        self.flags_opcode = (self.flags_opcode & !flags::MASK) | (f & flags::MASK);
    }

    /// This descriptor with its completion record at `addr` (32-byte
    /// aligned): Completion Record Address Valid and Request Completion
    /// Record set.
    pub const fn with_completion(mut self, addr: u64) -> Descriptor {
        self.completion = addr;
        self.set_flags(self.flags() | flags::CRAV | flags::RCR);
        self
    }

    /// Memory move of `len` bytes from `src` to `dst` (DSA spec, "Memory
    /// Move").
    pub const fn memmove(src: u64, dst: u64, len: u32) -> Descriptor {
        let mut d = Descriptor::new(opcode::MEMMOVE, 0);
        d.src = src;
        d.dst = dst;
        d.size = len;
        d
    }

    /// Fill of `len` bytes at `dst` with the 8-byte `pattern`, repeated
    /// (little endian: byte `i` of the destination is byte `i % 8` of the
    /// pattern) (DSA spec, "Fill").
    pub const fn fill(pattern: u64, dst: u64, len: u32) -> Descriptor {
        let mut d = Descriptor::new(opcode::MEMFILL, 0);
        d.src = pattern;
        d.dst = dst;
        d.size = len;
        d
    }

    /// Compare of `len` bytes at `src1` and `src2` (DSA spec, "Compare"):
    /// the record's result is 0 when equal, 1 when not, with the offset
    /// of the first difference in Bytes Completed.
    pub const fn compare(src1: u64, src2: u64, len: u32) -> Descriptor {
        let mut d = Descriptor::new(opcode::COMPARE, 0);
        d.src = src1;
        d.dst = src2;
        d.size = len;
        d
    }

    /// Compare of `len` bytes at `src` with the 8-byte `pattern` repeated
    /// (DSA spec, "Compare Pattern"; the pattern sits in bytes 24-31).
    pub const fn compare_pattern(src: u64, pattern: u64, len: u32) -> Descriptor {
        let mut d = Descriptor::new(opcode::COMPVAL, 0);
        d.src = src;
        d.dst = pattern;
        d.size = len;
        d
    }

    /// Dualcast of `len` bytes from `src` to `dst1` and `dst2` (DSA spec,
    /// "Dualcast": bits 11:0 of the two destinations must be equal, else
    /// status [`status::DCAST_ERR`]).
    pub const fn dualcast(src: u64, dst1: u64, dst2: u64, len: u32) -> Descriptor {
        let mut d = Descriptor::new(opcode::DUALCAST, 0);
        d.src = src;
        d.dst = dst1;
        d.size = len;
        d.op_specific[0] = dst2;
        d
    }

    /// CRC-32C of `len` bytes at `src` continued from `seed` (DSA spec,
    /// "CRC Generation"). The device inverts the seed, runs the reflected
    /// CRC-32C over the data and inverts the result (Intel's idxd-config
    /// `test/dsa.c` `dsa_calculate_crc32`, which checks the device): the
    /// record's CRC value is the standard CRC-32C continued from `seed`
    /// (0 to start), the software module's `crc32c_update(seed, data)`, so
    /// a record's value seeds the next descriptor as is (SPDK chains with
    /// [`flags::CRC_READ_SEED`] and inverts only the last value for its
    /// own API).
    pub const fn crc32c(src: u64, len: u32, seed: u32) -> Descriptor {
        let mut d = Descriptor::new(opcode::CRCGEN, 0);
        d.src = src;
        d.size = len;
        d.op_specific[0] = seed as u64;
        d
    }

    /// Copy of `len` bytes from `src` to `dst` with the CRC-32C of the data
    /// (DSA spec, "Copy with CRC Generation"); the seed as for
    /// [`Descriptor::crc32c`].
    pub const fn copy_crc32c(src: u64, dst: u64, len: u32, seed: u32) -> Descriptor {
        let mut d = Descriptor::new(opcode::COPY_CRC, 0);
        d.src = src;
        d.dst = dst;
        d.size = len;
        d.op_specific[0] = seed as u64;
        d
    }

    /// This CRC descriptor seeded with the 32-bit value at `addr` (4-byte
    /// aligned) instead of its seed field: [`flags::CRC_READ_SEED`].
    pub const fn with_seed_address(mut self, addr: u64) -> Descriptor {
        self.op_specific[1] = addr;
        self.set_flags(self.flags() | flags::CRC_READ_SEED);
        self
    }

    /// Batch of `count` descriptors at `list` (64-byte aligned) (DSA spec,
    /// "Batch": `count` from 2 to the WQ's maximum batch size; a count of
    /// 0 or 1, or one above the maximum, is status
    /// [`status::DESC_CNT_ERANGE`]).
    pub const fn batch(list: u64, count: u32) -> Descriptor {
        let mut d = Descriptor::new(opcode::BATCH, 0);
        d.src = list;
        d.size = count;
        d
    }

    /// No-op (DSA spec, "No-op").
    pub const fn noop() -> Descriptor {
        Descriptor::new(opcode::NOOP, 0)
    }

    /// Drain (DSA spec, "Drain").
    pub const fn drain() -> Descriptor {
        Descriptor::new(opcode::DRAIN, 0)
    }

    /// The second destination (dualcast).
    pub const fn dest2(&self) -> u64 {
        self.op_specific[0]
    }

    /// The CRC seed (crc, copy+crc).
    pub const fn crc_seed(&self) -> u32 {
        self.op_specific[0] as u32
    }

    /// The CRC seed address (with [`flags::CRC_READ_SEED`]).
    pub const fn crc_seed_addr(&self) -> u64 {
        self.op_specific[1]
    }

    /// The expected result (with [`flags::CHECK_RESULT`]).
    pub const fn expected_result(&self) -> u8 {
        self.op_specific[0] as u8
    }

    /// The 64 bytes as the device reads them (little endian).
    pub fn to_bytes(&self) -> [u8; DESC_SIZE] {
        let mut b = [0u8; DESC_SIZE];
        b[0..4].copy_from_slice(&self.pasid.to_le_bytes());
        b[4..8].copy_from_slice(&self.flags_opcode.to_le_bytes());
        b[8..16].copy_from_slice(&self.completion.to_le_bytes());
        b[16..24].copy_from_slice(&self.src.to_le_bytes());
        b[24..32].copy_from_slice(&self.dst.to_le_bytes());
        b[32..36].copy_from_slice(&self.size.to_le_bytes());
        b[36..38].copy_from_slice(&self.int_handle.to_le_bytes());
        b[38..40].copy_from_slice(&self.rsvd.to_le_bytes());
        for (i, w) in self.op_specific.iter().enumerate() {
            b[40 + 8 * i..48 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// A descriptor from the 64 bytes the device read (little endian).
    pub fn from_bytes(b: &[u8; DESC_SIZE]) -> Descriptor {
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(w)
        };
        Descriptor {
            pasid: u32_at(0),
            flags_opcode: u32_at(4),
            completion: u64_at(8),
            src: u64_at(16),
            dst: u64_at(24),
            size: u32_at(32),
            int_handle: u16_at(36),
            rsvd: u16_at(38),
            op_specific: [u64_at(40), u64_at(48), u64_at(56)],
        }
    }
}

/// The 8-byte fill (or compare) pattern of a byte: the byte replicated.
pub const fn fill_pattern(byte: u8) -> u64 {
    u64::from_ne_bytes([byte; 8])
}

// ---------------------------------------------------------------------------
// Completion record (DSA spec, "Completion Record"; Linux
// `struct dsa_completion_record`)
// ---------------------------------------------------------------------------

/// Bytes of a DSA completion record.
pub const COMPLETION_SIZE: usize = 32;
/// A completion record's alignment (DSA spec, "Completion Record": 32
/// bytes for DSA; a misaligned address is a software error
/// [`status::CRA_ALIGN`] reported in SWERR, no record is written).
pub const COMPLETION_ALIGN: u64 = 32;

/// The completion record the device writes at the descriptor's completion
/// address: 32 bytes, 32-byte aligned, little endian.
///
/// The device writes the status byte last: a reader checks the status for
/// non-zero (with acquire ordering) before it reads any other field, and
/// zeroes the status before it reuses the record. The other fields are
/// garbage until then.
///
/// | bytes | field |
/// |-------|-------|
/// | 0     | status (6:0 code, 7 the fault was on a write) |
/// | 1     | result (compare: 0 equal, 1 different) |
/// | 2     | fault info (rev 2.0; reserved in rev 1.0 and in Linux's and SPDK's headers, which the model leaves 0) |
/// | 3     | reserved |
/// | 4-7   | bytes completed; descriptors completed (batch); offset of the first difference (compare, result 1) |
/// | 8-15  | fault address |
/// | 16-31 | operation specific: CRC value (crc, copy+crc: 16-19); invalid flags (status [`status::INVALID_FLAGS`]: 16-18) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, align(32))]
pub struct CompletionRecord {
    /// Status: 0 while the operation runs ([`status`]).
    pub status: u8,
    /// Result (compare, compare pattern).
    pub result: u8,
    /// Fault information (rev 2.0).
    pub fault_info: u8,
    /// Reserved.
    pub rsvd: u8,
    /// Bytes completed; descriptors completed (batch).
    pub bytes_completed: u32,
    /// The faulting address (page faults).
    pub fault_addr: u64,
    /// Operation specific (bytes 16-31).
    pub op_specific: [u32; 4],
}

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<CompletionRecord>() == COMPLETION_SIZE);
    assert!(align_of::<CompletionRecord>() == COMPLETION_ALIGN as usize);
    assert!(offset_of!(CompletionRecord, status) == comp::STATUS);
    assert!(offset_of!(CompletionRecord, result) == comp::RESULT);
    assert!(offset_of!(CompletionRecord, fault_info) == comp::FAULT_INFO);
    assert!(offset_of!(CompletionRecord, bytes_completed) == comp::BYTES_COMPLETED);
    assert!(offset_of!(CompletionRecord, fault_addr) == comp::FAULT_ADDR);
    assert!(offset_of!(CompletionRecord, op_specific) == comp::OP_SPECIFIC);
};

/// Byte offsets of the completion record fields (the record lives in DMA
/// memory and is read through atomic accessors).
pub mod comp {
    /// Status (8 bits), written last.
    pub const STATUS: usize = 0;
    /// Result (8 bits).
    pub const RESULT: usize = 1;
    /// Fault info (8 bits).
    pub const FAULT_INFO: usize = 2;
    /// Bytes / descriptors completed (32 bits).
    pub const BYTES_COMPLETED: usize = 4;
    /// Fault address (64 bits).
    pub const FAULT_ADDR: usize = 8;
    /// First operation-specific byte.
    pub const OP_SPECIFIC: usize = 16;
    /// CRC value (32 bits; crc, copy+crc). Linux's uapi header declares it
    /// 16 bits wide; SPDK's `crc32c_val` and the spec's 32 are followed.
    pub const CRC_VALUE: usize = 16;
    /// Invalid flags (24 bits; status [`super::status::INVALID_FLAGS`]).
    pub const INVALID_FLAGS: usize = 16;
}

/// Completion status codes (the status byte's bits 6:0; DSA spec,
/// "Completion Record", Status; Linux `enum dsa_completion_status`).
pub mod status {
    /// Not yet complete (the value software writes before submission).
    pub const NONE: u8 = 0x00;
    /// Success.
    pub const SUCCESS: u8 = 0x01;
    /// Success with false predicate (Check Result: the result differs from
    /// the Expected Result).
    pub const SUCCESS_PRED: u8 = 0x02;
    /// Page fault with Block on Fault off (or not allowed): partial
    /// completion; Bytes Completed and Fault Address say where.
    pub const PAGE_FAULT_NOBOF: u8 = 0x03;
    /// Page fault with Block on Fault on, that the fault's resolution
    /// (page request) could not resolve: partial completion.
    pub const PAGE_FAULT_IR: u8 = 0x04;
    /// A batch whose descriptors did not all succeed (each one's own record
    /// says which); Descriptors Completed counts those processed.
    pub const BATCH_FAIL: u8 = 0x05;
    /// A page fault reading a batch's descriptor list.
    pub const BATCH_PAGE_FAULT: u8 = 0x06;
    /// Apply delta: offsets not increasing.
    pub const DR_OFFSET_NOINC: u8 = 0x07;
    /// Apply delta: offset out of range.
    pub const DR_OFFSET_ERANGE: u8 = 0x08;
    /// DIF error.
    pub const DIF_ERR: u8 = 0x09;
    /// Unsupported opcode (also: a batch or drain inside a batch).
    pub const BAD_OPCODE: u8 = 0x10;
    /// Invalid flags (the invalid ones in the record's bytes 16-18).
    pub const INVALID_FLAGS: u8 = 0x11;
    /// Non-zero reserved field.
    pub const NOZERO_RESERVE: u8 = 0x12;
    /// Transfer size out of range (above the WQ's maximum).
    pub const XFER_ERANGE: u8 = 0x13;
    /// Descriptor count out of range (a batch of fewer than 2, or more
    /// than the WQ's maximum batch size).
    pub const DESC_CNT_ERANGE: u8 = 0x14;
    /// Delta record size out of range.
    pub const DR_ERANGE: u8 = 0x15;
    /// Overlapping buffers (where the operation forbids them).
    pub const OVERLAP_BUFFERS: u8 = 0x16;
    /// Dualcast destinations whose bits 11:0 differ.
    pub const DCAST_ERR: u8 = 0x17;
    /// Misaligned descriptor list (batch).
    pub const DESCLIST_ALIGN: u8 = 0x18;
    /// Invalid completion interrupt handle.
    pub const INT_HANDLE_INVAL: u8 = 0x19;
    /// Completion record address translation failed (SWERR only: no
    /// record can be written).
    pub const CRA_XLAT: u8 = 0x1a;
    /// Misaligned completion record address (SWERR only).
    pub const CRA_ALIGN: u8 = 0x1b;
    /// Misaligned address (e.g. a CRC seed address).
    pub const ADDR_ALIGN: u8 = 0x1c;
    /// Privilege not allowed.
    pub const PRIV_BAD: u8 = 0x1d;
    /// Traffic class configuration error.
    pub const TRAFFIC_CLASS_CONF: u8 = 0x1e;
    /// Page fault on a readback address.
    pub const PFAULT_RDBA: u8 = 0x1f;
    /// Hardware error.
    pub const HW_ERR1: u8 = 0x20;
    /// Hardware error on destination readback.
    pub const HW_ERR_DRB: u8 = 0x21;
    /// Address translation failure.
    pub const TRANSLATION_FAIL: u8 = 0x22;

    /// The status byte's code bits.
    pub const MASK: u8 = 0x7f;
    /// The status byte's "the page fault was on a write" bit.
    pub const WRITE: u8 = 0x80;

    /// The code of a status byte.
    pub const fn code(byte: u8) -> u8 {
        byte & MASK
    }

    /// Whether a status is a page fault with partial completion (the
    /// operation may be resumed from Bytes Completed).
    pub const fn is_page_fault(byte: u8) -> bool {
        matches!(code(byte), PAGE_FAULT_NOBOF | PAGE_FAULT_IR)
    }

    /// A name for messages.
    pub fn name(byte: u8) -> &'static str {
        match code(byte) {
            NONE => "not complete",
            SUCCESS => "success",
            SUCCESS_PRED => "success with false predicate",
            PAGE_FAULT_NOBOF => "page fault (partial completion)",
            PAGE_FAULT_IR => "page fault, not resolved (partial completion)",
            BATCH_FAIL => "batch: a descriptor failed",
            BATCH_PAGE_FAULT => "batch: page fault reading the descriptor list",
            DR_OFFSET_NOINC => "delta record offsets not increasing",
            DR_OFFSET_ERANGE => "delta record offset out of range",
            DIF_ERR => "DIF error",
            BAD_OPCODE => "unsupported opcode",
            INVALID_FLAGS => "invalid flags",
            NOZERO_RESERVE => "non-zero reserved field",
            XFER_ERANGE => "transfer size out of range",
            DESC_CNT_ERANGE => "descriptor count out of range",
            DR_ERANGE => "delta record size out of range",
            OVERLAP_BUFFERS => "overlapping buffers",
            DCAST_ERR => "dualcast destinations misaligned",
            DESCLIST_ALIGN => "descriptor list misaligned",
            INT_HANDLE_INVAL => "invalid interrupt handle",
            CRA_XLAT => "completion record address translation failed",
            CRA_ALIGN => "completion record address misaligned",
            ADDR_ALIGN => "address misaligned",
            PRIV_BAD => "privilege not allowed",
            TRAFFIC_CLASS_CONF => "traffic class configuration",
            PFAULT_RDBA => "page fault on readback address",
            HW_ERR1 => "hardware error",
            HW_ERR_DRB => "hardware error on destination readback",
            TRANSLATION_FAIL => "address translation failure",
            _ => "unknown status",
        }
    }
}

// ---------------------------------------------------------------------------
// BAR0 registers (DSA spec, "Registers"; Linux `registers.h`)
// ---------------------------------------------------------------------------

/// The BAR of the MMIO registers.
pub const MMIO_BAR: u32 = 0;
/// The BAR of the work-submission portals.
pub const WQ_BAR: u32 = 2;

/// Version (32 bits): reads [`VERSION_1`] on a DSA 1.0 device (Sapphire
/// Rapids), [`VERSION_2`] on a 2.0 one. Linux compares the whole value
/// with its `DEVICE_VERSION_1`/`_2` (0x100, 0x200); its
/// `IDXD_VER_MAJOR_MASK` (0xf0) does not fit those values, so compare
/// whole values too.
pub const VERSION: usize = 0x00;
/// VERSION of a DSA 1.0 device.
pub const VERSION_1: u32 = 0x100;
/// VERSION of a DSA 2.0 device.
pub const VERSION_2: u32 = 0x200;
/// General capabilities (64 bits, [`gencap`]).
pub const GENCAP: usize = 0x10;
/// Work queue capabilities (64 bits, [`wqcap`]).
pub const WQCAP: usize = 0x20;
/// Group capabilities (64 bits, [`grpcap`]).
pub const GRPCAP: usize = 0x30;
/// Engine capabilities (64 bits): bits 7:0 the number of engines.
pub const ENGCAP: usize = 0x38;
/// Operation capabilities (256 bits, four 64-bit words): bit `n` set when
/// opcode `n` is supported.
pub const OPCAP: usize = 0x40;
/// The table offsets (128 bits, [`offsets`]).
pub const OFFSETS: usize = 0x60;
/// General configuration (32 bits, [`gencfg`]).
pub const GENCFG: usize = 0x80;
/// General control (32 bits, [`genctrl`]).
pub const GENCTRL: usize = 0x88;
/// General status (32 bits, [`gensts`]).
pub const GENSTS: usize = 0x90;
/// Interrupt cause (32 bits).
pub const INTCAUSE: usize = 0x98;
/// Command (32 bits, [`cmd`]).
pub const CMD: usize = 0xa0;
/// Command status (32 bits, [`cmdsts`]).
pub const CMDSTS: usize = 0xa8;
/// Command capabilities (32 bits; valid when GENCAP has
/// [`gencap::CMD_CAP`]).
pub const CMDCAP: usize = 0xb0;
/// Software error (256 bits, four 64-bit words, [`swerr`]).
pub const SWERR: usize = 0xc0;

/// ENGCAP's engine-count bits.
pub const ENGCAP_ENGINES_MASK: u64 = 0xff;

/// GENCAP bits and fields.
pub mod gencap {
    /// Block on fault supported.
    pub const BLOCK_ON_FAULT: u64 = 1 << 0;
    /// Overlapping memory move supported.
    pub const OVERLAP_COPY: u64 = 1 << 1;
    /// Cache control (to memory) supported.
    pub const CACHE_CONTROL_MEM: u64 = 1 << 2;
    /// Cache control (to cache) supported.
    pub const CACHE_CONTROL_CACHE: u64 = 1 << 3;
    /// CMDCAP present.
    pub const CMD_CAP: u64 = 1 << 4;
    /// Destination readback supported.
    pub const DEST_READBACK: u64 = 1 << 8;
    /// Drain readback supported.
    pub const DRAIN_READBACK: u64 = 1 << 9;
    /// Configuration is writable (else the device comes configured).
    pub const CONFIG_SUPPORT: u64 = 1 << 31;

    /// The largest transfer size in bytes: 2^(bits 20:16).
    pub const fn max_transfer(v: u64) -> u64 {
        1 << ((v >> 16) & 0x1f)
    }

    /// The largest batch (descriptors): 2^(bits 24:21).
    pub const fn max_batch(v: u64) -> u32 {
        1 << ((v >> 21) & 0xf)
    }

    /// GENCAP with these shifts (for the model).
    pub const fn with_shifts(bits: u64, xfer_shift: u32, batch_shift: u32) -> u64 {
        (bits & !(0x1ff << 16))
            | ((xfer_shift as u64 & 0x1f) << 16)
            | ((batch_shift as u64 & 0xf) << 21)
    }
}

/// WQCAP bits and fields.
pub mod wqcap {
    /// Total WQ entries of the device (bits 15:0).
    pub const fn total_size(v: u64) -> u32 {
        (v & 0xffff) as u32
    }

    /// Number of WQs (bits 23:16).
    pub const fn num_wqs(v: u64) -> u32 {
        ((v >> 16) & 0xff) as u32
    }

    /// Bytes of one WQCFG entry: 32 << (bits 27:24) (Linux
    /// `IDXD_WQCFG_MIN` 5).
    pub const fn wqcfg_size(v: u64) -> usize {
        32 << ((v >> 24) & 0xf)
    }

    /// Shared WQs supported.
    pub const SHARED: u64 = 1 << 48;
    /// Dedicated WQs supported.
    pub const DEDICATED: u64 = 1 << 49;
    /// WQ ATS disable supported.
    pub const ATS: u64 = 1 << 50;
    /// WQ priority supported.
    pub const PRIORITY: u64 = 1 << 51;
    /// WQ occupancy reported.
    pub const OCCUPANCY: u64 = 1 << 52;
    /// WQ occupancy interrupt supported.
    pub const OCCUPANCY_INT: u64 = 1 << 53;
    /// Per-WQ operation configuration supported (Linux; rev 2.0).
    pub const OP_CONFIG: u64 = 1 << 54;
    /// WQ PRS disable supported (Linux; rev 2.0).
    pub const PRS: u64 = 1 << 55;
}

/// GRPCAP fields.
pub mod grpcap {
    /// Number of groups (bits 7:0).
    pub const fn num_groups(v: u64) -> u32 {
        (v & 0xff) as u32
    }

    /// Total read buffers (bits 15:8).
    pub const fn read_buffers(v: u64) -> u32 {
        ((v >> 8) & 0xff) as u32
    }
}

/// The table offsets register: each field times [`offsets::MULT`] is a
/// BAR0 offset.
pub mod offsets {
    /// What each field is multiplied by.
    pub const MULT: usize = 0x100;

    /// GRPCFG table (first word, bits 15:0).
    pub const fn grpcfg(w0: u64) -> usize {
        (w0 & 0xffff) as usize * MULT
    }

    /// WQCFG table (first word, bits 31:16).
    pub const fn wqcfg(w0: u64) -> usize {
        ((w0 >> 16) & 0xffff) as usize * MULT
    }

    /// MSI-X permissions table (first word, bits 47:32).
    pub const fn msix_perm(w0: u64) -> usize {
        ((w0 >> 32) & 0xffff) as usize * MULT
    }

    /// IMS table (first word, bits 63:48).
    pub const fn ims(w0: u64) -> usize {
        ((w0 >> 48) & 0xffff) as usize * MULT
    }

    /// Performance monitoring registers (second word, bits 15:0).
    pub const fn perfmon(w1: u64) -> usize {
        (w1 & 0xffff) as usize * MULT
    }
}

/// GENCFG fields.
pub mod gencfg {
    /// Global read-buffer limit (bits 7:0).
    pub const RDBUF_LIMIT_MASK: u32 = 0xff;
    /// User-mode interrupts enable (bit 12, Linux).
    pub const USER_INT_EN: u32 = 1 << 12;
    /// Event log enable (bit 13, rev 2.0).
    pub const EVL_EN: u32 = 1 << 13;
}

/// GENCTRL bits.
pub mod genctrl {
    /// Interrupt on a software error.
    pub const SOFTERR_INT_EN: u32 = 1 << 0;
    /// Interrupt on a halt.
    pub const HALT_INT_EN: u32 = 1 << 1;
    /// Interrupt on an event log entry (rev 2.0).
    pub const EVL_INT_EN: u32 = 1 << 2;
}

/// GENSTS fields.
pub mod gensts {
    /// The device state (bits 1:0).
    pub const fn state(v: u32) -> u32 {
        v & 0x3
    }

    /// The reset type needed after a halt (bits 3:2).
    pub const fn reset_type(v: u32) -> u32 {
        (v >> 2) & 0x3
    }

    /// Disabled.
    pub const DISABLED: u32 = 0;
    /// Enabled.
    pub const ENABLED: u32 = 1;
    /// Draining (disable in progress).
    pub const DRAIN: u32 = 2;
    /// Halted by an error; [`reset_type`] says how to recover.
    pub const HALT: u32 = 3;

    /// Reset types: a device reset command suffices.
    pub const RESET_SOFTWARE: u32 = 0;
    /// A function-level reset is needed.
    pub const RESET_FLR: u32 = 1;
    /// A warm reset is needed.
    pub const RESET_WARM: u32 = 2;
    /// A cold reset is needed.
    pub const RESET_COLD: u32 = 3;

    /// A name for a state, for messages.
    pub fn name(state: u32) -> &'static str {
        match state {
            DISABLED => "disabled",
            ENABLED => "enabled",
            DRAIN => "draining",
            _ => "halted",
        }
    }
}

/// The command register: operand (19:0), command (24:20), interrupt
/// request (31).
pub mod cmd {
    /// Enable the device.
    pub const ENABLE_DEVICE: u32 = 1;
    /// Disable the device.
    pub const DISABLE_DEVICE: u32 = 2;
    /// Drain every WQ.
    pub const DRAIN_ALL: u32 = 3;
    /// Abort every WQ.
    pub const ABORT_ALL: u32 = 4;
    /// Reset the device (configuration back to defaults).
    pub const RESET_DEVICE: u32 = 5;
    /// Enable a WQ (operand: its index).
    pub const ENABLE_WQ: u32 = 6;
    /// Disable WQs (operand: [`wq_mask_operand`]).
    pub const DISABLE_WQ: u32 = 7;
    /// Drain WQs (operand: [`wq_mask_operand`]).
    pub const DRAIN_WQ: u32 = 8;
    /// Abort WQs (operand: [`wq_mask_operand`]).
    pub const ABORT_WQ: u32 = 9;
    /// Reset WQs (operand: [`wq_mask_operand`]).
    pub const RESET_WQ: u32 = 10;
    /// Drain a PASID.
    pub const DRAIN_PASID: u32 = 11;
    /// Abort a PASID.
    pub const ABORT_PASID: u32 = 12;
    /// Request an interrupt handle.
    pub const REQUEST_INT_HANDLE: u32 = 13;
    /// Release an interrupt handle.
    pub const RELEASE_INT_HANDLE: u32 = 14;

    /// Interrupt on completion of the command.
    pub const INT_REQ: u32 = 1 << 31;

    /// The register value of `command` with `operand`.
    pub const fn value(command: u32, operand: u32) -> u32 {
        (operand & 0xf_ffff) | (command & 0x1f) << 20
    }

    /// The operand naming WQ `wq` in the disable, drain, abort and reset
    /// WQ commands: a bit in a 16-WQ mask (15:0) and the mask's index
    /// (19:16) (Linux `idxd_wq_disable`).
    pub const fn wq_mask_operand(wq: u32) -> u32 {
        (1 << (wq % 16)) | (wq / 16) << 16
    }

    /// The command field of a register value.
    pub const fn command(v: u32) -> u32 {
        (v >> 20) & 0x1f
    }

    /// The operand field of a register value.
    pub const fn operand(v: u32) -> u32 {
        v & 0xf_ffff
    }
}

/// The command status register: error (7:0), result (23:8), active (31).
pub mod cmdsts {
    /// A command is in progress.
    pub const ACTIVE: u32 = 1 << 31;
    /// The error code bits.
    pub const ERR_MASK: u32 = 0xff;

    /// The error code of a value.
    pub const fn err(v: u32) -> u32 {
        v & ERR_MASK
    }

    /// The result of a value.
    pub const fn result(v: u32) -> u32 {
        (v >> 8) & 0xffff
    }

    /// Success.
    pub const SUCCESS: u32 = 0x00;
    /// Invalid command.
    pub const INVAL_CMD: u32 = 0x01;
    /// Invalid WQ index.
    pub const INVAL_WQIDX: u32 = 0x02;
    /// Hardware error.
    pub const HW_ERR: u32 = 0x03;
    /// Enable device: already enabled.
    pub const ERR_DEV_ENABLED: u32 = 0x10;
    /// Enable device: configuration error.
    pub const ERR_CONFIG: u32 = 0x11;
    /// Enable device: bus mastering off.
    pub const ERR_BUSMASTER_EN: u32 = 0x12;
    /// Enable device: invalid PASID.
    pub const ERR_PASID_INVAL: u32 = 0x13;
    /// Enable device: WQ sizes above the total.
    pub const ERR_WQ_SIZE_ERANGE: u32 = 0x14;
    /// Enable device: group configuration errors.
    pub const ERR_GRP_CONFIG: u32 = 0x15;
    /// Enable WQ: the device is not enabled.
    pub const ERR_DEV_NOTEN: u32 = 0x20;
    /// Enable WQ: already enabled.
    pub const ERR_WQ_ENABLED: u32 = 0x21;
    /// Enable WQ: size 0.
    pub const ERR_WQ_SIZE: u32 = 0x22;
    /// Enable WQ: priority 0.
    pub const ERR_WQ_PRIOR: u32 = 0x23;
    /// Enable WQ: mode not supported.
    pub const ERR_WQ_MODE: u32 = 0x24;
    /// Enable WQ: block on fault not supported.
    pub const ERR_BOF_EN: u32 = 0x25;
    /// Enable WQ: PASID enable not supported.
    pub const ERR_PASID_EN: u32 = 0x26;
    /// Enable WQ: maximum batch size above GENCAP's.
    pub const ERR_MAX_BATCH_SIZE: u32 = 0x27;
    /// Enable WQ: maximum transfer size above GENCAP's.
    pub const ERR_MAX_XFER_SIZE: u32 = 0x28;
}

/// The software error register (four 64-bit words at [`super::SWERR`]):
/// errors that cannot be reported in a completion record (a completion
/// address that cannot be written, a descriptor dropped).
pub mod swerr {
    /// Word 0: an error is recorded.
    pub const VALID: u64 = 1 << 0;
    /// Word 0: another error came while one was recorded.
    pub const OVERFLOW: u64 = 1 << 1;
    /// Word 0: the descriptor fields are valid.
    pub const DESC_VALID: u64 = 1 << 2;
    /// Word 0: the WQ index is valid.
    pub const WQ_IDX_VALID: u64 = 1 << 3;
    /// Word 0: the error was in a batch (word 1 has the index).
    pub const BATCH: u64 = 1 << 4;
    /// Word 0: the fault was on a write.
    pub const FAULT_RW: u64 = 1 << 5;
    /// Word 0: the descriptor was privileged.
    pub const PRIV: u64 = 1 << 6;
    /// What software writes to word 0 to clear the record (write 1 to
    /// clear).
    pub const ACK: u64 = VALID | OVERFLOW;

    /// Word 0: the error code (bits 15:8, a [`super::status`] code).
    pub const fn error(w0: u64) -> u8 {
        (w0 >> 8) as u8
    }

    /// Word 0: the WQ index (bits 23:16).
    pub const fn wq(w0: u64) -> u32 {
        ((w0 >> 16) & 0xff) as u32
    }

    /// Word 0: the operation (bits 39:32).
    pub const fn operation(w0: u64) -> u8 {
        (w0 >> 32) as u8
    }

    /// Word 0 of a record.
    pub const fn word0(error: u8, wq: u32, operation: u8) -> u64 {
        VALID
            | DESC_VALID
            | WQ_IDX_VALID
            | (error as u64) << 8
            | ((wq & 0xff) as u64) << 16
            | (operation as u64) << 32
    }

    /// Word 1: the index in the batch (bits 15:0).
    pub const fn batch_index(w1: u64) -> u32 {
        (w1 & 0xffff) as u32
    }

    /// Word 1: the invalid flags (bits 63:32).
    pub const fn invalid_flags(w1: u64) -> u32 {
        (w1 >> 32) as u32
    }
}

/// One group's configuration (GRPCFG table entry, 64 bytes).
pub mod grpcfg {
    /// Bytes of one entry.
    pub const SIZE: usize = 64;
    /// The WQs of the group: a 256-bit mask (four 64-bit words).
    pub const WQS: usize = 0x00;
    /// The engines of the group (64 bits).
    pub const ENGINES: usize = 0x20;
    /// Group flags (32 bits).
    pub const FLAGS: usize = 0x28;
}

/// One WQ's configuration (WQCFG table entry of [`wqcap::wqcfg_size`]
/// bytes; dword indices as in Linux `union wqcfg`).
pub mod wqcfg {
    /// Dword 0: WQ size (bits 15:0, entries).
    pub const SIZE: usize = 0;
    /// Dword 1: WQ threshold (bits 15:0; shared WQs' limited portal).
    pub const THRESHOLD: usize = 1;
    /// Dword 2: mode, block on fault, priority, PASID.
    pub const MODE: usize = 2;
    /// Dword 3: maximum transfer and batch shifts.
    pub const MAX: usize = 3;
    /// Dword 6: occupancy, mode support, WQ state.
    pub const STATE: usize = 6;

    /// Dword 2: dedicated mode (else shared).
    pub const MODE_DEDICATED: u32 = 1 << 0;
    /// Dword 2: block on fault enable.
    pub const BOF: u32 = 1 << 1;
    /// Dword 2: ATS disable.
    pub const ATS_DISABLE: u32 = 1 << 2;
    /// Dword 2: PRS disable.
    pub const PRS_DISABLE: u32 = 1 << 3;
    /// Dword 2: priority (bits 7:4).
    pub const fn priority(p: u32) -> u32 {
        (p & 0xf) << 4
    }
    /// Dword 2: PASID (bits 27:8).
    pub const fn pasid(p: u32) -> u32 {
        (p & 0xf_ffff) << 8
    }
    /// Dword 2: PASID enable.
    pub const PASID_EN: u32 = 1 << 28;
    /// Dword 2: privileged.
    pub const PRIV: u32 = 1 << 29;

    /// Dword 3 from the shifts: transfer (4:0) and batch (8:5).
    pub const fn max(xfer_shift: u32, batch_shift: u32) -> u32 {
        (xfer_shift & 0x1f) | (batch_shift & 0xf) << 5
    }
    /// Dword 3: the maximum transfer size in bytes.
    pub const fn max_transfer(dw3: u32) -> u64 {
        1 << (dw3 & 0x1f)
    }
    /// Dword 3: the maximum batch size.
    pub const fn max_batch(dw3: u32) -> u32 {
        1 << ((dw3 >> 5) & 0xf)
    }

    /// Dword 6: occupancy (bits 15:0).
    pub const fn occupancy(dw6: u32) -> u32 {
        dw6 & 0xffff
    }
    /// Dword 6: mode support (bit 29): the WQ's mode may be configured.
    pub const MODE_SUPPORT: u32 = 1 << 29;
    /// Dword 6: WQ state (bits 31:30).
    pub const fn state(dw6: u32) -> u32 {
        dw6 >> 30
    }
    /// WQ state: disabled.
    pub const STATE_DISABLED: u32 = 0;
    /// WQ state: enabled.
    pub const STATE_ENABLED: u32 = 1;

    /// The BAR0 offset of dword `dword` of WQ `wq`'s entry.
    pub const fn offset(table: usize, entry_size: usize, wq: usize, dword: usize) -> usize {
        table + wq * entry_size + 4 * dword
    }
}

// ---------------------------------------------------------------------------
// Work submission portals (BAR2; DSA spec, "Work Submission Portals";
// Linux `idxd_get_wq_portal_offset`, SPDK `WQ_TOTAL_PORTAL_SIZE`)
// ---------------------------------------------------------------------------

/// Bytes of one portal: a 4 KiB page; a descriptor may be written at any
/// 64-byte aligned offset in it (SPDK rotates through them,
/// [`PORTAL_STRIDE`] apart).
pub const PORTAL_SIZE: usize = 0x1000;
/// Bytes between the offsets SPDK writes successive descriptors at.
pub const PORTAL_STRIDE: usize = 0x40;
/// Bytes of a WQ's four portals.
pub const WQ_PORTALS_SIZE: usize = 4 * PORTAL_SIZE;

/// Which of a WQ's four portals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortalKind {
    /// The limited portal (a shared WQ accepts there only below its
    /// threshold); else the unlimited one.
    pub limited: bool,
    /// Interrupts through IMS (else MSI-X).
    pub ims: bool,
}

/// The BAR2 offset of WQ `wq`'s portal of kind `kind`: four pages per WQ,
/// unlimited MSI-X at +0, limited MSI-X at +4 KiB, unlimited IMS at +8 KiB,
/// limited IMS at +12 KiB.
pub const fn portal_offset(wq: usize, kind: PortalKind) -> usize {
    wq * WQ_PORTALS_SIZE
        + (kind.limited as usize) * PORTAL_SIZE
        + (kind.ims as usize) * 2 * PORTAL_SIZE
}

/// Whether OPCAP (four words) has `op`.
pub const fn opcap_has(opcap: &[u64; 4], op: u8) -> bool {
    opcap[(op / 64) as usize] & (1 << (op % 64)) != 0
}

/// OPCAP with the opcodes of `ops`.
pub const fn opcap_of(ops: &[u8]) -> [u64; 4] {
    let mut caps = [0u64; 4];
    let mut i = 0;
    while i < ops.len() {
        let op = ops[i];
        caps[(op / 64) as usize] |= 1 << (op % 64);
        i += 1;
    }
    caps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_layout_and_helpers() {
        let d = Descriptor::dualcast(0x1000, 0x2040, 0x3040, 4096).with_completion(0x4000);
        assert_eq!(d.opcode(), opcode::DUALCAST);
        assert_eq!(d.flags(), flags::CRAV | flags::RCR);
        let b = d.to_bytes();
        assert_eq!(b[7], opcode::DUALCAST);
        assert_eq!(b[4], (flags::CRAV | flags::RCR) as u8);
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 0x4000);
        assert_eq!(u64::from_le_bytes(b[40..48].try_into().unwrap()), 0x3040);
        assert_eq!(Descriptor::from_bytes(&b), d);
        let c = Descriptor::crc32c(0x1000, 512, 0xdead_beef).with_seed_address(0x5004);
        assert_eq!(c.crc_seed(), 0xdead_beef);
        assert_eq!(c.crc_seed_addr(), 0x5004);
        assert_eq!(c.flags(), flags::CRC_READ_SEED);
        assert_eq!(c.to_bytes()[6], 1, "bit 16 of the flags is byte 6 bit 0");
        let mut n = Descriptor::new(opcode::MEMMOVE, 0xffff_ffff);
        assert_eq!(n.opcode(), opcode::MEMMOVE);
        n.set_flags(flags::FENCE);
        assert_eq!(n.flags(), flags::FENCE);
    }

    #[test]
    fn registers_and_portals() {
        assert!(is_dsa(0x8086, 0x0b25));
        assert!(!is_dsa(0x8086, 0x0cfe), "IAX is not DSA");
        let g = gencap::with_shifts(gencap::BLOCK_ON_FAULT, 31, 10);
        assert_eq!(gencap::max_transfer(g), 1 << 31);
        assert_eq!(gencap::max_batch(g), 1024);
        assert_eq!(wqcap::wqcfg_size(0), 32);
        assert_eq!(wqcap::wqcfg_size(1 << 24), 64);
        assert_eq!(offsets::wqcfg(0x0005_0004), 0x500);
        assert_eq!(cmd::value(cmd::ENABLE_WQ, 3), 0x0060_0003);
        assert_eq!(cmd::wq_mask_operand(17), 0x1_0002);
        assert_eq!(wqcfg::max_transfer(wqcfg::max(21, 5)), 2 << 20);
        assert_eq!(wqcfg::max_batch(wqcfg::max(21, 5)), 32);
        let unl = PortalKind {
            limited: false,
            ims: false,
        };
        let lim_ims = PortalKind {
            limited: true,
            ims: true,
        };
        assert_eq!(portal_offset(1, unl), 0x4000);
        assert_eq!(portal_offset(1, lim_ims), 0x7000);
        let caps = opcap_of(&[opcode::MEMMOVE, opcode::CRCGEN, opcode::CFLUSH]);
        assert!(opcap_has(&caps, opcode::CRCGEN));
        assert!(!opcap_has(&caps, opcode::COMPARE));
        assert_eq!(caps, [1 << 3 | 1 << 16 | 1 << 32, 0, 0, 0]);
        assert_eq!(status::code(status::PAGE_FAULT_NOBOF | status::WRITE), 3);
        assert!(status::is_page_fault(0x83));
        assert_eq!(swerr::error(swerr::word0(status::CRA_XLAT, 2, 3)), 0x1a);
        assert_eq!(swerr::wq(swerr::word0(status::CRA_XLAT, 2, 3)), 2);
    }
}
