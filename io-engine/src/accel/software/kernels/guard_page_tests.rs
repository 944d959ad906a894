//! Guard-page tests of every kernel that reads or writes caller memory
//! (copy, copy_ahead, dualcast, fill, compare, crc32c, copy_crc32c): a read
//! one byte outside a source faults, a write one byte outside a destination
//! is seen.
//!
//! - Sources sit in a mapping whose readable part has a no-access
//!   (`PROT_NONE`) region on either side: either the last byte of the
//!   source is the last readable byte (a read past the end faults, and the
//!   test binary dies of SIGSEGV) or its first byte is the first readable
//!   one (a read before the start faults).
//! - Destinations sit between canary bytes (more than a vector on each
//!   side), checked after every call, and the bytes written are checked
//!   against a plain reference (`==` with the source, the fill byte, a
//!   bitwise CRC-32C).
//! - Every length 0 to 1100 (every small-size branch, every straight-line
//!   size of both vector widths, and the 4-vector loops with their tails).
//! - Misalignment: the destination's start at every offset 0..63 past a
//!   64-byte boundary, at every length (dualcast's second destination at
//!   the same offset, which is the streamed path, and at another). A
//!   source that ends at the guard page starts at `-len mod 64`, so its
//!   start takes each of the 64 misalignments at 17 or 18 lengths, and with
//!   the destination's 64 at each, every pair of source and destination
//!   misalignments is run (a documented sampling of the full product, which
//!   would take minutes: 1101 lengths x 64 x 64 per kernel and ISA); a
//!   source that starts at the guard page is 64-aligned. Compare's second
//!   operand takes every misalignment 0..63 against a first that ends at
//!   the guard page.
//! - Every ISA this CPU runs, each forced ([`Kernels::with_isa`]: scalar,
//!   AVX2, AVX-512; a missing one is reported and skipped), each with and
//!   without non-temporal stores forced (copy, dualcast, fill,
//!   copy_crc32c), and the prefetching copy told to prefetch the no-access
//!   page (prefetches never fault).
//!
//! Miri cannot run the SIMD paths or `mmap`: these tests are for the CPU.

use super::tests::crc_ref;
use super::*;
use crate::env::xorshift::XorShift;
use rustix::mm::{MapFlags, MprotectFlags, ProtFlags, mmap_anonymous, mprotect, munmap};

/// Longest length tested.
const MAX_LEN: usize = 1100;

/// Canary bytes on each side of a destination (more than any vector).
const CANARY: usize = 128;

/// The canary byte of copies: no source byte has this value.
const COPY_CANARY: u8 = 0xa5;

/// Size of each part of a [`GuardedSource`] mapping: a multiple of every
/// page size Linux uses (4, 16 and 64 KiB), so the parts can be protected
/// apart without asking the page size.
const PART: usize = 64 * 1024;

/// `[no access][PART readable bytes][no access]`, the readable part filled
/// with reproducible bytes, none equal to [`COPY_CANARY`].
struct GuardedSource {
    base: *mut u8,
}

impl GuardedSource {
    fn new(seed: u64) -> GuardedSource {
        // SAFETY: a new private anonymous mapping at an address the kernel
        // picks, so it overlaps no memory in use.
        let base = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                3 * PART,
                ProtFlags::empty(),
                MapFlags::PRIVATE,
            )
        }
        .expect("mmap of the guarded source")
        .cast::<u8>();
        // SAFETY: the middle part lies inside the mapping just made, its
        // start page-aligned (PART is a multiple of the page size), and no
        // reference to it exists.
        unsafe {
            mprotect(
                base.add(PART).cast(),
                PART,
                MprotectFlags::READ | MprotectFlags::WRITE,
            )
        }
        .expect("mprotect of the guarded source's middle part");
        let mut rng = XorShift::new(seed);
        // SAFETY: the middle part is readable and writable (above), and
        // this is the only access to it now.
        let data = unsafe { std::slice::from_raw_parts_mut(base.add(PART), PART) };
        for b in data {
            *b = match rng.next_u64() as u8 {
                COPY_CANARY => !COPY_CANARY,
                v => v,
            };
        }
        GuardedSource { base }
    }

    /// `len` bytes whose last is the last readable byte.
    fn ending(&self, len: usize) -> *mut u8 {
        self.base.wrapping_add(2 * PART - len)
    }

    /// The first readable byte.
    fn starting(&self) -> *mut u8 {
        self.base.wrapping_add(PART)
    }

    /// The first byte of the no-access part after the readable one.
    fn no_access(&self) -> *const u8 {
        self.base.wrapping_add(2 * PART)
    }

    /// The `len` bytes at `p`, which lies in the readable part.
    fn bytes(&self, p: *const u8, len: usize) -> &[u8] {
        let readable = self.base.wrapping_add(PART).cast_const();
        assert!(p >= readable && p.wrapping_add(len) <= self.no_access());
        // SAFETY: the range is inside the readable part (checked), which
        // no kernel writes (the tests only read sources).
        unsafe { std::slice::from_raw_parts(p, len) }
    }
}

impl Drop for GuardedSource {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used (slices from
        // `bytes` borrow `self`).
        unsafe { munmap(self.base.cast(), 3 * PART) }.expect("munmap of the guarded source");
    }
}

/// A destination of up to [`MAX_LEN`] bytes at a chosen offset past a
/// 64-byte boundary, with [`CANARY`] bytes on either side.
struct Canaried {
    buf: Vec<u8>,
    /// Index in `buf` of the 64-byte boundary the offsets count from.
    aligned: usize,
    start: usize,
    len: usize,
    canary: u8,
}

impl Canaried {
    fn new() -> Canaried {
        let buf = vec![0; CANARY + 64 + 63 + MAX_LEN + CANARY];
        let first = buf.as_ptr().addr() + CANARY;
        Canaried {
            aligned: CANARY + (first.next_multiple_of(64) - first),
            buf,
            start: 0,
            len: 0,
            canary: 0,
        }
    }

    /// Readies `len` bytes at `off` past the boundary: the whole buffer,
    /// destination included, is `canary` (so a byte not written shows
    /// too). Returns the destination's start.
    fn ready(&mut self, off: usize, len: usize, canary: u8) -> *mut u8 {
        self.buf.fill(canary);
        self.start = self.aligned + off;
        self.len = len;
        self.canary = canary;
        self.buf[self.start..].as_mut_ptr()
    }

    /// Panics unless the destination holds `expected` and every canary
    /// byte is intact.
    fn check(&self, expected: &[u8], what: &dyn Fn() -> String) {
        let (before, rest) = self.buf.split_at(self.start);
        let (data, after) = rest.split_at(self.len);
        let intact = |s: &[u8]| s.iter().all(|&b| b == self.canary);
        assert!(intact(before), "{}: write before the destination", what());
        assert!(intact(after), "{}: write after the destination", what());
        assert!(
            data == expected,
            "{}: data differs from the reference",
            what()
        );
    }
}

/// Where a source sits against its guard pages.
#[derive(Debug, Clone, Copy)]
enum Placement {
    /// Its last byte is the last readable one.
    Ending,
    /// Its first byte is the first readable one.
    Starting,
}

/// Destinations of one kernel set's calls.
struct Destinations {
    a: Canaried,
    b: Canaried,
}

/// Runs every kernel of `isa` over every length, destination offset and
/// placement, streamed and not; reports and returns when the CPU lacks
/// `isa`.
fn every_kernel_stays_in_bounds(isa: Isa) {
    let Some(k) = Kernels::with_isa(isa) else {
        eprintln!("{}: not supported by this CPU, skipped", isa.name());
        return;
    };
    let src = GuardedSource::new(0x9e37_79b9_7f4a_7c15);
    let mut d = Destinations {
        a: Canaried::new(),
        b: Canaried::new(),
    };
    for len in 0..=MAX_LEN {
        for place in [Placement::Ending, Placement::Starting] {
            let s = match place {
                Placement::Ending => src.ending(len),
                Placement::Starting => src.starting(),
            };
            let data = src.bytes(s, len);
            let seed = (len as u32).wrapping_mul(0x0101_0101);
            let crc = crc_ref(seed, data);
            assert_eq!(crc32c_update(seed, data), crc, "crc32c len {len} {place:?}");
            for off in 0..64 {
                let what = |op: &str| format!("{} {op} len {len} {place:?} dst+{off}", k.name());
                for nt in [false, true] {
                    let what = |op: &str| format!("{} nt {nt}", what(op));
                    let p = d.a.ready(off, len, COPY_CANARY);
                    // SAFETY: `s` is readable for len bytes (in the guarded
                    // mapping), `p` writable for len bytes (in the canaried
                    // buffer), distinct memory; the fence is copy_with's.
                    unsafe { k.copy_with(p, s, len, nt) };
                    d.a.check(data, &|| what("copy"));
                    for off2 in [off, (off * 5 + 3) % 64] {
                        let p1 = d.a.ready(off, len, COPY_CANARY);
                        let p2 = d.b.ready(off2, len, COPY_CANARY);
                        // SAFETY: as above, for two distinct destinations;
                        // the streamed stores are fenced before the checks.
                        unsafe { (k.dualcast)(p1, p2, s, len, nt) };
                        k.fence();
                        d.a.check(data, &|| what(&format!("dualcast dst2+{off2} first")));
                        d.b.check(data, &|| what(&format!("dualcast dst2+{off2} second")));
                    }
                    let p = d.a.ready(off, len, COPY_CANARY);
                    // SAFETY: as for copy_with.
                    let got = unsafe { k.copy_crc32c_with(p, s, len, seed, nt) };
                    d.a.check(data, &|| what("copy_crc32c"));
                    assert_eq!(got, crc, "{}: crc", what("copy_crc32c"));
                    let byte = (len + off) as u8 ^ u8::from(nt);
                    let p = d.a.ready(off, len, !byte);
                    // SAFETY: `p` writable for len bytes; fenced by fill_with.
                    unsafe { k.fill_with(p, byte, len, nt) };
                    d.a.check(&[byte; MAX_LEN][..len], &|| what("fill"));
                }
                let p = d.a.ready(off, len, COPY_CANARY);
                // SAFETY: as for copy_with; prefetches of the no-access
                // part never fault.
                unsafe { k.copy_ahead(p, s, len, src.no_access(), 4096) };
                d.a.check(data, &|| what("copy_ahead"));
            }
        }
    }
    compare_stays_in_bounds(k);
}

/// Compare: a first operand ending at its guard page against a second, of
/// the same bytes, at every misalignment 0..63 after its own guard page
/// (0: its first byte is the first readable one); equal, then unequal when
/// its first, middle or last byte is flipped, in both argument orders.
fn compare_stays_in_bounds(k: &Kernels) {
    let a = GuardedSource::new(1);
    let b = GuardedSource::new(2);
    for len in 0..=MAX_LEN {
        let pa = a.ending(len);
        for m in 0..64 {
            let pb = b.starting().wrapping_add(m);
            // SAFETY: both ranges are in the readable parts of their
            // mappings (len + 63 <= PART), distinct mappings; nothing else
            // touches them meanwhile.
            unsafe { std::ptr::copy_nonoverlapping(pa, pb, len) };
            let both = |x: *const u8, y: *const u8| {
                // SAFETY: both readable for len bytes, as above.
                unsafe { (k.compare(x, y, len), k.compare(y, x, len)) }
            };
            let what = || format!("{} compare len {len} second+{m}", k.name());
            assert_eq!(both(pa, pb), (true, true), "{}: equal differ", what());
            for at in [0, len / 2, len.wrapping_sub(1)]
                .into_iter()
                .filter(|&i| i < len)
            {
                // SAFETY: `at < len`, inside the readable part of `b`;
                // no slice over it exists now.
                unsafe { *pb.add(at) ^= 0x10 };
                assert_eq!(
                    both(pa, pb),
                    (false, false),
                    "{}: flip at {at} missed",
                    what()
                );
                // SAFETY: as above.
                unsafe { *pb.add(at) ^= 0x10 };
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn scalar_kernels_read_and_write_only_their_ranges() {
    every_kernel_stays_in_bounds(Isa::Scalar);
}

#[test]
#[cfg_attr(miri, ignore)]
fn avx2_kernels_read_and_write_only_their_ranges() {
    every_kernel_stays_in_bounds(Isa::Avx2);
}

#[test]
#[cfg_attr(miri, ignore)]
fn avx512_kernels_read_and_write_only_their_ranges() {
    every_kernel_stays_in_bounds(Isa::Avx512);
}
