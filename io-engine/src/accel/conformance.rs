//! The accel conformance suite: written once, run over every module
//! (software, I/OAT on its device model, I/OAT on hardware where there is
//! one). Each check compares what the module did against a plain
//! reference implementation and panics with the case that failed.
//!
//! Compiled for tests only (the framework's and the I/OAT module's).
//!
//! Thread: the calling thread, which gets its own channel of the `Accel`
//! under test and polls it until each case completes.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Accel, AccelChannel, AccelError, Completion, IoVec, Opcode, Placement, Queue, Status};
use crate::env::dma::DmaRegion;
use crate::env::xorshift::XorShift;

/// Sizes every opcode is checked at: 1 byte to 4 MiB, odd ones included.
pub const SIZES: &[usize] = &[
    1,
    2,
    3,
    7,
    8,
    15,
    16,
    31,
    32,
    33,
    63,
    64,
    65,
    127,
    128,
    255,
    256,
    511,
    512,
    513,
    1000,
    4095,
    4096,
    4097,
    8191,
    12288,
    65535,
    65536,
    131_072 + 17,
    1 << 20,
    (1 << 20) + 3,
    4 << 20,
];

/// Source offsets from an aligned base, to test unaligned buffers.
pub const OFFSETS: &[usize] = &[0, 1, 3, 8, 61];

/// Placements copies and fills are checked with: the result must not
/// depend on the hint.
pub const PLACEMENTS: [Placement; 2] = [Placement::Cache, Placement::Memory];

/// How long one case may take before the suite calls the module stuck.
const CASE_TIMEOUT: Duration = Duration::from_secs(20);

/// Device-visible memory for the cases, handed out in aligned pieces.
pub struct Arena {
    region: DmaRegion,
    next: Cell<usize>,
}

impl Arena {
    /// An arena of `len` bytes of DMA memory.
    pub fn new(len: usize) -> Arena {
        Arena {
            region: DmaRegion::alloc(len).expect("conformance arena"),
            next: Cell::new(0),
        }
    }

    /// Forgets every piece handed out.
    pub fn reset(&self) {
        self.next.set(0);
    }

    /// `len` bytes starting `offset` bytes past a 4 KiB boundary.
    pub fn take(&self, len: usize, offset: usize) -> *mut u8 {
        let start = self.next.get().next_multiple_of(4096) + offset;
        let end = start + len;
        assert!(end <= self.region.len(), "conformance arena too small");
        self.next.set(end);
        // SAFETY: start + len is inside the region (asserted).
        unsafe { self.region.as_ptr().add(start) }
    }
}

/// Fills `len` bytes at `p` with a pattern drawn from `seed` (callers in
/// this crate pass pieces of memory they own of at least `len` bytes).
pub(crate) fn scribble(p: *mut u8, len: usize, seed: u64) {
    // SAFETY: callers pass arena pieces of at least `len` bytes that no
    // task uses while they are written.
    let piece = unsafe { std::slice::from_raw_parts_mut(p, len) };
    XorShift::new(seed).fill(piece);
}

fn bytes<'a>(p: *const u8, len: usize) -> &'a [u8] {
    // SAFETY: callers pass arena pieces of at least `len` bytes that no
    // task is writing (checked after completion).
    unsafe { std::slice::from_raw_parts(p, len) }
}

/// A plain bitwise CRC-32C (reflected, polynomial 0x82F63B78), the
/// reference the modules are checked against.
pub fn reference_crc32c(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A completion queue that keeps every record it reaps.
pub struct Recorder {
    /// The queue the case submits through.
    pub q: Queue,
    /// (tag, completion) in completion order.
    pub seen: RefCell<Vec<(u64, Completion)>>,
}

impl Recorder {
    /// A recorder with a new queue on `ch`.
    pub fn new(ch: &Rc<AccelChannel>) -> Recorder {
        Recorder {
            q: ch.queue(),
            seen: RefCell::default(),
        }
    }

    /// Reaps the queue until `n` completions have been seen.
    pub fn wait(&self, n: usize, what: &str) {
        let start = Instant::now();
        let mut seen = self.seen.borrow_mut();
        while seen.len() < n {
            if self.q.reap(&mut seen) == 0 {
                assert!(
                    start.elapsed() < CASE_TIMEOUT,
                    "{what}: {} of {n} tasks completed in {CASE_TIMEOUT:?}",
                    seen.len()
                );
                std::hint::spin_loop();
            }
        }
    }

    /// The one completion of a single-task case.
    pub fn only(&self, what: &str) -> Completion {
        let seen = self.seen.borrow();
        assert_eq!(seen.len(), 1, "{what}: completions {seen:?}");
        seen[0].1
    }
}

/// Runs every check of the suite on the calling thread's channel of
/// `accel`, sizes capped at `max_size`.
pub fn run_all(accel: &Arc<Accel>, max_size: usize) {
    let arena = Arena::new(4 * max_size.max(1 << 16) + (64 << 20).min(32 * max_size.max(4096)));
    let ch = accel.channel();
    copy(&ch, &arena, max_size);
    fill(&ch, &arena, max_size);
    compare(&ch, &arena, max_size);
    dualcast(&ch, &arena, max_size);
    crc32c(&ch, &arena, max_size);
    copy_crc32c(&ch, &arena, max_size);
    scatter_gather(&ch, &arena);
    mixed_batch(&ch, &arena);
    invalid_requests(&ch, &arena);
    assert_eq!(ch.in_flight(), 0, "tasks left in flight after the suite");
}

fn sizes(max: usize) -> impl Iterator<Item = usize> {
    SIZES.iter().copied().filter(move |&s| s <= max)
}

/// Copies at every size and source/destination offset, placed in the
/// cache and in memory.
pub fn copy(ch: &Rc<AccelChannel>, arena: &Arena, max: usize) {
    for len in sizes(max) {
        for (&off, placement) in OFFSETS.iter().flat_map(|o| PLACEMENTS.map(|p| (o, p))) {
            arena.reset();
            let src = arena.take(len, off);
            // Guard bytes before and after the destination.
            let dst = arena.take(len + 128, (off * 7) % 64);
            scribble(src, len, len as u64 ^ 0x55);
            scribble(dst, len + 128, 0xdead);
            let guard: Vec<u8> = bytes(dst, len + 128).to_vec();
            let r = Recorder::new(ch);
            let what = format!(
                "copy len {len} offset {off} {placement:?} on {}",
                ch.module_for(Opcode::Copy)
            );
            // SAFETY: arena pieces, untouched until the wait returns.
            unsafe { r.q.copy_placed(dst.add(64), src, len, placement, 1) }.expect(&what);
            r.wait(1, &what);
            assert_eq!(r.only(&what), Completion::SUCCESS, "{what}");
            let got = bytes(dst, len + 128);
            assert_eq!(
                &got[..64],
                &guard[..64],
                "{what}: wrote before the destination"
            );
            assert!(
                got[64..64 + len] == *bytes(src, len),
                "{what}: data differs"
            );
            assert_eq!(
                &got[64 + len..],
                &guard[64 + len..],
                "{what}: wrote past the end"
            );
        }
    }
}

/// Fills at every size and offset, with several bytes, placed in the cache
/// and in memory.
pub fn fill(ch: &Rc<AccelChannel>, arena: &Arena, max: usize) {
    for len in sizes(max) {
        let cases = OFFSETS.iter().flat_map(|o| PLACEMENTS.map(|p| (o, p)));
        for (i, (&off, placement)) in cases.enumerate() {
            arena.reset();
            let dst = arena.take(len + 128, off);
            scribble(dst, len + 128, 7);
            let guard: Vec<u8> = bytes(dst, len + 128).to_vec();
            let byte = [0x00u8, 0xff, 0xa5, 0x3c, 0x01][i % 5];
            let r = Recorder::new(ch);
            let what = format!(
                "fill {byte:#x} len {len} offset {off} {placement:?} on {}",
                ch.module_for(Opcode::Fill)
            );
            // SAFETY: an arena piece, untouched until the wait returns.
            unsafe { r.q.fill_placed(dst.add(64), byte, len, placement, 1) }.expect(&what);
            r.wait(1, &what);
            assert_eq!(r.only(&what), Completion::SUCCESS, "{what}");
            let got = bytes(dst, len + 128);
            assert_eq!(
                &got[..64],
                &guard[..64],
                "{what}: wrote before the destination"
            );
            assert!(
                got[64..64 + len].iter().all(|&b| b == byte),
                "{what}: data differs"
            );
            assert_eq!(
                &got[64 + len..],
                &guard[64 + len..],
                "{what}: wrote past the end"
            );
        }
    }
}

/// Equal buffers compare equal; one flipped byte anywhere is a
/// miscompare (every position for small sizes, a few for large ones).
pub fn compare(ch: &Rc<AccelChannel>, arena: &Arena, max: usize) {
    for len in sizes(max) {
        arena.reset();
        let a = arena.take(len, 3);
        let b = arena.take(len, 0);
        scribble(a, len, 99);
        // SAFETY: two distinct arena pieces of len bytes.
        unsafe { std::ptr::copy_nonoverlapping(a, b, len) };
        let what = format!("compare len {len} on {}", ch.module_for(Opcode::Compare));
        let r = Recorder::new(ch);
        // SAFETY: arena pieces, untouched until the wait returns.
        unsafe { r.q.compare(a, b, len, 0) }.expect(&what);
        r.wait(1, &what);
        assert_eq!(
            r.only(&what).status,
            Status::Success,
            "{what}: equal buffers"
        );
        let positions: Vec<usize> = if len <= 256 {
            (0..len).collect()
        } else {
            vec![0, 1, len / 3, len / 2 + 1, len - 2, len - 1]
        };
        for pos in positions {
            // SAFETY: pos < len.
            unsafe { *b.add(pos) ^= 0x10 };
            let r = Recorder::new(ch);
            // SAFETY: as above.
            unsafe { r.q.compare(a, b, len, 0) }.expect(&what);
            r.wait(1, &what);
            assert_eq!(
                r.only(&what).status,
                Status::Miscompare,
                "{what}: byte {pos} differs"
            );
            // SAFETY: as above.
            unsafe { *b.add(pos) ^= 0x10 };
        }
    }
}

/// Dualcast at every size, both destinations 4 KiB aligned.
pub fn dualcast(ch: &Rc<AccelChannel>, arena: &Arena, max: usize) {
    for len in sizes(max) {
        arena.reset();
        let src = arena.take(len, 5);
        let d1 = arena.take(len, 0);
        let d2 = arena.take(len, 0);
        scribble(src, len, 3);
        let what = format!("dualcast len {len} on {}", ch.module_for(Opcode::Dualcast));
        let r = Recorder::new(ch);
        // SAFETY: arena pieces, untouched until the wait returns.
        unsafe { r.q.dualcast(d1, d2, src, len, 0) }.expect(&what);
        r.wait(1, &what);
        assert_eq!(r.only(&what), Completion::SUCCESS, "{what}");
        assert!(
            bytes(d1, len) == bytes(src, len),
            "{what}: first destination"
        );
        assert!(
            bytes(d2, len) == bytes(src, len),
            "{what}: second destination"
        );
    }
}

/// CRC-32C at every size and offset, from a zero and a chained seed.
pub fn crc32c(ch: &Rc<AccelChannel>, arena: &Arena, max: usize) {
    for len in sizes(max) {
        for &off in OFFSETS {
            arena.reset();
            let src = arena.take(len, off);
            scribble(src, len, len as u64);
            for seed in [0u32, 0x1234_5678] {
                let what = format!(
                    "crc32c len {len} offset {off} seed {seed:#x} on {}",
                    ch.module_for(Opcode::Crc32c)
                );
                let r = Recorder::new(ch);
                // SAFETY: an arena piece, untouched until the wait returns.
                unsafe { r.q.crc32c(&[IoVec::new(src, len)], seed, 0) }.expect(&what);
                r.wait(1, &what);
                let c = r.only(&what);
                assert_eq!(c.status, Status::Success, "{what}");
                assert_eq!(c.crc, reference_crc32c(seed, bytes(src, len)), "{what}");
            }
        }
    }
}

/// copy_crc32c at every size: the copy and the CRC.
pub fn copy_crc32c(ch: &Rc<AccelChannel>, arena: &Arena, max: usize) {
    for len in sizes(max) {
        arena.reset();
        let src = arena.take(len, 9);
        let dst = arena.take(len, 2);
        scribble(src, len, 1234);
        let what = format!(
            "copy_crc32c len {len} on {}",
            ch.module_for(Opcode::CopyCrc32c)
        );
        let r = Recorder::new(ch);
        // SAFETY: arena pieces, untouched until the wait returns.
        unsafe { r.q.copy_crc32c(dst, &[IoVec::new(src, len)], 0, 0) }.expect(&what);
        r.wait(1, &what);
        let c = r.only(&what);
        assert_eq!(c.status, Status::Success, "{what}");
        assert_eq!(c.crc, reference_crc32c(0, bytes(src, len)), "{what}");
        assert!(bytes(dst, len) == bytes(src, len), "{what}: data differs");
    }
}

/// crc32c and copy_crc32c over 1 to 16 source vectors of odd lengths.
pub fn scatter_gather(ch: &Rc<AccelChannel>, arena: &Arena) {
    for n in 1..=16usize {
        arena.reset();
        let iovs: Vec<IoVec> = (0..n)
            .map(|i| {
                let len = 1 + (i * 977 + n * 31) % 5000;
                let p = arena.take(len, i % 64);
                scribble(p, len, (n * 100 + i) as u64);
                IoVec::new(p, len)
            })
            .collect();
        let total: usize = iovs.iter().map(|v| v.len).sum();
        let mut flat = Vec::with_capacity(total);
        for v in &iovs {
            flat.extend_from_slice(bytes(v.base, v.len));
        }
        let dst = arena.take(total, 0);
        let what = format!("scatter-gather of {n} vectors ({total} bytes)");
        let r = Recorder::new(ch);
        // SAFETY: arena pieces and `iovs` outlive the wait below.
        unsafe { r.q.crc32c(&iovs, 7, 1) }.expect(&what);
        // SAFETY: as above.
        unsafe { r.q.copy_crc32c(dst, &iovs, 7, 2) }.expect(&what);
        r.wait(2, &what);
        let want = reference_crc32c(7, &flat);
        for (tag, c) in r.seen.borrow().iter() {
            assert_eq!(c.status, Status::Success, "{what} tag {tag}");
            assert_eq!(c.crc, want, "{what} tag {tag}");
        }
        assert!(bytes(dst, total) == flat.as_slice(), "{what}: copied data");
    }
}

/// One batch of every opcode, several times over (every other round's copy
/// and fill placed in memory); each task completes on its own with its own
/// result.
pub fn mixed_batch(ch: &Rc<AccelChannel>, arena: &Arena) {
    arena.reset();
    const ROUNDS: usize = 8;
    let len = 4096;
    let r = Recorder::new(ch);
    let mut batch = r.q.batch();
    let mut expect = Vec::new();
    let mut checks: Vec<Box<dyn Fn()>> = Vec::new();
    for i in 0..ROUNDS {
        let src = arena.take(len, 0);
        scribble(src, len, i as u64);
        let cdst = arena.take(len, 0);
        let fdst = arena.take(len, 0);
        let same = arena.take(len, 0);
        // SAFETY: distinct arena pieces.
        unsafe { std::ptr::copy_nonoverlapping(src, same, len) };
        if i % 2 == 1 {
            // SAFETY: inside the piece.
            unsafe { *same.add(i * 100) ^= 1 };
        }
        let d1 = arena.take(len, 0);
        let d2 = arena.take(len, 0);
        let base = (i * 10) as u64;
        let placement = PLACEMENTS[i % 2];
        // SAFETY: arena pieces, untouched until the wait (every add below).
        unsafe {
            batch.copy_placed(cdst, src, len, placement, base).unwrap();
            batch
                .fill_placed(fdst, i as u8, len, placement, base + 1)
                .unwrap();
            batch.compare(src, same, len, base + 2).unwrap();
            batch.dualcast(d1, d2, src, len, base + 3).unwrap();
            batch.crc32c(&[IoVec::new(src, len)], 0, base + 4).unwrap();
        }
        let crc = reference_crc32c(0, bytes(src, len));
        expect.push((base, Completion::SUCCESS));
        expect.push((base + 1, Completion::SUCCESS));
        expect.push((
            base + 2,
            Completion::with(if i % 2 == 1 {
                Status::Miscompare
            } else {
                Status::Success
            }),
        ));
        expect.push((base + 3, Completion::SUCCESS));
        expect.push((
            base + 4,
            Completion {
                status: Status::Success,
                crc,
            },
        ));
        checks.push(Box::new(move || {
            assert!(bytes(cdst, len) == bytes(src, len), "batch copy {i}");
            assert!(
                bytes(fdst, len).iter().all(|&b| b == i as u8),
                "batch fill {i}"
            );
            assert!(bytes(d1, len) == bytes(src, len), "batch dualcast {i}");
            assert!(bytes(d2, len) == bytes(src, len), "batch dualcast {i}");
        }));
    }
    let n = batch.len();
    assert_eq!(n, ROUNDS * 5);
    batch.submit();
    r.wait(n, "mixed batch");
    let mut seen = r.seen.borrow().clone();
    seen.sort_by_key(|(t, _)| *t);
    assert_eq!(seen, expect, "mixed batch completions");
    for c in checks {
        c();
    }
}

/// Requests the framework must refuse at submission, leaving nothing in
/// flight.
pub fn invalid_requests(ch: &Rc<AccelChannel>, arena: &Arena) {
    arena.reset();
    let a = arena.take(8192, 0);
    let b = arena.take(8192, 0);
    let r = Recorder::new(ch);
    let before = ch.in_flight();
    let expect_invalid = |res: Result<(), AccelError>, what: &str| match res {
        Err(AccelError::Invalid { .. }) => {}
        other => panic!("{what}: expected an invalid-request error, got {other:?}"),
    };
    // SAFETY: every call below is refused before any buffer is used.
    unsafe {
        expect_invalid(r.q.copy(b, a, 0, 0), "zero-length copy");
        expect_invalid(r.q.copy(a.add(100), a, 4096, 0), "overlapping copy");
        expect_invalid(
            r.q.copy(a, a.add(100), 4096, 0),
            "overlapping copy (other way)",
        );
        expect_invalid(r.q.fill(a, 0, 0, 0), "zero-length fill");
        expect_invalid(r.q.compare(a, b, 0, 0), "zero-length compare");
        expect_invalid(
            r.q.dualcast(b.add(8), arena.take(4096, 0), a, 4096, 0),
            "unaligned dualcast destination",
        );
        expect_invalid(
            r.q.dualcast(b, arena.take(4096, 512), a, 4096, 0),
            "unaligned second dualcast destination",
        );
        expect_invalid(r.q.crc32c(&[], 0, 0), "crc32c of nothing");
        expect_invalid(
            r.q.crc32c(&[IoVec::new(a, 10), IoVec::new(b, 0)], 0, 0),
            "crc32c with an empty vector",
        );
        expect_invalid(
            r.q.copy_crc32c(a.add(10), &[IoVec::new(a, 100)], 0, 0),
            "overlapping copy_crc32c",
        );
        expect_invalid(r.q.copy(b, std::ptr::null(), 4096, 0), "copy from null");
        let max = ch.max_transfer(Opcode::Copy);
        if max < isize::MAX as usize {
            let big = max + 1;
            let e = r.q.copy(b, a, big, 0);
            match e {
                Err(AccelError::Invalid { reason, .. }) => {
                    assert!(reason.contains("limit"), "{reason}")
                }
                other => panic!("copy above the module limit: got {other:?}"),
            }
        }
    }
    assert_eq!(ch.in_flight(), before, "refused requests took tasks");
    assert_eq!(ch.poll(), 0, "refused requests completed");
    let mut reaped = Vec::new();
    assert_eq!(r.q.reap(&mut reaped), 0, "refused requests completed");
    assert!(reaped.is_empty(), "refused requests made records");
}
