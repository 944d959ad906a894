//! The seam the DSA driver sees a work queue (WQ) through: [`WorkQueue`],
//! what it is ([`WqInfo`]), how descriptors reach it (`submit`, which a
//! shared WQ may refuse with [`Retry`]) and how addresses in descriptors
//! are formed (its [`DmaMemory`]); and the real submission path
//! ([`Portal`]: MOVDIR64B or ENQCMD on a mapped portal page, x86_64 only,
//! with the CPUID checks [`has_movdir64b`] and [`has_enqcmd`]).
//!
//! Three implementations sit behind the seam: the idxd backend (a
//! `/dev/dsa/wqX.Y` WQ configured by `accel-config`, its portal mapped
//! from the character device; with SVA the device uses the process's
//! virtual addresses, so its `DmaMemory` translates every address to
//! itself), the VFIO backend (the function's BAR2 mapped; addresses are
//! the IOVAs of the windows mapped in the IOMMU,
//! [`MappedMemory`](crate::env::dma::MappedMemory) over an
//! [`IovaMap`](crate::env::dma::IovaMap)), and the device model
//! (`dsa-model` feature; the same `MappedMemory` over its own map).
//!
//! Thread: a dedicated WQ is submitted to by one reactor (the one whose
//! channel owns it); a shared WQ by any number of threads at once (ENQCMD
//! arbitrates). Implementations are therefore `Send + Sync`.

use super::spec::{self, Descriptor, opcode};
use crate::env::dma::DmaMemory;

/// How a WQ takes descriptors (DSA spec, "Work Queues": dedicated and
/// shared WQs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WqMode {
    /// One submitter, MOVDIR64B: a posted write the device cannot refuse.
    /// A descriptor written while the WQ is full is dropped (and reported
    /// in SWERR), so the submitter counts its entries in flight and never
    /// exceeds [`WqInfo::size`].
    Dedicated,
    /// Any number of submitters, ENQCMD: a non-posted write the device
    /// answers; when the WQ is full it refuses ([`Retry`]).
    Shared,
}

/// What a WQ is: fixed while it is enabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WqInfo {
    /// A name for messages (`wq0.1`, `model-2/wq0`).
    pub name: String,
    /// Dedicated or shared.
    pub mode: WqMode,
    /// Entries (WQCFG WQ size): descriptors (a batch counts one) that may
    /// be in the WQ and not yet completed.
    pub size: u32,
    /// The largest transfer of one descriptor, in bytes (WQCFG's maximum
    /// transfer size, at most GENCAP's).
    pub max_transfer: u64,
    /// The largest batch, in descriptors (WQCFG's maximum batch size); a
    /// batch has at least 2.
    pub max_batch: u32,
    /// The operations the device supports (OPCAP: bit `n` for opcode `n`).
    pub opcap: [u64; 4],
    /// Whether descriptors may set Block on Fault (WQCFG's BOF enable).
    pub block_on_fault: bool,
}

impl WqInfo {
    /// Whether the device supports `op` ([`spec::opcode`]).
    pub fn supports(&self, op: u8) -> bool {
        spec::opcap_has(&self.opcap, op)
    }

    /// Whether batches may be submitted (the device has the batch opcode
    /// and the WQ takes at least 2 descriptors a batch).
    pub fn batches(&self) -> bool {
        self.supports(opcode::BATCH) && self.max_batch >= 2
    }
}

/// A shared WQ did not accept the descriptor (ENQCMD's ZF: the WQ was
/// full, or the device is not accepting): nothing was submitted; submit it
/// again later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry;

/// A DSA work queue as the driver sees it.
///
/// # Safety
///
/// Implementors guarantee that:
///
/// - [`WorkQueue::submit`] hands the device the 64 bytes of the
///   descriptor as one unit (a 64-byte atomic write: MOVDIR64B or ENQCMD,
///   never a sequence of smaller stores), after every store the calling
///   thread made before the call (the descriptors of a batch list, a
///   zeroed completion record) is visible to the device; and that `Ok`
///   means the device took the descriptor (it will write its completion
///   record if asked, unless it reports a software error) and
///   `Err(Retry)` that it did not and never will;
/// - [`WorkQueue::memory`] tells the truth: an address it gives for a
///   buffer is where the device reaches exactly that buffer, and memory
///   it allocates is reachable by the device, for as long as the memory
///   lives (the driver writes those addresses into descriptors and the
///   device writes through them);
/// - [`WorkQueue::info`] describes the WQ: a driver that keeps within its
///   size, transfer and batch limits is never refused by the device for
///   exceeding them.
pub unsafe trait WorkQueue: Send + Sync {
    /// What the WQ is.
    fn info(&self) -> &WqInfo;

    /// How the device reaches memory: allocations it may access
    /// (descriptor lists, completion records) and the address to put in
    /// a descriptor for any buffer (IOVA through the IOMMU or the model's
    /// map, or the virtual address itself with SVA).
    fn memory(&self) -> &dyn DmaMemory;

    /// Submits one descriptor (a batch descriptor submits its whole list).
    /// A dedicated WQ always returns `Ok` (a posted write: exceeding the
    /// WQ's size drops the descriptor, which the caller must not do); a
    /// shared WQ returns `Err(Retry)` when it did not accept.
    ///
    /// # Safety
    ///
    /// Every address in `desc` (and, for a batch, in its list and each of
    /// its descriptors) was formed through [`WorkQueue::memory`], names
    /// memory that stays valid until the descriptor's completion record
    /// says it is done (or, without a record, until the caller knows the
    /// device finished), and is not read or written by the CPU meanwhile,
    /// except the completion record's status, read atomically. A batch's
    /// list is not changed until the batch completes.
    unsafe fn submit(&self, desc: &Descriptor) -> Result<(), Retry>;

    /// An error the device reported outside completion records since the
    /// last call (SWERR: a completion record it could not write, a
    /// descriptor it dropped; a halted device or disabled WQ), for the
    /// driver to name when a completion does not come. `None` when the
    /// backend has nothing to say.
    fn device_error(&self) -> Option<String> {
        None
    }
}

/// Whether the CPU has MOVDIR64B (CPUID.(EAX=7,ECX=0):ECX bit 28).
pub fn has_movdir64b() -> bool {
    cpuid7_ecx() & (1 << 28) != 0
}

/// Whether the CPU has ENQCMD (CPUID.(EAX=7,ECX=0):ECX bit 29). The
/// instruction also needs the process's PASID in IA32_PASID, which Linux
/// loads once the process has bound its address space to a device (the
/// idxd character device does on open, with SVA).
pub fn has_enqcmd() -> bool {
    cpuid7_ecx() & (1 << 29) != 0
}

#[cfg(target_arch = "x86_64")]
fn cpuid7_ecx() -> u32 {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    if __cpuid(0).eax < 7 {
        return 0;
    }
    __cpuid_count(7, 0).ecx
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid7_ecx() -> u32 {
    0
}

/// MOVDIR64B: writes the 64 bytes at `src` to `dst` as one 64-byte
/// direct store (a posted write).
///
/// # Safety
///
/// The CPU has MOVDIR64B ([`has_movdir64b`]); `dst` is 64-byte aligned and
/// writable for 64 bytes (a mapped WQ portal); `src` is readable for 64
/// bytes.
#[cfg(target_arch = "x86_64")]
#[inline]
pub unsafe fn movdir64b(dst: *mut u8, src: *const Descriptor) {
    // SAFETY: the caller's contract: the instruction exists, `dst` is an
    // aligned writable 64-byte destination and `src` readable. The asm
    // touches no stack and no flags; it may read and write memory (no
    // `nomem`), so the compiler keeps earlier stores before it.
    unsafe {
        core::arch::asm!(
            "movdir64b {dst}, zmmword ptr [{src}]",
            dst = in(reg) dst,
            src = in(reg) src,
            options(nostack, preserves_flags),
        );
    }
}

/// ENQCMD: offers the 64 bytes at `src` to the shared WQ portal `dst` as
/// one non-posted write, the PASID dword replaced by IA32_PASID. Returns
/// whether the device accepted (ZF clear); `false` is "retry".
///
/// # Safety
///
/// The CPU has ENQCMD ([`has_enqcmd`]) and IA32_PASID is loaded (else the
/// kernel must fix the #GP up, as Linux does for a process with a PASID);
/// `dst` is 64-byte aligned and writable for 64 bytes (a mapped shared WQ
/// portal); `src` is readable for 64 bytes.
#[cfg(target_arch = "x86_64")]
#[inline]
pub unsafe fn enqcmd(dst: *mut u8, src: *const Descriptor) -> bool {
    let retry: u8;
    // SAFETY: the caller's contract: the instruction exists, `dst` is an
    // aligned writable 64-byte portal and `src` readable; ZF is read into
    // `retry` right after.
    unsafe {
        core::arch::asm!(
            "enqcmd {dst}, zmmword ptr [{src}]",
            "setz {retry}",
            dst = in(reg) dst,
            src = in(reg) src,
            retry = out(reg_byte) retry,
            options(nostack),
        );
    }
    retry == 0
}

/// A mapped WQ portal and the instruction that submits to it: what the
/// idxd and VFIO backends hold to implement [`WorkQueue::submit`].
#[derive(Debug)]
pub struct Portal {
    addr: *mut u8,
    mode: WqMode,
}

// SAFETY: a portal is device memory that takes each 64-byte write as a
// unit; writes from several threads are what a shared WQ is for, and a
// dedicated WQ's single-submitter rule is the driver's (its channel is
// used by one reactor).
unsafe impl Send for Portal {}
// SAFETY: as for `Send`: `submit` takes `&self` and each write is atomic.
unsafe impl Sync for Portal {}

impl Portal {
    /// The portal page at `addr` of a WQ in `mode`; fails when the CPU
    /// lacks the instruction the mode needs or `addr` is not 64-byte
    /// aligned.
    ///
    /// # Safety
    ///
    /// `addr` is a mapping of a WQ's portal (4 KiB, uncached or
    /// write-combining, as the kernel maps BAR2 and the idxd character
    /// device) that stays mapped while the `Portal` lives, and `mode` is
    /// the WQ's.
    pub unsafe fn new(addr: *mut u8, mode: WqMode) -> Result<Portal, String> {
        if !(addr as usize).is_multiple_of(spec::DESC_SIZE) {
            return Err(format!("the portal at {addr:p} is not 64-byte aligned"));
        }
        let (ok, insn) = match mode {
            WqMode::Dedicated => (has_movdir64b(), "MOVDIR64B"),
            WqMode::Shared => (has_enqcmd(), "ENQCMD"),
        };
        if !ok || !cfg!(target_arch = "x86_64") {
            return Err(format!(
                "this CPU has no {insn}, which a {} DSA work queue needs",
                match mode {
                    WqMode::Dedicated => "dedicated",
                    WqMode::Shared => "shared",
                }
            ));
        }
        Ok(Portal { addr, mode })
    }

    /// The WQ's mode.
    pub fn mode(&self) -> WqMode {
        self.mode
    }

    /// Submits `desc`: a store fence (the descriptor list and the zeroed
    /// completion record reach memory first, as Linux's `wmb()` and SPDK's
    /// `_mm_sfence()` before the write), then MOVDIR64B (dedicated, always
    /// `Ok`) or ENQCMD (shared, `Err(Retry)` when refused).
    ///
    /// # Safety
    ///
    /// [`WorkQueue::submit`]'s contract for `desc`.
    #[inline]
    pub unsafe fn submit(&self, desc: &Descriptor) -> Result<(), Retry> {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: SFENCE (SSE, part of x86_64's baseline) touches no
            // memory; it orders the stores before it.
            unsafe { std::arch::x86_64::_mm_sfence() };
            match self.mode {
                WqMode::Dedicated => {
                    // SAFETY: `new` checked the instruction and alignment;
                    // the mapping lives while `self` does (`new`'s
                    // contract); `desc` is 64 readable bytes.
                    unsafe { movdir64b(self.addr, desc) };
                    Ok(())
                }
                WqMode::Shared => {
                    // SAFETY: as above, for ENQCMD.
                    if unsafe { enqcmd(self.addr, desc) } {
                        Ok(())
                    } else {
                        Err(Retry)
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // `new` refuses every portal off x86_64.
            let _ = desc;
            unreachable!("a DSA portal exists only on x86_64")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_and_cpuid() {
        let info = WqInfo {
            name: "wq0.0".into(),
            mode: WqMode::Shared,
            size: 128,
            max_transfer: 1 << 21,
            max_batch: 1,
            opcap: spec::opcap_of(&[opcode::MEMMOVE, opcode::BATCH]),
            block_on_fault: false,
        };
        assert!(info.supports(opcode::MEMMOVE));
        assert!(!info.supports(opcode::CRCGEN));
        assert!(!info.batches(), "a maximum batch of 1 allows no batch");
        // The answers are the CPU's; they must be stable and ENQCMD-capable
        // CPUs (Sapphire Rapids on) have MOVDIR64B too.
        assert_eq!(has_movdir64b(), has_movdir64b());
        if has_enqcmd() {
            assert!(has_movdir64b());
        }
        let mut page = vec![0u8; 128];
        let misaligned = page
            .as_mut_ptr()
            .wrapping_add(1 + (64 - page.as_ptr() as usize % 64) % 64);
        // SAFETY: refused before any use (misaligned).
        let r = unsafe { Portal::new(misaligned, WqMode::Dedicated) };
        assert!(r.unwrap_err().contains("64-byte aligned"));
    }

    /// MOVDIR64B into ordinary memory (allowed for any memory type): the
    /// asm's operands are the right way round and all 64 bytes land. Runs
    /// where the CPU has the instruction (Tremont, Tiger Lake, Sapphire
    /// Rapids and later); elsewhere `Portal::new` must refuse.
    #[test]
    fn movdir64b_writes_the_descriptor() {
        #[repr(C, align(64))]
        struct Line([u8; 64]);
        let mut line = Line([0; 64]);
        let d = Descriptor::memmove(0x1111, 0x2222, 512).with_completion(0x3340);
        // SAFETY: `line` is a 64-byte aligned, writable stack line that
        // stays alive across the submission; no device is involved.
        let portal = unsafe { Portal::new(line.0.as_mut_ptr(), WqMode::Dedicated) };
        if !has_movdir64b() {
            assert!(portal.unwrap_err().contains("MOVDIR64B"));
            return;
        }
        let portal = portal.unwrap();
        // SAFETY: as above; the "portal" is ordinary memory.
        assert_eq!(unsafe { portal.submit(&d) }, Ok(()));
        // SAFETY: the direct store completed before `submit` returned on
        // this thread (a store the same thread reads back).
        let written = unsafe { std::ptr::read_volatile(&line.0) };
        assert_eq!(written, d.to_bytes());
    }
}
