//! The I/OAT (Crystal Beach DMA) programming interface: register offsets
//! and values, the 64-byte descriptor, opcodes and control bits, and the
//! PCI device ids the driver takes. Numbers follow SPDK's
//! `include/spdk/ioat_spec.h` and Linux `drivers/dma/ioat/registers.h`
//! (see `shared/REFERENCE.md`, "Intel I/OAT").
//!
//! Thread: none; constants and a plain-data type, used by the channel
//! driver (on its reactor), the VFIO backend and the device model (on its
//! device thread).

/// Intel's PCI vendor id.
pub const VENDOR_INTEL: u16 = 0x8086;

/// PCI device ids of the I/OAT functions the driver takes: SPDK's
/// `ioat_driver_id` table (`lib/env_dpdk/pci_ioat.c`, ids from
/// `include/spdk/pci_ids.h`), the rows of Linux `drivers/dma/ioat/init.c`
/// `ioat_pci_tbl` (names from `include/linux/pci_ids.h`, `..._IOAT_SNB0`
/// and so on) from Sandy Bridge on, less SNB9 (below). Linux also takes
/// the older TBG (3.0) and JSF (3.2) functions, which SPDK does not. One
/// family a row, its comment above it.
#[rustfmt::skip]
pub const DEVICE_IDS: &[u16] = &[
    // SNB (Sandy Bridge-EP, CB 3.2): IOAT_SNB0-7 (0x3c20-0x3c27) and SNB8
    // (0x3c2e). Linux also takes SNB9 (0x3c2f), with no quirk of its own
    // (only `is_xeon_cb32`'s, as for every SNB id: see SKX below); SPDK's
    // table stops at SNB8, and this one follows SPDK.
    0x3c20, 0x3c21, 0x3c22, 0x3c23, 0x3c24, 0x3c25, 0x3c26, 0x3c27, 0x3c2e,
    // IVB (Ivy Bridge-EP, CB 3.2): IOAT_IVB0-7, IVB8, IVB9.
    0x0e20, 0x0e21, 0x0e22, 0x0e23, 0x0e24, 0x0e25, 0x0e26, 0x0e27, 0x0e2e, 0x0e2f,
    // HSW (Haswell-EP, CB 3.3): IOAT_HSW0-7, HSW8, HSW9.
    0x2f20, 0x2f21, 0x2f22, 0x2f23, 0x2f24, 0x2f25, 0x2f26, 0x2f27, 0x2f2e, 0x2f2f,
    // BWD (Avoton/Rangeley, CB 3.3): IOAT_BWD0-3.
    0x0c50, 0x0c51, 0x0c52, 0x0c53,
    // BDX-DE (Broadwell-DE, CB 3.3): IOAT_BDXDE0-3.
    0x6f50, 0x6f51, 0x6f52, 0x6f53,
    // BDX (Broadwell-EP, CB 3.3): IOAT_BDX0-7, BDX8 (0x6f2e), BDX9 (0x6f2f).
    0x6f20, 0x6f21, 0x6f22, 0x6f23, 0x6f24, 0x6f25, 0x6f26, 0x6f27, 0x6f2e, 0x6f2f,
    // SKX (Skylake-SP): IOAT_SKX. Linux lists it with its 3.2 platforms and
    // `ioat_pci_probe` sets its version to 3.2 whatever CBVER reads
    // (`is_skx_ioat`), an override that changes anything only where CBVER
    // reads 3.3 or more: the 3.2 paths then apply (CHANERR_INT cleared at
    // reset, `DEVICE_ID_SKX` below). Separately, `is_xeon_cb32` drops XOR
    // and PQ on it as on every Xeon family it names (JSF, SNB, IVB, HSW,
    // BDX, SKX; this driver uses neither). SPDK has no SKX case and goes
    // by CBVER.
    0x2021,
    // ICX (Ice Lake-SP, CB 3.4): IOAT_ICX.
    0x0b00,
];

/// Whether `vendor:device` is an I/OAT function the driver takes.
pub fn is_supported(vendor: u16, device: u16) -> bool {
    vendor == VENDOR_INTEL && DEVICE_IDS.contains(&device)
}

// ---------------------------------------------------------------------------
// Device registers (BAR0)
// ---------------------------------------------------------------------------

/// Channel count (8 bits): bits 4:0 are the count (Linux
/// `ioat_enumerate_channels`).
pub const CHANCNT: usize = 0x00;
/// CHANCNT's valid bits.
pub const CHANCNT_MASK: u8 = 0x1f;
/// Transfer capacity (8 bits): bits 4:0 = log2(max transfer bytes); 0 = 4 GiB.
pub const XFERCAP: usize = 0x01;
/// General control (8 bits).
pub const GENCTRL: usize = 0x02;
/// Interrupt control (8 bits).
pub const INTRCTRL: usize = 0x03;
/// Attention status (32 bits), one bit per channel.
pub const ATTNSTATUS: usize = 0x04;
/// Crystal Beach version (8 bits): major 7:4, minor 3:0.
pub const CBVER: usize = 0x08;
/// Device status (16 bits).
pub const DEVICE_STATUS: usize = 0x0e;
/// DMA capabilities (32 bits).
pub const DMACAPABILITY: usize = 0x10;

/// The lowest CBVER the driver runs (3.0).
pub const CBVER_MIN: u8 = 0x30;
/// XFERCAP's valid bits.
pub const XFERCAP_MASK: u8 = 0x1f;
/// The smallest valid XFERCAP (4 KiB); below it the value is invalid.
pub const XFERCAP_MIN: u8 = 12;

/// DMACAPABILITY bits.
pub mod dmacap {
    /// Page break.
    pub const PB: u32 = 1 << 0;
    /// CRC.
    pub const CRC: u32 = 1 << 1;
    /// Block fill.
    pub const BFILL: u32 = 1 << 6;
    /// XOR.
    pub const XOR: u32 = 1 << 8;
    /// PQ.
    pub const PQ: u32 = 1 << 9;
}

/// Start of channel `n`'s registers.
pub const fn channel_base(n: usize) -> usize {
    0x80 * (n + 1)
}

/// Channel registers, relative to [`channel_base`].
pub mod chan {
    /// Channel control (16 bits).
    pub const CHANCTRL: usize = 0x00;
    /// Channel command (8 bits).
    pub const CHANCMD: usize = 0x04;
    /// Doorbell (16 bits): running count of descriptors handed over.
    pub const DMACOUNT: usize = 0x06;
    /// Channel status (64 bits).
    pub const CHANSTS: usize = 0x08;
    /// Address of the first descriptor (64 bits).
    pub const CHAINADDR: usize = 0x10;
    /// Completion-writeback address (64 bits, 8-byte aligned).
    pub const CHANCMP: usize = 0x18;
    /// Channel error (32 bits, write 1 to clear).
    pub const CHANERR: usize = 0x28;
    /// Channel error mask (32 bits).
    pub const CHANERRMASK: usize = 0x2c;
    /// Bytes of channel registers.
    pub const SIZE: usize = 0x30;
}

/// CHANCTRL bits (SPDK writes only [`chanctrl::ANY_ERR_ABORT_EN`]; this
/// driver writes [`chanctrl::RUN`]: the channel is polled, never
/// interrupts).
pub mod chanctrl {
    /// Write the completion status on an error too.
    pub const ERR_COMPLETION_EN: u16 = 1 << 2;
    /// Abort (halt) the channel on any error.
    pub const ANY_ERR_ABORT_EN: u16 = 1 << 3;
    /// Interrupt on an error.
    pub const ERR_INT_EN: u16 = 1 << 4;
    /// What the driver programs: halt on any error, and write the
    /// completion word (with the HALTED state and the last completed
    /// descriptor) when it does, so that a halt is learnt from the
    /// completion word, as Linux's `IOAT_CHANCTRL_RUN` does
    /// (`drivers/dma/ioat/registers.h`; `ioat_eh` in `dma.c` takes what
    /// completed from that word), without the interrupt bits.
    pub const RUN: u16 = ERR_COMPLETION_EN | ANY_ERR_ABORT_EN;
}

/// CHANCMD values.
pub mod chancmd {
    /// Suspend after the current descriptor.
    pub const SUSPEND: u8 = 0x04;
    /// Abort the chain.
    pub const ABORT: u8 = 0x08;
    /// Resume a suspended channel.
    pub const RESUME: u8 = 0x10;
    /// Reset the channel (self-clearing).
    pub const RESET: u8 = 0x20;
}

/// CHANSTS: bits 2:0 the state, bits 63:6 the address of the last
/// completed descriptor. The completion word has the same format.
pub mod chansts {
    /// The state bits.
    pub const STATE_MASK: u64 = 0x7;
    /// The completed-descriptor address bits.
    pub const ADDR_MASK: u64 = !0x3f;
    /// Working on descriptors.
    pub const ACTIVE: u64 = 0;
    /// Done with every descriptor handed over.
    pub const IDLE: u64 = 1;
    /// Suspended by CHANCMD.
    pub const SUSPENDED: u64 = 2;
    /// Stopped by an error (see CHANERR).
    pub const HALTED: u64 = 3;
    /// Armed (interrupt pending).
    pub const ARMED: u64 = 4;

    /// The state of a CHANSTS value.
    pub const fn state(v: u64) -> u64 {
        v & STATE_MASK
    }

    /// The completed-descriptor address of a CHANSTS value.
    pub const fn addr(v: u64) -> u64 {
        v & ADDR_MASK
    }

    /// A name for a state, for messages.
    pub fn name(state: u64) -> &'static str {
        match state {
            ACTIVE => "active",
            IDLE => "idle",
            SUSPENDED => "suspended",
            HALTED => "halted",
            ARMED => "armed",
            _ => "unknown",
        }
    }
}

/// CHANERR bits (write 1 to clear). Bits 0-5, 11 and 12 are those of
/// REFERENCE.md; the others are Linux `registers.h`'s.
pub mod chanerr {
    /// Source address error.
    pub const SRC_ADDR: u32 = 1 << 0;
    /// Destination address error.
    pub const DEST_ADDR: u32 = 1 << 1;
    /// Next descriptor address error.
    pub const NEXT_DESC_ADDR: u32 = 1 << 2;
    /// Next descriptor alignment error.
    pub const NEXT_DESC_ALIGN: u32 = 1 << 3;
    /// Chain address value error.
    pub const CHAIN_ADDR_VALUE: u32 = 1 << 4;
    /// Invalid CHANCMD.
    pub const CHANCMD: u32 = 1 << 5;
    /// Chipset uncorrectable data integrity error.
    pub const CHIPSET_DATA_INTEGRITY: u32 = 1 << 6;
    /// DMA uncorrectable data integrity error.
    pub const DMA_DATA_INTEGRITY: u32 = 1 << 7;
    /// Read data error.
    pub const READ_DATA: u32 = 1 << 8;
    /// Write data error.
    pub const WRITE_DATA: u32 = 1 << 9;
    /// Descriptor control error (e.g. an unknown opcode).
    pub const CONTROL: u32 = 1 << 10;
    /// Length error.
    pub const LENGTH: u32 = 1 << 11;
    /// Completion address error.
    pub const COMPLETION_ADDR: u32 = 1 << 12;

    /// Names of the bits set in `v`, for messages.
    pub fn describe(v: u32) -> String {
        const NAMES: [(u32, &str); 13] = [
            (SRC_ADDR, "source address"),
            (DEST_ADDR, "destination address"),
            (NEXT_DESC_ADDR, "next descriptor address"),
            (NEXT_DESC_ALIGN, "next descriptor alignment"),
            (CHAIN_ADDR_VALUE, "chain address value"),
            (CHANCMD, "channel command"),
            (CHIPSET_DATA_INTEGRITY, "chipset data integrity"),
            (DMA_DATA_INTEGRITY, "DMA data integrity"),
            (READ_DATA, "read data"),
            (WRITE_DATA, "write data"),
            (CONTROL, "descriptor control"),
            (LENGTH, "length"),
            (COMPLETION_ADDR, "completion address"),
        ];
        let mut names: Vec<String> = NAMES
            .iter()
            .filter(|(bit, _)| v & bit != 0)
            .map(|(_, n)| (*n).to_string())
            .collect();
        let known = NAMES.iter().fold(0, |m, (b, _)| m | b);
        if v & !known != 0 {
            names.push(format!("other bits {:#x}", v & !known));
        }
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    }
}

/// The completion word's alignment (SPDK's `IOAT_CHANCMP_ALIGN`).
pub const CHANCMP_ALIGN: usize = 8;

// ---------------------------------------------------------------------------
// PCI configuration space
// ---------------------------------------------------------------------------

// The header's registers (command, status, capability list) are every
// function's: `env::vfio` (`PCI_COMMAND`, ...).
/// The PCI Express capability's id.
pub const PCI_CAP_ID_EXP: u8 = 0x10;
/// Device Control, relative to the PCI Express capability (16 bits).
pub const PCI_EXP_DEVCTL: u64 = 0x08;
/// Device Control's "enable relaxed ordering" bit (Linux
/// `PCI_EXP_DEVCTL_RELAX_EN`), which the driver clears as Linux
/// `ioat3_dma_probe` does.
pub const PCI_EXP_DEVCTL_RELAX_EN: u16 = 1 << 4;
/// The internal channel error register (32 bits, write 1 to clear) of
/// functions older than 3.3, and of Skylake-SP's (Linux
/// `IOAT_PCI_CHANERR_INT_OFFSET`, SPDK `SPDK_IOAT_PCI_CHANERR_INT_OFFSET`).
pub const CHANERR_INT: u64 = 0x180;
/// The CBVER from which a function has no CHANERR_INT (3.3).
pub const CBVER_NO_CHANERR_INT: u8 = 0x33;
/// Skylake-SP's device id (Linux `PCI_DEVICE_ID_INTEL_IOAT_SKX`). Linux
/// `ioat_pci_probe` sets its version to 3.2 whatever CBVER reads
/// (`is_skx_ioat`), so `ioat_reset_hw`'s `version < IOAT_VER_3_3` branch
/// clears its CHANERR_INT; this driver does the same. (SPDK's
/// `ioat_reset_hw` goes by CBVER alone and skips CHANERR_INT on a function
/// that reads 3.3.)
pub const DEVICE_ID_SKX: u16 = 0x2021;

/// Whether a function with this CBVER and device id has CHANERR_INT, to be
/// cleared before each channel reset (SPDK `ioat_reset_hw`, Linux
/// `ioat_reset_hw` with `ioat_pci_probe`'s version for SKX).
pub const fn has_chanerr_int(cbver: u8, device_id: u16) -> bool {
    cbver < CBVER_NO_CHANERR_INT || device_id == DEVICE_ID_SKX
}

// ---------------------------------------------------------------------------
// Descriptors
// ---------------------------------------------------------------------------

/// Descriptor control bits (the `control` word).
pub mod control {
    /// Interrupt when done.
    pub const INT_ENABLE: u32 = 1 << 0;
    /// Do not snoop the source.
    pub const SRC_SNOOP_DISABLE: u32 = 1 << 1;
    /// Do not snoop the destination.
    pub const DEST_SNOOP_DISABLE: u32 = 1 << 2;
    /// Write the completion status after this descriptor.
    pub const COMPLETION_UPDATE: u32 = 1 << 3;
    /// Finish earlier descriptors before this one.
    pub const FENCE: u32 = 1 << 4;
    /// No data transfer.
    pub const NULL: u32 = 1 << 5;
    /// Where the opcode sits.
    pub const OP_SHIFT: u32 = 24;

    /// The opcode of a control word.
    pub const fn op(control: u32) -> u8 {
        (control >> OP_SHIFT) as u8
    }

    /// A control word with opcode `op` and `bits`.
    pub const fn with_op(op: u8, bits: u32) -> u32 {
        ((op as u32) << OP_SHIFT) | bits
    }
}

/// Opcodes.
pub mod op {
    /// Copy `size` bytes from source to destination.
    pub const COPY: u8 = 0x00;
    /// Fill `size` bytes at the destination with the 64-bit pattern.
    pub const FILL: u8 = 0x01;
    /// XOR (not used here).
    pub const XOR: u8 = 0x87;
    /// PQ (not used here).
    pub const PQ: u8 = 0x89;
}

/// Size of the null descriptor SPDK submits at bring-up.
pub const NULL_SIZE: u32 = 8;

/// One hardware descriptor: 64 bytes, 64-byte aligned, little endian.
///
/// Copy and fill share the layout: `src` is the source address of a copy
/// and the 64-bit pattern of a fill. Bytes 32-63 are op specific and zero
/// for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, align(64))]
pub struct Descriptor {
    /// Bytes to move.
    pub size: u32,
    /// Control bits and opcode ([`control`]).
    pub control: u32,
    /// Source address (copy) or fill pattern (fill).
    pub src: u64,
    /// Destination address.
    pub dst: u64,
    /// Address of the next descriptor in the chain.
    pub next: u64,
    /// Op specific; zero for copy and fill.
    pub op_specific: [u64; 4],
}

/// Bytes of a descriptor.
pub const DESC_SIZE: usize = 64;

const _: () = {
    assert!(std::mem::size_of::<Descriptor>() == DESC_SIZE);
    assert!(std::mem::align_of::<Descriptor>() == DESC_SIZE);
    assert!(std::mem::offset_of!(Descriptor, size) == 0);
    assert!(std::mem::offset_of!(Descriptor, control) == 4);
    assert!(std::mem::offset_of!(Descriptor, src) == 8);
    assert!(std::mem::offset_of!(Descriptor, dst) == 16);
    assert!(std::mem::offset_of!(Descriptor, next) == 24);
    assert!(std::mem::offset_of!(Descriptor, op_specific) == 32);
};

/// Byte offsets of the descriptor fields, for volatile access to a
/// descriptor in DMA memory.
pub mod desc {
    /// `size`.
    pub const SIZE: usize = 0;
    /// `control`.
    pub const CONTROL: usize = 4;
    /// `src` / pattern.
    pub const SRC: usize = 8;
    /// `dst`.
    pub const DST: usize = 16;
    /// `next`.
    pub const NEXT: usize = 24;
    /// First op-specific word.
    pub const OP_SPECIFIC: usize = 32;
}

/// The 64-bit fill pattern of a fill byte: the byte replicated (SPDK).
pub const fn fill_pattern(byte: u8) -> u64 {
    u64::from_ne_bytes([byte; 8])
}

/// The largest transfer of one descriptor for an XFERCAP value, or `None`
/// for an invalid one. 0 means 4 GiB; the descriptor's `size` is 32 bits,
/// so the driver caps that at 2 GiB.
pub fn max_transfer(xfercap: u8) -> Option<u64> {
    match xfercap & XFERCAP_MASK {
        0 => Some(1 << 31),
        x if x < XFERCAP_MIN => None,
        x => Some((1u64 << x).min(1 << 31)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_helpers() {
        assert!(is_supported(0x8086, 0x2021));
        assert!(is_supported(0x8086, 0x0b00));
        assert!(is_supported(0x8086, 0x3c2e));
        assert!(!is_supported(0x8086, 0x3c28));
        assert!(!is_supported(0x8087, 0x2021));
        assert_eq!(DEVICE_IDS.len(), 9 + 10 + 10 + 4 + 4 + 10 + 1 + 1);
        assert_eq!(channel_base(0), 0x80);
        assert_eq!(channel_base(0) + chan::CHANERR, 0xa8);
        assert_eq!(fill_pattern(0xa5), 0xa5a5_a5a5_a5a5_a5a5);
        assert_eq!(max_transfer(0), Some(1 << 31));
        assert_eq!(max_transfer(11), None);
        assert_eq!(max_transfer(12), Some(4096));
        assert_eq!(max_transfer(20 | 0xe0), Some(1 << 20));
        assert_eq!(
            control::op(control::with_op(op::FILL, control::NULL)),
            op::FILL
        );
        assert_eq!(chansts::addr(0x1234_5678_9abc_def1), 0x1234_5678_9abc_dec0);
        assert_eq!(chansts::state(0x1234_5678_9abc_def3), chansts::HALTED);
        assert_eq!(chanerr::describe(0), "none");
        assert_eq!(
            chanerr::describe(chanerr::SRC_ADDR | chanerr::CONTROL | 1 << 20),
            "source address, descriptor control, other bits 0x100000"
        );
    }
}
