//! Data kernels of the software accel engine: copy, fill, compare, dualcast,
//! crc32c and copy+crc32c over raw device-visible buffers.
//!
//! Thread: whichever reactor runs the software engine's task calls these,
//! on its own core; they keep no state but the CPU feature set detected once
//! at first use ([`Kernels::get`]), so any thread may call them at once.
//!
//! Why here and not `copy_nonoverlapping`: an accel task's buffers are DMA
//! memory, never Rust references, and the engine knows what the C library
//! cannot: the destination of a big copy or fill is an I/O buffer that will
//! not be read again soon, so past [`NT_THRESHOLD`] bytes the stores bypass
//! the caches (non-temporal stores, then `sfence`) instead of evicting the
//! reactor's working set; a caller that knows a destination is not read
//! soon whatever its length streams it ([`Kernels::copy_streaming`],
//! [`Kernels::fill_streaming`]) and fences once for a run of them
//! ([`Kernels::fence`]). Dualcast loads the source once and stores it
//! twice, and copy+crc32c reads the source from memory once, computing the
//! CRC while each step is still in cache.
//!
//! ISAs: AVX-512 (64-byte vectors; AVX-512F only) and AVX2 (32 bytes) on
//! x86_64, picked at run time, and a portable "scalar" set everywhere (the
//! `core::ptr`/slice operations, i.e. the C library's memcpy, memset and
//! memcmp; dualcast there is two copies). [`Kernels::with_isa`] forces one,
//! for tests and benchmarks.
//!
//! # CRC-32C convention
//!
//! [`crc32c_update`]`(crc, data)` takes and returns the CRC as a caller sees
//! it: standard CRC-32C (Castagnoli, reflected, register preset to
//! `0xFFFF_FFFF` and inverted at the end), so a fresh CRC starts from `0`,
//! `crc32c_update(0, b"123456789") == 0xE306_9283`, and chaining is plain:
//! `crc32c_update(crc32c_update(0, a), b) == crc32c_update(0, a ++ b)`. This
//! is the `crc32c_append(crc, data)` of the `crc32c` crate and of most
//! libraries.
//!
//! SPDK's accel framework instead computes `spdk_crc32c_update(data, ~seed)`
//! with a raw register update that skips the final inversion. Both invert on
//! the way in, so SPDK's `seed` is our `crc` as is, and only the result
//! differs by the final inversion:
//!
//! ```text
//! spdk_accel_crc32c(seed, data) == !crc32c_update(seed, data)
//! crc32c_update(crc, data)      == !spdk_accel_crc32c(crc, data)
//! ```
//!
//! (so SPDK's seed 0 over "123456789" gives `!0xE306_9283 = 0x1CF9_6D7C`, and
//! chaining SPDK-style passes the previous result inverted as the next seed).
//! The tests check this against a bitwise implementation of SPDK's
//! formula.
//!
//! CRC arithmetic comes from the `crc-fast` crate (AVX-512 VPCLMULQDQ
//! folding fused with the SSE4.2 `crc32` instruction on this class of CPU):
//! measured on Zen 5 it is twice as fast as the `crc32c` crate at 4 KiB and
//! 1.6 times at 512 bytes.

use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod guard_page_tests;
#[cfg(test)]
mod tests;

/// Length in bytes from which [`Kernels::copy`], [`Kernels::fill`],
/// [`Kernels::dualcast`] and [`Kernels::copy_crc32c`] use non-temporal
/// stores (AVX2 and AVX-512 sets; [`Kernels::copy_with`] lets a caller
/// decide instead).
///
/// Just above 1 MiB, the L2 of one Zen 5 core: a destination larger would
/// evict the reactor's whole L2 working set if cached, and is an I/O buffer
/// not read again soon. Exactly 1 MiB stays temporal: accel-perf
/// `-o 1048576 -q 4` (8 MiB of buffers, cache-resident in L3) ran at 70 %
/// of memcpy with non-temporal stores there (bench/accel,
/// docs/performance.md). Measured with `benches/accel_kernels.rs` (store sweep,
/// GB/s, AVX-512): walking 256 MiB, non-temporal stores beat the best
/// temporal path from 64 KiB on for copies (29 against 26 for `rep movsb`,
/// +12 %) and from 32 KiB for fills (44 against 37, +19 %), and lose below
/// (4 KiB copies: 18 against 21; the sweep fences every copy, and a run
/// of streamed copies fenced once does far better, see
/// [`Kernels::fence`]). When the same buffer is copied again
/// while still cached they lose at every size (256 KiB: 42 against 129;
/// 1 MiB: 43 against 68; 16 MiB: 43 against 57). Past L2 the DRAM gain is
/// kept and the cached case is rare; below it a destination may well be
/// read from cache. A caller that will read the destination right away (an
/// NBD reply about to be sent) can pass `nt = false` to
/// [`Kernels::copy_with`].
pub const NT_THRESHOLD: usize = (1 << 20) + 1;

/// Bytes per copy-then-crc step of [`Kernels::copy_crc32c`]: small enough
/// that the source is still in L2 when the CRC reads it back, large enough
/// for `rep movsb` and for the CRC's folding loop to run at full speed.
const CRC_CHUNK: usize = 64 * 1024;

/// Step length from which [`Kernels::copy_crc32c`] computes the CRC before
/// the copy rather than after. Measured on Zen 5 walking 256 MiB: for 4 KiB
/// copy-then-crc does 4.6 M/s and crc-then-copy 3.9; for 64 KiB
/// crc-then-copy does 0.33 M/s and copy-then-crc 0.28 (the CRC streams
/// from DRAM faster than the copy loads, and the copy then reads L2).
const CRC_FIRST_MIN: usize = 32 * 1024;

/// An instruction set the kernels are built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Portable: `core::ptr` copies and fills, slice comparison.
    Scalar,
    /// x86_64 AVX2, 32-byte vectors.
    Avx2,
    /// x86_64 AVX-512F, 64-byte vectors.
    Avx512,
}

impl Isa {
    /// Every ISA, slowest first.
    pub const ALL: [Isa; 3] = [Isa::Scalar, Isa::Avx2, Isa::Avx512];

    /// Short lower-case name: "scalar", "avx2", "avx512".
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Whether this CPU runs the ISA's kernels.
    pub fn is_supported(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("avx512f")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 => false,
        }
    }
}

/// `(dst, dst2, src, len, nt)`: copy to `dst`, and to `dst2` for dualcast.
type CopyFn = unsafe fn(*mut u8, *mut u8, *const u8, usize, bool);
/// `(dst, src, len, ahead, ahead_len)`: see [`Kernels::copy_ahead`].
type CopyAheadFn = unsafe fn(*mut u8, *const u8, usize, *const u8, usize);
/// `(dst, byte, len, nt)`.
type FillFn = unsafe fn(*mut u8, u8, usize, bool);
/// `(a, b, len) -> equal`.
type CompareFn = unsafe fn(*const u8, *const u8, usize) -> bool;

/// One ISA's kernels. Obtain the best for this CPU with [`Kernels::get`]
/// (a `&'static`, cheap to keep in a channel).
#[derive(Debug)]
pub struct Kernels {
    isa: Isa,
    copy: CopyFn,
    copy_ahead: CopyAheadFn,
    dualcast: CopyFn,
    fill: FillFn,
    compare: CompareFn,
}

static SCALAR: Kernels = Kernels {
    isa: Isa::Scalar,
    copy: scalar::copy,
    copy_ahead: scalar::copy_ahead,
    dualcast: scalar::dualcast,
    fill: scalar::fill,
    compare: scalar::compare,
};

#[cfg(target_arch = "x86_64")]
static AVX2: Kernels = Kernels {
    isa: Isa::Avx2,
    copy: x86::avx2::copy_impl::<false>,
    copy_ahead: x86::avx2::copy_ahead_impl,
    dualcast: x86::avx2::copy_impl::<true>,
    fill: x86::avx2::fill_impl,
    compare: x86::avx2::compare_impl,
};

#[cfg(target_arch = "x86_64")]
static AVX512: Kernels = Kernels {
    isa: Isa::Avx512,
    copy: x86::avx512::copy_impl::<false>,
    copy_ahead: x86::avx512::copy_ahead_impl,
    dualcast: x86::avx512::copy_impl::<true>,
    fill: x86::avx512::fill_impl,
    compare: x86::avx512::compare_impl,
};

impl Kernels {
    /// The fastest set this CPU supports, detected at the first call.
    pub fn get() -> &'static Kernels {
        static BEST: OnceLock<&'static Kernels> = OnceLock::new();
        BEST.get_or_init(|| {
            [Isa::Avx512, Isa::Avx2]
                .into_iter()
                .find_map(Kernels::with_isa)
                .unwrap_or(&SCALAR)
        })
    }

    /// The set for `isa`, if this CPU supports it.
    pub fn with_isa(isa: Isa) -> Option<&'static Kernels> {
        if !isa.is_supported() {
            return None;
        }
        match isa {
            Isa::Scalar => Some(&SCALAR),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => Some(&AVX2),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Some(&AVX512),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 => None,
        }
    }

    /// The ISA of this set.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Short name of the ISA: "avx512", "avx2" or "scalar".
    pub fn name(&self) -> &'static str {
        self.isa.name()
    }

    /// Copies `len` bytes from `src` to `dst`.
    ///
    /// # Safety
    ///
    /// Unless `len` is 0: `src` valid for reads and `dst` valid for writes
    /// of `len` bytes, the two ranges not overlapping, and no other thread
    /// or device writing either range (or reading `dst`) until this returns.
    /// No alignment is required.
    #[inline]
    pub unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.copy_with(dst, src, len, len >= NT_THRESHOLD) }
    }

    /// [`Kernels::copy`] with non-temporal stores for the bulk of the
    /// range (AVX2 and AVX-512 sets, lengths above 8 vectors), left
    /// unfenced, so that a run of them pays for one fence: the caller
    /// calls [`Kernels::fence`] after the last, before anyone (itself
    /// included) reads or writes the destinations, or learns that they are
    /// written.
    ///
    /// # Safety
    ///
    /// As for [`Kernels::copy`], and the fence above.
    #[inline]
    pub unsafe fn copy_streaming(&self, dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: as in `copy`; the fence is the caller's.
        unsafe { (self.copy)(dst, dst, src, len, true) }
    }

    /// Makes every earlier non-temporal store of this thread globally
    /// visible before any later store (`sfence`; nothing on other
    /// architectures, whose sets never stream). Costs about a DRAM write
    /// latency when stores are pending: one per run of
    /// [`Kernels::copy_streaming`] and [`Kernels::fill_streaming`] calls,
    /// not one per call (measured on Zen 5, bdev-perf on a 1 GiB malloc
    /// device, 4 KiB random writes: 2.9 M IOPS fencing each copy, 10.5 M
    /// fencing each batch).
    #[inline]
    pub fn fence(&self) {
        #[cfg(target_arch = "x86_64")]
        if self.isa != Isa::Scalar {
            // SAFETY: sfence has no operands and no precondition.
            unsafe { core::arch::x86_64::_mm_sfence() }
        }
    }

    /// Fences after a kernel call that streamed (`nt`).
    #[inline]
    fn fence_if(&self, nt: bool) {
        if nt {
            self.fence();
        }
    }

    /// [`Kernels::copy`] with temporal stores that meanwhile starts pulling
    /// `ahead_len` bytes at `ahead` (the next task's source) toward the core,
    /// spreading the prefetches over its copy loop, one cache line per 64
    /// bytes copied (the AVX2 and AVX-512 sets, for copies above 8 vectors
    /// and below `rep movsb`'s threshold; otherwise they are issued after
    /// the copy; the scalar set issues none). Measured on Zen 5 with
    /// bdev-perf on malloc (4 KiB random reads, one core,
    /// docs/performance.md): the same 64 prefetches issued in one burst
    /// before the copy gained a fraction of what they gain spread out.
    ///
    /// # Safety
    ///
    /// As for [`Kernels::copy`]; `ahead` may be any address (prefetches
    /// never fault).
    #[inline]
    pub unsafe fn copy_ahead(
        &self,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        ahead: *const u8,
        ahead_len: usize,
    ) {
        // SAFETY: as in `copy`.
        unsafe { (self.copy_ahead)(dst, src, len, ahead, ahead_len) }
    }

    /// Writes `byte` to `len` bytes at `dst`.
    ///
    /// # Safety
    ///
    /// Unless `len` is 0: `dst` valid for writes of `len` bytes, and no
    /// other thread or device accessing that range until this returns.
    #[inline]
    pub unsafe fn fill(&self, dst: *mut u8, byte: u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.fill_with(dst, byte, len, len >= NT_THRESHOLD) }
    }

    /// [`Kernels::fill`] with non-temporal stores, left unfenced, as for
    /// [`Kernels::copy_streaming`].
    ///
    /// # Safety
    ///
    /// As for [`Kernels::fill`], and the fence of
    /// [`Kernels::copy_streaming`].
    #[inline]
    pub unsafe fn fill_streaming(&self, dst: *mut u8, byte: u8, len: usize) {
        // SAFETY: as in `copy`; the fence is the caller's.
        unsafe { (self.fill)(dst, byte, len, true) }
    }

    /// [`Kernels::copy`] with the store kind chosen by the caller instead of
    /// by [`NT_THRESHOLD`]: `nt` asks for non-temporal stores (honoured by
    /// the AVX2 and AVX-512 sets for lengths above 8 vectors). For a caller
    /// that knows better than the length, e.g. a destination read right
    /// away; the benchmark's threshold sweep uses it.
    ///
    /// # Safety
    ///
    /// As for [`Kernels::copy`].
    #[inline]
    pub unsafe fn copy_with(&self, dst: *mut u8, src: *const u8, len: usize, nt: bool) {
        // SAFETY: the caller's contract is the kernel's; the function
        // pointer belongs to an ISA that `with_isa` checked this CPU runs.
        unsafe { (self.copy)(dst, dst, src, len, nt) }
        self.fence_if(nt);
    }

    /// [`Kernels::fill`] with the store kind chosen by the caller, as for
    /// [`Kernels::copy_with`].
    ///
    /// # Safety
    ///
    /// As for [`Kernels::fill`].
    #[inline]
    pub unsafe fn fill_with(&self, dst: *mut u8, byte: u8, len: usize, nt: bool) {
        // SAFETY: as in `copy`.
        unsafe { (self.fill)(dst, byte, len, nt) }
        self.fence_if(nt);
    }

    /// Whether `len` bytes at `a` and `b` are equal (true for `len` 0).
    ///
    /// # Safety
    ///
    /// Unless `len` is 0: `a` and `b` valid for reads of `len` bytes (they
    /// may overlap), not written by anyone until this returns.
    #[inline]
    pub unsafe fn compare(&self, a: *const u8, b: *const u8, len: usize) -> bool {
        // SAFETY: as in `copy`.
        unsafe { (self.compare)(a, b, len) }
    }

    /// Copies `len` bytes from `src` to both `dst1` and `dst2`, reading the
    /// source once (AVX2 and AVX-512 sets).
    ///
    /// # Safety
    ///
    /// Unless `len` is 0: `src` valid for reads and `dst1`, `dst2` valid for
    /// writes of `len` bytes, none of the three ranges overlapping, and no
    /// other thread or device accessing them until this returns (reads of
    /// `src` excepted). No alignment is required here; SPDK's 4 KiB rule for
    /// dualcast belongs to the framework's argument checks.
    #[inline]
    pub unsafe fn dualcast(&self, dst1: *mut u8, dst2: *mut u8, src: *const u8, len: usize) {
        let nt = len >= NT_THRESHOLD;
        // SAFETY: as in `copy`.
        unsafe { (self.dualcast)(dst1, dst2, src, len, nt) }
        self.fence_if(nt);
    }

    /// Copies `len` bytes from `src` to `dst` and returns
    /// [`crc32c_update`]`(crc, src[..len])`. Works in 64 KiB steps, each a
    /// copy and a CRC of the same bytes (in the order that measured faster
    /// for the step's length), the second reading what the first brought
    /// into cache, so the source crosses the memory bus once. A fused loop
    /// would not pay: it would be bound by the `crc32` instruction, whose
    /// 3-stream form (the `crc32c` crate) does 27 GB/s at 4 KiB here against
    /// 55-64 GB/s for `crc-fast`'s carry-less folding, while a 4 KiB copy
    /// runs at 240 GB/s.
    ///
    /// # Safety
    ///
    /// As for [`Kernels::copy`].
    #[inline]
    pub unsafe fn copy_crc32c(&self, dst: *mut u8, src: *const u8, len: usize, crc: u32) -> u32 {
        // SAFETY: the caller's contract.
        unsafe { self.copy_crc32c_with(dst, src, len, crc, len >= NT_THRESHOLD) }
    }

    /// [`Kernels::copy_crc32c`] with the store kind chosen by the caller,
    /// as for [`Kernels::copy_with`] (the guard-page tests force both).
    ///
    /// # Safety
    ///
    /// As for [`Kernels::copy`].
    #[inline]
    unsafe fn copy_crc32c_with(
        &self,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        crc: u32,
        nt: bool,
    ) -> u32 {
        let mut crc = crc;
        let mut off = 0;
        while off < len {
            let n = (len - off).min(CRC_CHUNK);
            // SAFETY: off + n <= len, so both sub-ranges lie within the
            // ranges of the caller's contract; the source is not written
            // meanwhile, so a shared slice over it is sound.
            unsafe {
                let step = std::slice::from_raw_parts(src.add(off), n);
                if n >= CRC_FIRST_MIN {
                    crc = crc32c_update(crc, step);
                    (self.copy)(dst.add(off), dst.add(off), src.add(off), n, nt);
                } else {
                    (self.copy)(dst.add(off), dst.add(off), src.add(off), n, nt);
                    crc = crc32c_update(crc, step);
                }
            }
            off += n;
        }
        self.fence_if(nt);
        crc
    }
}

/// Standard CRC-32C of `data` continued from `crc` (0 to start); see the
/// module doc for the convention and its relation to SPDK's.
#[inline]
pub fn crc32c_update(crc: u32, data: &[u8]) -> u32 {
    if crc == 0 {
        // The preset register of a fresh CRC is what `!0` gives below; this
        // entry skips the Digest set-up, worth ~5 ns at 512 bytes.
        return crc_fast::crc32_iscsi(data);
    }
    let mut digest =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(data);
    digest.finalize() as u32
}

/// The portable set: the compiler's intrinsics, so the C library's
/// memcpy/memset/memcmp.
mod scalar {
    /// # Safety
    ///
    /// As for [`super::Kernels::copy`].
    pub(super) unsafe fn copy(dst: *mut u8, _dst2: *mut u8, src: *const u8, len: usize, _: bool) {
        if len != 0 {
            // SAFETY: len > 0, so the caller vouches for both ranges, which
            // do not overlap.
            unsafe { core::ptr::copy_nonoverlapping(src, dst, len) }
        }
    }

    /// # Safety
    ///
    /// As for [`super::Kernels::copy_ahead`].
    pub(super) unsafe fn copy_ahead(
        dst: *mut u8,
        src: *const u8,
        len: usize,
        _ahead: *const u8,
        _ahead_len: usize,
    ) {
        // SAFETY: the same contract.
        unsafe { copy(dst, dst, src, len, false) }
    }

    /// # Safety
    ///
    /// As for [`super::Kernels::dualcast`].
    pub(super) unsafe fn dualcast(
        dst: *mut u8,
        dst2: *mut u8,
        src: *const u8,
        len: usize,
        _: bool,
    ) {
        if len != 0 {
            // SAFETY: as in `copy`, for each destination.
            unsafe {
                core::ptr::copy_nonoverlapping(src, dst, len);
                core::ptr::copy_nonoverlapping(src, dst2, len);
            }
        }
    }

    /// # Safety
    ///
    /// As for [`super::Kernels::fill`].
    pub(super) unsafe fn fill(dst: *mut u8, byte: u8, len: usize, _: bool) {
        if len != 0 {
            // SAFETY: len > 0, so dst is valid for len bytes of writes.
            unsafe { core::ptr::write_bytes(dst, byte, len) }
        }
    }

    /// # Safety
    ///
    /// As for [`super::Kernels::compare`].
    pub(super) unsafe fn compare(a: *const u8, b: *const u8, len: usize) -> bool {
        if len == 0 {
            return true;
        }
        // SAFETY: len > 0, so both ranges are readable and unwritten until
        // we return: shared slices over them are sound for this call.
        unsafe { core::slice::from_raw_parts(a, len) == core::slice::from_raw_parts(b, len) }
    }
}
