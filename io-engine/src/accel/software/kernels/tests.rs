//! Every kernel on every ISA this CPU runs, against plain references:
//! `copy_from_slice`, `==`, and a bitwise CRC-32C. Destinations sit between
//! guard bytes, so a write outside `[dst, dst + len)` fails the test.

use super::*;
use crate::env::xorshift::XorShift;
use proptest::prelude::*;

/// Bytes of guard on each side of a destination (more than any vector).
const GUARD: usize = 256;

/// ISAs to test: all this CPU supports (only the portable set under Miri).
fn isas() -> Vec<&'static Kernels> {
    if cfg!(miri) {
        return vec![Kernels::with_isa(Isa::Scalar).unwrap()];
    }
    Isa::ALL.into_iter().filter_map(Kernels::with_isa).collect()
}

/// Reproducible test data from the project's one generator.
struct Rng(XorShift);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// `len` bytes, none equal to `avoid`.
    fn bytes(&mut self, len: usize, avoid: u8) -> Vec<u8> {
        (0..len)
            .map(|_| match self.next() as u8 {
                b if b == avoid => !avoid,
                b => b,
            })
            .collect()
    }
}

/// `len` bytes at `off` past a 64-byte boundary, with `GUARD` bytes of
/// `guard` on either side.
struct Guarded {
    buf: Vec<u8>,
    start: usize,
    len: usize,
    guard: u8,
}

impl Guarded {
    fn new(len: usize, off: usize, guard: u8) -> Guarded {
        let buf = vec![guard; GUARD + 64 + off + len + GUARD];
        let base = buf.as_ptr() as usize + GUARD;
        let start = GUARD + (base.next_multiple_of(64) - base) + off;
        Guarded {
            buf,
            start,
            len,
            guard,
        }
    }

    /// A source: `data` at `off` past a 64-byte boundary.
    fn with(data: &[u8], off: usize) -> Guarded {
        let mut g = Guarded::new(data.len(), off, 0);
        g.data_mut().copy_from_slice(data);
        g
    }

    fn ptr(&mut self) -> *mut u8 {
        // SAFETY: start + len <= buf.len() by construction.
        unsafe { self.buf.as_mut_ptr().add(self.start) }
    }

    fn data(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }

    /// Panics if a byte outside the data range changed.
    fn check_guards(&self, what: &str) {
        let outside = self.buf[..self.start]
            .iter()
            .chain(&self.buf[self.start + self.len..])
            .position(|&b| b != self.guard);
        assert!(outside.is_none(), "{what}: write outside the destination");
    }
}

/// CRC-32C register update, one bit at a time (no pre/post inversion).
fn crc_register_bitwise(mut reg: u32, data: &[u8]) -> u32 {
    for &byte in data {
        reg ^= u32::from(byte);
        for _ in 0..8 {
            reg = if reg & 1 != 0 {
                (reg >> 1) ^ 0x82F6_3B78
            } else {
                reg >> 1
            };
        }
    }
    reg
}

/// Our convention, bitwise.
pub(super) fn crc_ref(crc: u32, data: &[u8]) -> u32 {
    !crc_register_bitwise(!crc, data)
}

/// SPDK's software accel: `spdk_crc32c_update(src, nbytes, ~seed)`, a raw
/// register update without the final inversion.
fn spdk_accel_crc32c_ref(seed: u32, data: &[u8]) -> u32 {
    crc_register_bitwise(!seed, data)
}

fn check_copy(k: &Kernels, len: usize, src_off: usize, dst_off: usize, rng: &mut Rng) {
    let what = format!("{} copy len {len} src+{src_off} dst+{dst_off}", k.name());
    let mut src = Guarded::with(&rng.bytes(len, 0xa5), src_off);
    let mut dst = Guarded::new(len, dst_off, 0xa5);
    // SAFETY: both buffers hold len bytes at their pointers and are distinct.
    unsafe { k.copy(dst.ptr(), src.ptr(), len) };
    assert!(dst.data() == src.data(), "{what}: data differs");
    dst.check_guards(&what);
    // The copy that prefetches meanwhile copies the same, whatever the
    // range it prefetches: another buffer, or memory that is not mapped.
    let next = rng.bytes(8192, 0);
    let aheads = [
        (next.as_ptr(), next.len()),
        (16 as *const u8, 8192),
        (std::ptr::null(), 0),
    ];
    for (ahead, n) in aheads {
        let mut dst = Guarded::new(len, dst_off, 0xa5);
        // SAFETY: as above; prefetches never fault.
        unsafe { k.copy_ahead(dst.ptr(), src.ptr(), len, ahead, n) };
        assert!(dst.data() == src.data(), "{what}: copy_ahead data differs");
        dst.check_guards(&format!("{what} copy_ahead"));
    }
    // Streamed at any length, fenced by the caller.
    let mut dst = Guarded::new(len, dst_off, 0xa5);
    // SAFETY: as above; the fence comes before the reads.
    unsafe { k.copy_streaming(dst.ptr(), src.ptr(), len) };
    k.fence();
    assert!(dst.data() == src.data(), "{what}: streamed data differs");
    dst.check_guards(&format!("{what} streamed"));
}

fn check_dualcast(k: &Kernels, len: usize, src_off: usize, dst_off: usize, rng: &mut Rng) {
    let what = format!(
        "{} dualcast len {len} src+{src_off} dst+{dst_off}",
        k.name()
    );
    let mut src = Guarded::with(&rng.bytes(len, 0x5a), src_off);
    let mut dst1 = Guarded::new(len, dst_off, 0x5a);
    // The second destination at another alignment, to cover mixed cases.
    let mut dst2 = Guarded::new(len, (dst_off * 5 + 3) % 64, 0x5a);
    // SAFETY: all three buffers hold len bytes and are distinct.
    unsafe { k.dualcast(dst1.ptr(), dst2.ptr(), src.ptr(), len) };
    assert!(dst1.data() == src.data(), "{what}: dst1 differs");
    assert!(dst2.data() == src.data(), "{what}: dst2 differs");
    dst1.check_guards(&what);
    dst2.check_guards(&what);
}

fn check_fill(k: &Kernels, len: usize, dst_off: usize, byte: u8) {
    let what = format!("{} fill {byte:#x} len {len} dst+{dst_off}", k.name());
    let mut dst = Guarded::new(len, dst_off, !byte);
    // SAFETY: the buffer holds len bytes at its pointer.
    unsafe { k.fill(dst.ptr(), byte, len) };
    assert!(
        dst.data().iter().all(|&b| b == byte),
        "{what}: data differs"
    );
    dst.check_guards(&what);
    let mut dst = Guarded::new(len, dst_off, !byte);
    // SAFETY: as above; the fence comes before the reads.
    unsafe { k.fill_streaming(dst.ptr(), byte, len) };
    k.fence();
    assert!(
        dst.data().iter().all(|&b| b == byte),
        "{what}: streamed data differs"
    );
    dst.check_guards(&format!("{what} streamed"));
}

fn check_copy_crc(k: &Kernels, len: usize, src_off: usize, dst_off: usize, rng: &mut Rng) {
    let what = format!(
        "{} copy_crc32c len {len} src+{src_off} dst+{dst_off}",
        k.name()
    );
    let seed = rng.next() as u32;
    let mut src = Guarded::with(&rng.bytes(len, 0xa5), src_off);
    let mut dst = Guarded::new(len, dst_off, 0xa5);
    // SAFETY: both buffers hold len bytes at their pointers and are distinct.
    let crc = unsafe { k.copy_crc32c(dst.ptr(), src.ptr(), len, seed) };
    assert!(dst.data() == src.data(), "{what}: data differs");
    assert_eq!(crc, crc_ref(seed, src.data()), "{what}: crc");
    dst.check_guards(&what);
}

/// Equal buffers compare equal; then each listed position, flipped alone,
/// makes them differ.
fn check_compare(
    k: &Kernels,
    len: usize,
    a_off: usize,
    b_off: usize,
    flips: impl IntoIterator<Item = usize>,
    rng: &mut Rng,
) {
    let data = rng.bytes(len, 0);
    let mut a = Guarded::with(&data, a_off);
    let mut b = Guarded::with(&data, b_off);
    // SAFETY: both buffers hold len readable bytes (here and below).
    let equal = unsafe { k.compare(a.ptr(), b.ptr(), len) };
    assert!(
        equal,
        "{} compare len {len}: equal buffers differ",
        k.name()
    );
    for at in flips {
        let bit = 1u8 << (at % 8);
        b.data_mut()[at] ^= bit;
        // SAFETY: as above.
        let equal = unsafe { k.compare(a.ptr(), b.ptr(), len) };
        // The other argument order, too.
        // SAFETY: as above.
        let equal_rev = unsafe { k.compare(b.ptr(), a.ptr(), len) };
        b.data_mut()[at] ^= bit;
        assert!(
            !equal && !equal_rev,
            "{} compare len {len} a+{a_off} b+{b_off}: flip at {at} missed",
            k.name()
        );
    }
}

/// Sizes above 300: odd, power-of-two and neighbours, up to 4 MiB, and
/// around `NT_THRESHOLD`.
fn large_sizes() -> Vec<usize> {
    let mut sizes = vec![
        301, 383, 384, 511, 512, 513, 1000, 1023, 1024, 1025, 2047, 4095, 4096, 4097, 8191, 12_345,
        65_535, 65_536, 65_537, 100_003,
    ];
    sizes.extend([
        NT_THRESHOLD - 1,
        NT_THRESHOLD,
        NT_THRESHOLD + 1,
        NT_THRESHOLD + 4097,
    ]);
    sizes.extend([(1 << 21) + 63, (4 << 20) - 1, 4 << 20]);
    sizes
}

#[test]
#[cfg_attr(miri, ignore)]
fn crc32c_check_value_and_chaining() {
    assert_eq!(crc32c_update(0, b"123456789"), 0xE306_9283);
    assert_eq!(crc_ref(0, b"123456789"), 0xE306_9283);
    assert_eq!(crc32c_update(0, b""), 0);
    assert_eq!(crc32c_update(0x1234_5678, b""), 0x1234_5678);
    let mut rng = Rng(XorShift::new(7));
    let data = rng.bytes(20_000, 0);
    for &len in &[1, 7, 64, 255, 256, 257, 511, 512, 4096, 20_000] {
        let whole = crc32c_update(0, &data[..len]);
        assert_eq!(whole, crc_ref(0, &data[..len]), "len {len}");
        for split in [0, 1, len / 3, len / 2, len - 1, len] {
            let (a, b) = data[..len].split_at(split);
            assert_eq!(
                crc32c_update(crc32c_update(0, a), b),
                whole,
                "len {len} split {split}"
            );
        }
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn crc32c_matches_spdk_convention() {
    // SPDK seed 0 over the check string: the standard CRC, not inverted.
    assert_eq!(spdk_accel_crc32c_ref(0, b"123456789"), 0x1CF9_6D7C);
    assert_eq!(!crc32c_update(0, b"123456789"), 0x1CF9_6D7C);
    let mut rng = Rng(XorShift::new(11));
    for len in [0, 1, 9, 100, 4096] {
        let data = rng.bytes(len, 0);
        let seed = rng.next() as u32;
        assert_eq!(
            spdk_accel_crc32c_ref(seed, &data),
            !crc32c_update(seed, &data),
            "len {len} seed {seed:#x}"
        );
        // Chaining SPDK-style: the next seed is the previous result inverted.
        let (a, b) = data.split_at(len / 2);
        let spdk = spdk_accel_crc32c_ref(!spdk_accel_crc32c_ref(seed, a), b);
        assert_eq!(spdk, spdk_accel_crc32c_ref(seed, &data));
        assert_eq!(spdk, !crc32c_update(crc32c_update(seed, a), b));
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn detection_picks_a_supported_set() {
    let best = Kernels::get();
    assert!(best.isa().is_supported());
    assert_eq!(best.name(), best.isa().name());
    assert!(Kernels::with_isa(Isa::Scalar).is_some());
    #[cfg(target_arch = "x86_64")]
    if Isa::Avx512.is_supported() {
        assert_eq!(best.isa(), Isa::Avx512);
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn small_sizes_every_size_and_offset() {
    let mut rng = Rng(XorShift::new(1));
    for k in isas() {
        for len in 0..=300 {
            for dst_off in 0..64 {
                let src_off = (dst_off * 37 + len) % 64;
                check_copy(k, len, src_off, dst_off, &mut rng);
                check_dualcast(k, len, src_off, dst_off, &mut rng);
                check_fill(k, len, dst_off, (len + dst_off) as u8);
            }
            check_copy_crc(k, len, len % 64, (len * 7) % 64, &mut rng);
        }
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn all_offset_pairs() {
    let mut rng = Rng(XorShift::new(2));
    for k in isas() {
        for len in [
            1,
            3,
            17,
            33,
            63,
            64,
            65,
            129,
            200,
            257,
            513,
            1000,
            4096 + 17,
        ] {
            for src_off in 0..64 {
                for dst_off in 0..64 {
                    check_copy(k, len, src_off, dst_off, &mut rng);
                }
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn large_sizes_including_non_temporal() {
    let mut rng = Rng(XorShift::new(3));
    for k in isas() {
        for len in large_sizes() {
            for (src_off, dst_off) in [(0, 0), (1, 0), (0, 1), (13, 63), (32, 32)] {
                check_copy(k, len, src_off, dst_off, &mut rng);
                check_dualcast(k, len, src_off, dst_off, &mut rng);
                check_fill(k, len, dst_off, rng.next() as u8);
            }
            check_copy_crc(k, len, 0, 0, &mut rng);
            check_copy_crc(k, len, 5, 39, &mut rng);
        }
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn compare_finds_every_flipped_byte() {
    let mut rng = Rng(XorShift::new(4));
    for k in isas() {
        for len in 0..=256 {
            check_compare(k, len, len % 64, (len * 3) % 64, 0..len, &mut rng);
        }
        for len in large_sizes() {
            let mut flips = vec![0, len - 1, len / 2];
            flips.extend((0..16).map(|_| rng.below(len)));
            check_compare(k, len, 0, 0, flips.clone(), &mut rng);
            check_compare(k, len, 7, 50, flips, &mut rng);
        }
    }
}

#[test]
fn scalar_set_works() {
    // The one test Miri runs: the portable set over a few sizes.
    let k = Kernels::with_isa(Isa::Scalar).unwrap();
    let mut rng = Rng(XorShift::new(5));
    for len in [0, 1, 5, 64, 100] {
        check_copy(k, len, 1, 3, &mut rng);
        check_dualcast(k, len, 2, 0, &mut rng);
        check_fill(k, len, 5, 0x42);
        check_compare(
            k,
            len,
            0,
            1,
            [len / 2].into_iter().filter(|_| len > 0),
            &mut rng,
        );
    }
}

/// An ISA this CPU supports, chosen by proptest.
fn any_kernels() -> impl Strategy<Value = &'static Kernels> {
    proptest::sample::select(isas())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    #[cfg_attr(miri, ignore)]
    fn prop_copy_and_dualcast(
        k in any_kernels(),
        len in 0usize..20_000,
        src_off in 0usize..64,
        dst_off in 0usize..64,
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(XorShift::new(seed | 1));
        check_copy(k, len, src_off, dst_off, &mut rng);
        check_dualcast(k, len, src_off, dst_off, &mut rng);
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn prop_fill(k in any_kernels(), len in 0usize..20_000, off in 0usize..64, byte in any::<u8>()) {
        check_fill(k, len, off, byte);
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn prop_compare(
        k in any_kernels(),
        data in proptest::collection::vec(any::<u8>(), 1..5_000),
        flip_at in any::<proptest::sample::Index>(),
        flip in 1u8..=255,
        a_off in 0usize..64,
        b_off in 0usize..64,
    ) {
        let len = data.len();
        let mut a = Guarded::with(&data, a_off);
        let mut b = Guarded::with(&data, b_off);
        // SAFETY: both buffers hold len readable bytes.
        let equal = unsafe { k.compare(a.ptr(), b.ptr(), len) };
        prop_assert!(equal);
        let at = flip_at.index(len);
        b.data_mut()[at] ^= flip;
        // SAFETY: as above.
        let equal = unsafe { k.compare(a.ptr(), b.ptr(), len) };
        prop_assert_eq!(equal, a.data() == b.data());
        prop_assert!(!equal);
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn prop_crc_chains(
        data in proptest::collection::vec(any::<u8>(), 0..3_000),
        split in any::<proptest::sample::Index>(),
        seed in any::<u32>(),
    ) {
        let at = split.index(data.len() + 1);
        let (a, b) = data.split_at(at);
        let whole = crc32c_update(seed, &data);
        prop_assert_eq!(whole, crc_ref(seed, &data));
        prop_assert_eq!(crc32c_update(crc32c_update(seed, a), b), whole);
        prop_assert_eq!(spdk_accel_crc32c_ref(seed, &data), !whole);
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn prop_copy_crc32c(
        k in any_kernels(),
        len in 0usize..40_000,
        src_off in 0usize..64,
        dst_off in 0usize..64,
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(XorShift::new(seed | 1));
        check_copy_crc(k, len, src_off, dst_off, &mut rng);
    }
}
