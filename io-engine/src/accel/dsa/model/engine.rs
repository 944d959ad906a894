//! [`Engine`]: how the model DSA device executes a descriptor and writes
//! its completion record, against its address space (an [`IovaGuard`]
//! held from the descriptor's start to its record's status, so an unmap
//! waits for it).
//!
//! Thread: the device thread, or a test's thread stepping the device by
//! hand (one at a time: the engine is behind the device's lock).

use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

use super::config::IMPLEMENTED;
use super::counters::{Counters, Violation};
use super::shared::{Queued, Shared};
use crate::accel::dsa::spec::{self, Descriptor, comp, flags, opcode, pasid, status};
use crate::accel::software::kernels::crc32c_update;
use crate::env::dma::IovaGuard;

/// Bytes the engine moves or reads in one piece (bounds its scratch).
const PIECE: u64 = 64 << 10;

/// Flags every operation accepts (the ones the model ignores included).
const COMMON_FLAGS: u32 = flags::FENCE
    | flags::CRAV
    | flags::RCR
    | flags::RCI
    | flags::CRSTS
    | flags::CACHE_CONTROL
    | flags::ADDR1_TCS
    | flags::ADDR2_TCS
    | flags::ADDR3_TCS
    | flags::CR_TCS
    | flags::STRICT_ORDER
    | flags::DEST_READBACK
    | flags::DSTS;

/// What the record's other bytes hold before the real fields come
/// ([`Faults::slow_completion`](super::Faults::slow_completion)).
const GARBAGE: u8 = 0xdb;

/// How a descriptor ended: the completion record's fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Outcome {
    status: u8,
    result: u8,
    bytes: u32,
    fault_addr: u64,
    op: [u32; 4],
}

impl Outcome {
    fn status(status: u8) -> Outcome {
        Outcome {
            status,
            ..Outcome::default()
        }
    }

    fn code(&self) -> u8 {
        status::code(self.status)
    }
}

/// An address the device could not reach.
struct Fault {
    addr: u64,
    write: bool,
    /// Injected (a page the OS can bring in), else unmapped.
    injected: bool,
}

/// The device's execution unit; its scratch holds data read from memory.
pub(super) struct Engine {
    scratch: Vec<u8>,
    scratch2: Vec<u8>,
}

impl Engine {
    pub(super) fn new() -> Engine {
        Engine {
            scratch: Vec::new(),
            scratch2: Vec::new(),
        }
    }

    /// Executes `q` (taken from WQ `wq`) and writes its record; its WQ
    /// entry is freed just before the record's status.
    pub(super) fn run(&mut self, s: &Shared, wq: usize, q: Queued) {
        let g = s.map.read();
        if let Some(d) = s.faults.slow_delay() {
            std::thread::sleep(d);
        }
        Counters::bump(&s.counters.descriptors);
        let out = self.execute(s, &g, wq, &q.desc, false, q.list.as_deref());
        let entry = &s.wqs[wq].occupancy;
        complete(s, &g, wq, &q.desc, &out, || {
            // A batch's records not written (abandoned, or never reached)
            // go back with it.
            for addr in q.records() {
                s.release_record(addr);
            }
            entry.fetch_sub(1, Ordering::AcqRel);
        });
    }

    /// Checks and executes one descriptor (`in_batch`: one of a batch's).
    fn execute(
        &mut self,
        s: &Shared,
        g: &IovaGuard,
        wq: usize,
        d: &Descriptor,
        in_batch: bool,
        list: Option<&[Descriptor]>,
    ) -> Outcome {
        let info = &s.wqs[wq].info;
        let op = d.opcode();
        if !info.supports(op)
            || !IMPLEMENTED.contains(&op)
            || (in_batch && matches!(op, opcode::BATCH | opcode::DRAIN))
        {
            return Outcome::status(status::BAD_OPCODE);
        }
        let f = d.flags();
        let mut allowed = COMMON_FLAGS;
        // Block on Fault is reserved for a drain (idxd-config's tests).
        if info.block_on_fault && op != opcode::DRAIN {
            allowed |= flags::BOF;
        }
        if matches!(op, opcode::COMPARE | opcode::COMPVAL) {
            allowed |= flags::CHECK_RESULT;
        }
        if matches!(op, opcode::CRCGEN | opcode::COPY_CRC) {
            allowed |= flags::CRC_READ_SEED;
        }
        let mut bad = f & !allowed;
        if f & flags::RCR != 0 && f & flags::CRAV == 0 {
            // A record requested with no address to write it at.
            bad |= flags::RCR;
        }
        if bad != 0 {
            let mut o = Outcome::status(status::INVALID_FLAGS);
            o.op[0] = bad;
            return o;
        }
        if d.rsvd != 0 || d.pasid & pasid::RESERVED != 0 || !op_specific_clear(d) {
            return Outcome::status(status::NOZERO_RESERVE);
        }
        match op {
            opcode::NOOP | opcode::DRAIN => Outcome::status(status::SUCCESS),
            opcode::BATCH => self.batch(s, g, wq, d, list),
            _ => self.data(s, g, wq, d),
        }
    }

    /// A batch: its descriptors in order, each with its own record.
    fn batch(
        &mut self,
        s: &Shared,
        g: &IovaGuard,
        wq: usize,
        d: &Descriptor,
        list: Option<&[Descriptor]>,
    ) -> Outcome {
        Counters::bump(&s.counters.batches);
        let count = d.size;
        if count < 2 || count > s.wqs[wq].info.max_batch {
            return Outcome::status(status::DESC_CNT_ERANGE);
        }
        if !d.src.is_multiple_of(spec::DESC_LIST_ALIGN) {
            return Outcome::status(status::DESCLIST_ALIGN);
        }
        let mut failed = false;
        let mut done = 0u32;
        for i in 0..count {
            let addr = d.src + spec::DESC_SIZE as u64 * i as u64;
            let Some(p) = g.resolve(addr, spec::DESC_SIZE as u64) else {
                Counters::bump(&s.counters.page_faults);
                return Outcome {
                    status: status::BATCH_PAGE_FAULT,
                    bytes: done,
                    fault_addr: addr,
                    ..Outcome::default()
                };
            };
            // SAFETY: 64 bytes inside a window `g` holds, 64-byte aligned
            // (the list's alignment was checked; windows keep it).
            let inner = unsafe { read_descriptor(p) };
            if list
                .and_then(|l| l.get(i as usize))
                .is_some_and(|at_submit| *at_submit != inner)
            {
                s.violate(Violation::BatchListRewritten { wq, addr });
            }
            if failed && inner.flags() & flags::FENCE != 0 {
                // Abandoned, with every one after it.
                break;
            }
            check_stale(s, g, wq, &inner);
            Counters::bump(&s.counters.descriptors);
            let out = self.execute(s, g, wq, &inner, true, None);
            let owned = inner.flags() & (flags::CRAV | flags::RCR) == flags::CRAV | flags::RCR;
            complete(s, g, wq, &inner, &out, || {
                if owned {
                    s.release_record(inner.completion);
                }
            });
            failed |= out.code() != status::SUCCESS;
            done += 1;
        }
        Outcome {
            status: if failed {
                status::BATCH_FAIL
            } else {
                status::SUCCESS
            },
            bytes: done,
            ..Outcome::default()
        }
    }

    /// A data operation: memory move, fill, compare, compare pattern,
    /// dualcast, CRC, copy with CRC.
    fn data(&mut self, s: &Shared, g: &IovaGuard, wq: usize, d: &Descriptor) -> Outcome {
        let info = &s.wqs[wq].info;
        let op = d.opcode();
        let len = d.size as u64;
        if len == 0 || len > info.max_transfer {
            return Outcome::status(status::XFER_ERANGE);
        }
        let overlap = |a: u64, b: u64| a < b.saturating_add(len) && b < a.saturating_add(len);
        let mut st = [(0u64, false); 3];
        let k = match op {
            opcode::MEMMOVE | opcode::COPY_CRC => {
                st[0] = (d.src, false);
                st[1] = (d.dst, true);
                2
            }
            opcode::MEMFILL => {
                st[0] = (d.dst, true);
                1
            }
            opcode::COMPARE => {
                st[0] = (d.src, false);
                st[1] = (d.dst, false);
                2
            }
            opcode::COMPVAL | opcode::CRCGEN => {
                st[0] = (d.src, false);
                1
            }
            _ => {
                // Dualcast.
                st[0] = (d.src, false);
                st[1] = (d.dst, true);
                st[2] = (d.dest2(), true);
                3
            }
        };
        if matches!(op, opcode::MEMMOVE | opcode::COPY_CRC) && overlap(d.src, d.dst) {
            return Outcome::status(status::OVERLAP_BUFFERS);
        }
        if op == opcode::DUALCAST {
            if d.dst & 0xfff != d.dest2() & 0xfff {
                return Outcome::status(status::DCAST_ERR);
            }
            if overlap(d.src, d.dst) || overlap(d.src, d.dest2()) || overlap(d.dst, d.dest2()) {
                return Outcome::status(status::OVERLAP_BUFFERS);
            }
        }
        let bof = d.flags() & flags::BOF != 0;
        let mut crc = d.crc_seed();
        if matches!(op, opcode::CRCGEN | opcode::COPY_CRC) && d.flags() & flags::CRC_READ_SEED != 0
        {
            let at = d.crc_seed_addr();
            if !at.is_multiple_of(4) {
                return Outcome::status(status::ADDR_ALIGN);
            }
            let Some(p) = g.resolve(at, 4) else {
                let fault = Fault {
                    addr: at,
                    write: false,
                    injected: false,
                };
                return page_fault(s, &fault, bof, 0, None);
            };
            // SAFETY: 4 bytes inside a window `g` holds, 4-byte aligned;
            // the driver wrote the seed (or the device a record) before
            // this descriptor was submitted.
            crc = unsafe { AtomicU32::from_ptr(p.cast::<u32>()) }.load(Ordering::Acquire);
        }
        let crc_op = matches!(op, opcode::CRCGEN | opcode::COPY_CRC);
        // The injected fault, as (offset, stream): the first stream on the
        // asked side, else the first.
        let mut inject = s.faults.start_data().and_then(|(after, write)| {
            let i = st[..k].iter().position(|&(_, w)| w == write).unwrap_or(0);
            (after < len).then_some((after, i))
        });
        let mut done = 0u64;
        let mut result = 0u8;
        let mut first_difference = 0u64;
        while done < len {
            let mut n = (len - done).min(PIECE);
            if let Some((at, i)) = inject {
                if at == done {
                    let fault = Fault {
                        addr: st[i].0 + at,
                        write: st[i].1,
                        injected: true,
                    };
                    if bof {
                        // The OS brings the page in; the device goes on.
                        Counters::bump(&s.counters.faults_resolved);
                        inject = None;
                    } else {
                        return page_fault(s, &fault, bof, done, crc_op.then_some(crc));
                    }
                } else {
                    n = n.min(at - done);
                }
            }
            let mut ptrs = [std::ptr::null_mut::<u8>(); 3];
            for i in 0..k {
                let (iova, write) = st[i];
                match contiguous(g, iova + done, n) {
                    Some((p, m)) => {
                        ptrs[i] = p;
                        n = n.min(m);
                    }
                    None => {
                        let fault = Fault {
                            addr: iova + done,
                            write,
                            injected: false,
                        };
                        return page_fault(s, &fault, bof, done, crc_op.then_some(crc));
                    }
                }
            }
            let m = n as usize;
            // Every pointer is the start of `n` bytes inside a window `g`
            // holds (`contiguous`), so mapped and not unmapped before this
            // returns; the submitter keeps the buffers valid and untouched
            // while the descriptor is in flight (the seam's contract); the
            // destinations do not overlap the sources (checked above); the
            // scratch buffers are the engine's own. Each SAFETY below
            // relies on this.
            match op {
                opcode::MEMMOVE => {
                    // SAFETY: as above.
                    unsafe { std::ptr::copy_nonoverlapping(ptrs[0], ptrs[1], m) }
                }
                opcode::MEMFILL => {
                    // SAFETY: as above.
                    unsafe { fill(ptrs[0], m, d.src, done as usize) }
                }
                opcode::DUALCAST => {
                    // SAFETY: as above.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptrs[0], ptrs[1], m);
                        std::ptr::copy_nonoverlapping(ptrs[0], ptrs[2], m);
                    }
                }
                opcode::COMPARE => {
                    // SAFETY: as above.
                    let a = unsafe { read_into(&mut self.scratch, ptrs[0], m) };
                    // SAFETY: as above.
                    let b = unsafe { read_into(&mut self.scratch2, ptrs[1], m) };
                    if let Some(i) = a.iter().zip(b.iter()).position(|(x, y)| x != y) {
                        result = 1;
                        first_difference = done + i as u64;
                        break;
                    }
                }
                opcode::COMPVAL => {
                    // SAFETY: as above.
                    let a = unsafe { read_into(&mut self.scratch, ptrs[0], m) };
                    let pattern = d.dst.to_le_bytes();
                    let at = done as usize;
                    if let Some(i) = a
                        .iter()
                        .enumerate()
                        .position(|(i, x)| *x != pattern[(at + i) % 8])
                    {
                        result = 1;
                        first_difference = done + i as u64;
                        break;
                    }
                }
                opcode::CRCGEN => {
                    // SAFETY: as above.
                    let a = unsafe { read_into(&mut self.scratch, ptrs[0], m) };
                    crc = crc32c_update(crc, a);
                }
                _ => {
                    // Copy with CRC: what is read is what is written and
                    // checked.
                    // SAFETY: as above.
                    let a = unsafe { read_into(&mut self.scratch, ptrs[0], m) };
                    // SAFETY: as above (the scratch is not device memory).
                    unsafe { std::ptr::copy_nonoverlapping(a.as_ptr(), ptrs[1], m) };
                    crc = crc32c_update(crc, a);
                }
            }
            done += n;
        }
        let mut out = Outcome::status(status::SUCCESS);
        if matches!(op, opcode::COMPARE | opcode::COMPVAL) {
            out.result = result;
            if result != 0 {
                out.bytes = first_difference as u32;
            }
            if d.flags() & flags::CHECK_RESULT != 0 && result != d.expected_result() {
                out.status = status::SUCCESS_PRED;
            }
        }
        if crc_op {
            out.op[0] = crc;
        }
        out
    }
}

/// The partial completion of a page fault after `done` bytes (the CRC so
/// far for a CRC operation).
fn page_fault(s: &Shared, f: &Fault, bof: bool, done: u64, crc: Option<u32>) -> Outcome {
    Counters::bump(&s.counters.page_faults);
    // With Block on Fault the device asked the OS, which could not resolve
    // an unmapped address.
    let code = if bof && !f.injected {
        status::PAGE_FAULT_IR
    } else {
        status::PAGE_FAULT_NOBOF
    };
    Outcome {
        status: code | if f.write { status::WRITE } else { 0 },
        bytes: done as u32,
        fault_addr: f.addr,
        op: [crc.unwrap_or(0), 0, 0, 0],
        ..Outcome::default()
    }
}

/// Whether the operation-specific bytes the operation does not use are
/// zero.
fn op_specific_clear(d: &Descriptor) -> bool {
    let [w0, w1, w2] = d.op_specific;
    match d.opcode() {
        opcode::DUALCAST => w1 == 0 && w2 == 0,
        opcode::CRCGEN | opcode::COPY_CRC => {
            w0 >> 32 == 0 && (d.flags() & flags::CRC_READ_SEED != 0 || w1 == 0) && w2 == 0
        }
        opcode::COMPARE | opcode::COMPVAL if d.flags() & flags::CHECK_RESULT != 0 => {
            w0 >> 8 == 0 && w1 == 0 && w2 == 0
        }
        _ => w0 == 0 && w1 == 0 && w2 == 0,
    }
}

/// The bytes from `iova` that lie in one window, at most `want`, with
/// their address; `None` when `iova` is not mapped.
fn contiguous(g: &IovaGuard, iova: u64, want: u64) -> Option<(*mut u8, u64)> {
    if let Some(p) = g.resolve(iova, want) {
        return Some((p, want));
    }
    let p = g.resolve(iova, 1)?;
    // The window ends inside: the longest prefix that resolves.
    let (mut lo, mut hi) = (1u64, want);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if g.resolve(iova, mid).is_some() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some((p, lo))
}

/// Copies `n` bytes at `from` into `scratch` and returns them.
///
/// # Safety
///
/// `from..from + n` is readable memory inside a window held by the
/// caller's guard.
unsafe fn read_into(scratch: &mut Vec<u8>, from: *const u8, n: usize) -> &[u8] {
    scratch.clear();
    scratch.reserve(n);
    // SAFETY: `from` is readable for `n` bytes (the caller's contract);
    // `scratch` has room for `n` and is not aliased by device memory.
    unsafe {
        std::ptr::copy_nonoverlapping(from, scratch.as_mut_ptr(), n);
        scratch.set_len(n);
    }
    scratch
}

/// Writes `n` bytes of the 8-byte `pattern` at `to`, starting at pattern
/// byte `phase % 8`.
///
/// # Safety
///
/// `to..to + n` is writable memory inside a window held by the caller's
/// guard.
unsafe fn fill(to: *mut u8, n: usize, pattern: u64, phase: usize) {
    let p = pattern.to_le_bytes();
    if p.iter().all(|&b| b == p[0]) {
        // SAFETY: `n` writable bytes (the caller's contract).
        unsafe { std::ptr::write_bytes(to, p[0], n) };
        return;
    }
    for i in 0..n {
        // SAFETY: `i < n`, inside the writable range.
        unsafe { to.add(i).write(p[(phase + i) % 8]) };
    }
}

/// The descriptor at `p`, read with atomic loads.
///
/// # Safety
///
/// `p` is 64 readable, 8-byte aligned bytes inside a window held by the
/// caller's guard.
unsafe fn read_descriptor(p: *mut u8) -> Descriptor {
    let mut b = [0u8; spec::DESC_SIZE];
    for (i, chunk) in b.chunks_exact_mut(8).enumerate() {
        // SAFETY: word `i` of the 64 bytes, 8-byte aligned (the caller's
        // contract); read atomically, as everything the driver shares.
        let w = unsafe { AtomicU64::from_ptr(p.add(8 * i).cast::<u64>()) }.load(Ordering::Acquire);
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    Descriptor::from_bytes(&b)
}

/// A batch's list as it is at submission, when it is readable and its
/// count and alignment valid (else the execution reports the error).
pub(super) fn read_list(g: &IovaGuard, d: &Descriptor, max_batch: u32) -> Option<Vec<Descriptor>> {
    if d.size < 2 || d.size > max_batch || !d.src.is_multiple_of(spec::DESC_LIST_ALIGN) {
        return None;
    }
    let p = g.resolve(d.src, d.size as u64 * spec::DESC_SIZE as u64)?;
    Some(
        (0..d.size as usize)
            // SAFETY: descriptor `i` of the list, inside the window `g`
            // holds, 64-byte aligned.
            .map(|i| unsafe { read_descriptor(p.add(i * spec::DESC_SIZE)) })
            .collect(),
    )
}

/// Records a [`Violation::StaleRecord`] when `d`'s completion record's
/// status is not 0.
pub(super) fn check_stale(s: &Shared, g: &IovaGuard, wq: usize, d: &Descriptor) {
    if d.flags() & flags::CRAV == 0 || !d.completion.is_multiple_of(spec::COMPLETION_ALIGN) {
        return;
    }
    if let Some(p) = g.resolve(d.completion, 1) {
        // SAFETY: one byte inside a window `g` holds; the status byte is
        // only ever accessed atomically.
        let st = unsafe { AtomicU8::from_ptr(p) }.load(Ordering::Acquire);
        if st != 0 {
            s.violate(Violation::StaleRecord {
                wq,
                addr: d.completion,
                status: st,
            });
        }
    }
}

/// Writes `d`'s completion record for `out` when one is due (an address
/// given, and success recorded or a failure); `before_status` runs just
/// before the status byte is written (or when no record is). A record
/// that cannot be written, or a failure with nowhere to record it, is a
/// software error.
fn complete(
    s: &Shared,
    g: &IovaGuard,
    wq: usize,
    d: &Descriptor,
    out: &Outcome,
    before_status: impl FnOnce(),
) {
    let f = d.flags();
    let failed = out.code() != status::SUCCESS;
    if f & flags::CRAV == 0 {
        if failed {
            s.software_error(wq, d.opcode(), out.code(), d.completion);
        }
        before_status();
        return;
    }
    if f & flags::RCR == 0 && !failed {
        before_status();
        return;
    }
    if !d.completion.is_multiple_of(spec::COMPLETION_ALIGN) {
        s.software_error(wq, d.opcode(), status::CRA_ALIGN, d.completion);
        before_status();
        return;
    }
    let Some(p) = g.resolve(d.completion, spec::COMPLETION_SIZE as u64) else {
        s.software_error(wq, d.opcode(), status::CRA_XLAT, d.completion);
        before_status();
        return;
    };
    match s.faults.slow_completion_delay() {
        Some(delay) => {
            let garbage = Outcome {
                status: 0,
                result: GARBAGE,
                bytes: u32::from_ne_bytes([GARBAGE; 4]),
                fault_addr: u64::from_ne_bytes([GARBAGE; 8]),
                op: [u32::from_ne_bytes([GARBAGE; 4]); 4],
            };
            // SAFETY: `p` is the record's 32 bytes inside a window `g`
            // holds, 32-byte aligned (checked, and windows keep it).
            unsafe { write_fields(p, &garbage) };
            std::thread::sleep(delay);
            // SAFETY: as above.
            unsafe { write_fields(p, out) };
            std::thread::sleep(delay);
        }
        // SAFETY: as above.
        None => unsafe { write_fields(p, out) },
    }
    before_status();
    // SAFETY: the record's first byte, inside the window `g` holds; the
    // status is written last, with release ordering, so a reader that
    // acquires a non-zero status sees every field and the data.
    unsafe { AtomicU8::from_ptr(p) }.store(out.status, Ordering::Release);
    Counters::bump(&s.counters.completions);
}

/// Writes every field of the record at `p` but its status.
///
/// # Safety
///
/// `p` is 32 writable, 32-byte aligned bytes inside a window held by the
/// caller's guard, accessed by the driver only atomically.
unsafe fn write_fields(p: *mut u8, out: &Outcome) {
    // SAFETY: every access below is inside the 32 bytes, at its natural
    // alignment (the record is 32-byte aligned), and atomic.
    unsafe {
        AtomicU8::from_ptr(p.add(comp::RESULT)).store(out.result, Ordering::Relaxed);
        AtomicU8::from_ptr(p.add(comp::FAULT_INFO)).store(0, Ordering::Relaxed);
        AtomicU8::from_ptr(p.add(3)).store(0, Ordering::Relaxed);
        AtomicU32::from_ptr(p.add(comp::BYTES_COMPLETED).cast::<u32>())
            .store(out.bytes, Ordering::Relaxed);
        AtomicU64::from_ptr(p.add(comp::FAULT_ADDR).cast::<u64>())
            .store(out.fault_addr, Ordering::Relaxed);
        for (i, w) in out.op.iter().enumerate() {
            AtomicU32::from_ptr(p.add(comp::OP_SPECIFIC + 4 * i).cast::<u32>())
                .store(*w, Ordering::Relaxed);
        }
    }
}
