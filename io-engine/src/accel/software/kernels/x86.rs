//! x86_64 kernels: AVX2 (32-byte vectors) and AVX-512 (64-byte vectors).
//!
//! Both ISAs share one algorithm, written once in [`vector_kernels!`] over a
//! handful of per-ISA primitives, and the same small-size code (up to 64
//! bytes, in [`small`]). Shape of every kernel, by length:
//!
//! - up to 64 bytes: two overlapping loads/stores of the largest power of two
//!   not above the length (1, 2, 4, 8, 16 or 32 bytes), so no byte loop and
//!   no write outside `[dst, dst + len)`;
//! - up to 8 vectors (AVX2: 16, so 512 bytes either way): straight-line
//!   code, first half and last half of the range, overlapping in the middle;
//! - longer: one unaligned vector at the head, then 4-vector steps with the
//!   destination aligned to the vector size (so a step never splits a
//!   cache line on the store side), then the last 4 vectors of the range,
//!   overlapping the previous step. With `nt` (and a `dst2` aligned like
//!   `dst`), every whole vector from the first aligned offset is streamed
//!   once instead (non-temporal stores, 4 vectors a step, then single
//!   vectors), and only an unaligned head and a partial last vector are
//!   stored normally; the streamed stores are left unfenced: `Kernels`
//!   fences them, or leaves that to its caller (`Kernels::fence`).
//!   Without `nt`, a plain copy from
//!   [`REP_MOVSB_MIN`] bytes is `rep movsb` instead, which is faster once the
//!   buffers outgrow L1.
//!
//! `copy_ahead_impl` is the temporal copy above with prefetches of another
//! range (the next task's source) spread over its 4-vector steps.
//!
//! Thread: whichever calls them; no state.

/// Length from which a copy with temporal stores is left to `rep movsb` on
/// CPUs with ERMS. Measured on Zen 5 (`benches/accel_kernels.rs`, store
/// sweep): at 16 KiB the vector loop does 251 GB/s with both buffers in L1
/// against 143 for `rep movsb`; from 32 KiB, once source and destination no
/// longer fit in L1, `rep movsb` wins (164 against 100 GB/s from L2, and
/// 25 against 23 from DRAM).
pub(super) const REP_MOVSB_MIN: usize = 32 * 1024;

/// Whether the CPU has enhanced `rep movsb` (std caches the answer).
#[inline]
fn has_ermsb() -> bool {
    std::arch::is_x86_feature_detected!("ermsb")
}

/// `rep movsb`: the CPU's microcoded copy, which on ERMS parts writes
/// whole lines without reading them first.
///
/// # Safety
///
/// `src` readable and `dst` writable for `len` bytes, not overlapping.
#[inline]
unsafe fn rep_movsb(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the instruction reads exactly [src, src + len) and writes
    // exactly [dst, dst + len), forwards since the ABI keeps the direction
    // flag clear; the caller vouches for both ranges.
    unsafe {
        core::arch::asm!(
            "rep movsb",
            inout("rcx") len => _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags)
        );
    }
}

/// Up to 64 bytes, shared by both ISAs (SSE2/AVX2 only; AVX-512 code calls
/// these and inlines them, since its feature set includes AVX2).
pub(super) mod small {
    use core::arch::x86_64::*;
    use core::ops::{BitOr, BitXor};

    /// Copies `len <= 64` bytes from `src` to `dst` (and to `dst2` when
    /// `DUAL`), loading every source byte once.
    ///
    /// # Safety
    ///
    /// `src` readable and `dst` (and `dst2` when `DUAL`) writable for `len`
    /// bytes, destinations not overlapping the source; AVX2 available.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn copy_le64<const DUAL: bool>(
        dst: *mut u8,
        dst2: *mut u8,
        src: *const u8,
        len: usize,
    ) {
        debug_assert!(len <= 64);
        // SAFETY: every access below is at an offset in [0, len - width] for
        // a width <= len, so it stays within the ranges the caller vouched
        // for; unaligned accessors are used throughout.
        unsafe {
            if len >= 32 {
                let a = _mm256_loadu_si256(src.cast());
                let b = _mm256_loadu_si256(src.add(len - 32).cast());
                _mm256_storeu_si256(dst.cast(), a);
                _mm256_storeu_si256(dst.add(len - 32).cast(), b);
                if DUAL {
                    _mm256_storeu_si256(dst2.cast(), a);
                    _mm256_storeu_si256(dst2.add(len - 32).cast(), b);
                }
            } else if len >= 16 {
                let a = _mm_loadu_si128(src.cast());
                let b = _mm_loadu_si128(src.add(len - 16).cast());
                _mm_storeu_si128(dst.cast(), a);
                _mm_storeu_si128(dst.add(len - 16).cast(), b);
                if DUAL {
                    _mm_storeu_si128(dst2.cast(), a);
                    _mm_storeu_si128(dst2.add(len - 16).cast(), b);
                }
            } else if len >= 8 {
                pair::<u64, DUAL>(dst, dst2, src, len);
            } else if len >= 4 {
                pair::<u32, DUAL>(dst, dst2, src, len);
            } else if len >= 2 {
                pair::<u16, DUAL>(dst, dst2, src, len);
            } else if len == 1 {
                let a = *src;
                *dst = a;
                if DUAL {
                    *dst2 = a;
                }
            }
        }
    }

    /// Two overlapping `T`s: the first and the last of `len` bytes.
    ///
    /// # Safety
    ///
    /// `size_of::<T>() <= len <= 2 * size_of::<T>()`, and the ranges as for
    /// [`copy_le64`].
    #[inline(always)]
    unsafe fn pair<T: Copy, const DUAL: bool>(
        dst: *mut u8,
        dst2: *mut u8,
        src: *const u8,
        len: usize,
    ) {
        let w = size_of::<T>();
        // SAFETY: w <= len, so offsets 0 and len - w are in range for a
        // w-byte unaligned access.
        unsafe {
            let a = src.cast::<T>().read_unaligned();
            let b = src.add(len - w).cast::<T>().read_unaligned();
            dst.cast::<T>().write_unaligned(a);
            dst.add(len - w).cast::<T>().write_unaligned(b);
            if DUAL {
                dst2.cast::<T>().write_unaligned(a);
                dst2.add(len - w).cast::<T>().write_unaligned(b);
            }
        }
    }

    /// Fills `len <= 64` bytes at `dst` with `byte`.
    ///
    /// # Safety
    ///
    /// `dst` writable for `len` bytes; AVX2 available.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn fill_le64(dst: *mut u8, byte: u8, len: usize) {
        debug_assert!(len <= 64);
        let p64 = u64::from(byte) * 0x0101_0101_0101_0101;
        // SAFETY: as in copy_le64, each store lies in [dst, dst + len).
        unsafe {
            if len >= 32 {
                let v = _mm256_set1_epi8(byte as i8);
                _mm256_storeu_si256(dst.cast(), v);
                _mm256_storeu_si256(dst.add(len - 32).cast(), v);
            } else if len >= 16 {
                let v = _mm_set1_epi8(byte as i8);
                _mm_storeu_si128(dst.cast(), v);
                _mm_storeu_si128(dst.add(len - 16).cast(), v);
            } else if len >= 8 {
                dst.cast::<u64>().write_unaligned(p64);
                dst.add(len - 8).cast::<u64>().write_unaligned(p64);
            } else if len >= 4 {
                dst.cast::<u32>().write_unaligned(p64 as u32);
                dst.add(len - 4).cast::<u32>().write_unaligned(p64 as u32);
            } else if len >= 2 {
                dst.cast::<u16>().write_unaligned(p64 as u16);
                dst.add(len - 2).cast::<u16>().write_unaligned(p64 as u16);
            } else if len == 1 {
                *dst = byte;
            }
        }
    }

    /// Whether `len <= 64` bytes at `a` and `b` are equal.
    ///
    /// # Safety
    ///
    /// `a` and `b` readable for `len` bytes; AVX2 available.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn eq_le64(a: *const u8, b: *const u8, len: usize) -> bool {
        debug_assert!(len <= 64);
        // SAFETY: as in copy_le64, each load lies in [a|b, a|b + len).
        unsafe {
            if len >= 32 {
                let x0 =
                    _mm256_xor_si256(_mm256_loadu_si256(a.cast()), _mm256_loadu_si256(b.cast()));
                let x1 = _mm256_xor_si256(
                    _mm256_loadu_si256(a.add(len - 32).cast()),
                    _mm256_loadu_si256(b.add(len - 32).cast()),
                );
                let x = _mm256_or_si256(x0, x1);
                _mm256_testz_si256(x, x) != 0
            } else if len >= 16 {
                let x0 = _mm_xor_si128(_mm_loadu_si128(a.cast()), _mm_loadu_si128(b.cast()));
                let x1 = _mm_xor_si128(
                    _mm_loadu_si128(a.add(len - 16).cast()),
                    _mm_loadu_si128(b.add(len - 16).cast()),
                );
                let x = _mm_or_si128(x0, x1);
                _mm_testz_si128(x, x) != 0
            } else if len >= 8 {
                eq_pair::<u64>(a, b, len)
            } else if len >= 4 {
                eq_pair::<u32>(a, b, len)
            } else if len >= 2 {
                eq_pair::<u16>(a, b, len)
            } else if len == 1 {
                *a == *b
            } else {
                true
            }
        }
    }

    /// Compares the first and last `T` of `len` bytes, branch-free.
    ///
    /// # Safety
    ///
    /// `size_of::<T>() <= len`, and the ranges as for [`eq_le64`].
    #[inline(always)]
    unsafe fn eq_pair<T>(a: *const u8, b: *const u8, len: usize) -> bool
    where
        T: Copy + Default + PartialEq + BitOr<Output = T> + BitXor<Output = T>,
    {
        let w = size_of::<T>();
        // SAFETY: w <= len, so offsets 0 and len - w are in range.
        unsafe {
            let x0 = a.cast::<T>().read_unaligned() ^ b.cast::<T>().read_unaligned();
            let x1 = a.add(len - w).cast::<T>().read_unaligned()
                ^ b.add(len - w).cast::<T>().read_unaligned();
            (x0 | x1) == T::default()
        }
    }
}

/// The vector algorithm, instantiated per ISA inside a module that defines
/// `V` (vector bytes), `type Vector`, and the primitives `load`, `store`,
/// `stream`, `splat`, `ne` (bitwise difference, nonzero where unequal),
/// `or` and `any` (true if any bit is set), all `#[inline]` with the ISA's
/// target features so they inline into the kernels below.
macro_rules! vector_kernels {
    ($features:literal) => {
        /// Copies `len` bytes from `src` to `dst` and, when `DUAL`, to
        /// `dst2` too, loading every source vector once; `nt` asks for
        /// non-temporal stores on the bulk of a long range.
        ///
        /// # Safety
        ///
        /// `src` readable and `dst` (and `dst2` when `DUAL`) writable for
        /// `len` bytes, no destination overlapping the source; the CPU has
        /// this module's features.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn copy_impl<const DUAL: bool>(
            dst: *mut u8,
            dst2: *mut u8,
            src: *const u8,
            len: usize,
            nt: bool,
        ) {
            // SAFETY: (whole body) every load is at an offset o of src and
            // every store at the same o of dst/dst2 with o + width <= len,
            // as each branch's bounds show; stream() is only called at
            // offsets where dst (and dst2) are V-aligned.
            unsafe {
                if len <= 64 {
                    return super::small::copy_le64::<DUAL>(dst, dst2, src, len);
                }
                if len <= 2 * V {
                    let (a, b) = (load(src), load(src.add(len - V)));
                    put::<DUAL>(dst, dst2, 0, a);
                    put::<DUAL>(dst, dst2, len - V, b);
                    return;
                }
                if len <= 4 * V {
                    let t = len - 2 * V;
                    let v = [
                        load(src),
                        load(src.add(V)),
                        load(src.add(t)),
                        load(src.add(t + V)),
                    ];
                    put::<DUAL>(dst, dst2, 0, v[0]);
                    put::<DUAL>(dst, dst2, V, v[1]);
                    put::<DUAL>(dst, dst2, t, v[2]);
                    put::<DUAL>(dst, dst2, t + V, v[3]);
                    return;
                }
                if len <= 8 * V {
                    let t = len - 4 * V;
                    let h = load4(src);
                    let l = load4(src.add(t));
                    put4::<DUAL>(dst, dst2, 0, h);
                    put4::<DUAL>(dst, dst2, t, l);
                    return;
                }
                if V < 64 && len <= 16 * V {
                    // AVX2 up to 512 bytes: straight-line too.
                    let t = len - 8 * V;
                    let h = [load4(src), load4(src.add(4 * V))];
                    let l = [load4(src.add(t)), load4(src.add(t + 4 * V))];
                    put4::<DUAL>(dst, dst2, 0, h[0]);
                    put4::<DUAL>(dst, dst2, 4 * V, h[1]);
                    put4::<DUAL>(dst, dst2, t, l[0]);
                    put4::<DUAL>(dst, dst2, t + 4 * V, l[1]);
                    return;
                }
                if !DUAL && !nt && len >= super::REP_MOVSB_MIN && super::has_ermsb() {
                    return super::rep_movsb(dst, src, len);
                }
                let same_align = !DUAL || (dst as usize ^ dst2 as usize) & (V - 1) == 0;
                if nt && same_align {
                    // Streamed: every whole vector of the aligned part
                    // exactly once. An unaligned head and a partial last
                    // vector are stored temporally, and those two stores
                    // overlap the first and the last streamed vector: up
                    // to two lines are written both ways. That is correct
                    // (both stores write the same bytes, and the fence
                    // after the kernel orders them before anyone learns
                    // the copy is done) and costs little (a temporal
                    // store to a line still in a write-combining buffer
                    // waits for it to drain, at most twice a call).
                    let mut off = (V - (dst as usize & (V - 1))) & (V - 1);
                    if off != 0 {
                        put::<DUAL>(dst, dst2, 0, load(src));
                    }
                    while off + 4 * V <= len {
                        let v = load4(src.add(off));
                        stream4(dst.add(off), v);
                        if DUAL {
                            stream4(dst2.add(off), v);
                        }
                        off += 4 * V;
                    }
                    while off + V <= len {
                        let v = load(src.add(off));
                        stream(dst.add(off), v);
                        if DUAL {
                            stream(dst2.add(off), v);
                        }
                        off += V;
                    }
                    if off < len {
                        put::<DUAL>(dst, dst2, len - V, load(src.add(len - V)));
                    }
                    return;
                }
                temporal_steps::<DUAL>(dst, dst2, src, len, core::ptr::null(), 0);
            }
        }

        /// The temporal copy of more than 8 vectors: one unaligned vector
        /// at the head, 4-vector steps from the first V-aligned offset of
        /// `dst`, and the last 4 vectors, overlapping the last step.
        /// Meanwhile it issues one `prefetchnta` of `ahead` per 64 bytes
        /// copied, up to `ahead_len` bytes (none for 0: inlined with a
        /// constant 0, the prefetch loop is gone), and returns how many
        /// bytes of `ahead` it covered.
        ///
        /// # Safety
        ///
        /// As for `copy_impl`, with `len > 8 * V`; `ahead` may be any
        /// address (prefetches never fault).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn temporal_steps<const DUAL: bool>(
            dst: *mut u8,
            dst2: *mut u8,
            src: *const u8,
            len: usize,
            ahead: *const i8,
            ahead_len: usize,
        ) -> usize {
            use core::arch::x86_64::{_MM_HINT_NTA, _mm_prefetch};
            let mut next = 0;
            // SAFETY: (whole body) every load and store is at an offset o
            // of src/dst/dst2 with o + 4 * V <= len (len > 8 * V); the
            // prefetches have no architectural effect.
            unsafe {
                put::<DUAL>(dst, dst2, 0, load(src));
                let mut off = V - (dst as usize & (V - 1));
                let last = len - 4 * V;
                while off < last {
                    put4::<DUAL>(dst, dst2, off, load4(src.add(off)));
                    let mut k = 0;
                    while k < 4 * V && next < ahead_len {
                        _mm_prefetch::<_MM_HINT_NTA>(ahead.wrapping_add(next));
                        next += 64;
                        k += 64;
                    }
                    off += 4 * V;
                }
                put4::<DUAL>(dst, dst2, last, load4(src.add(last)));
            }
            next
        }

        /// A plain copy (temporal stores) that meanwhile starts pulling
        /// `ahead_len` bytes at `ahead` toward the core (`prefetchnta`),
        /// one line for each 64 bytes it copies, in its own loop: a burst
        /// of prefetches ahead of the copy loses some of them (see
        /// `Kernels::copy_ahead`). Lines not issued by the end of the loop
        /// are issued after it.
        ///
        /// # Safety
        ///
        /// As for `copy_impl::<false>`; `ahead` may be any address
        /// (prefetches never fault).
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn copy_ahead_impl(
            dst: *mut u8,
            src: *const u8,
            len: usize,
            ahead: *const u8,
            ahead_len: usize,
        ) {
            use core::arch::x86_64::{_MM_HINT_NTA, _mm_prefetch};
            let ahead = ahead as *const i8;
            // SAFETY: the callees' contracts, which are this one's (the
            // first only for len > 8 * V); prefetches have no
            // architectural effect.
            unsafe {
                let mut next = if len > 8 * V && len < super::REP_MOVSB_MIN {
                    temporal_steps::<false>(dst, dst, src, len, ahead, ahead_len)
                } else {
                    copy_impl::<false>(dst, dst, src, len, false);
                    0
                };
                while next < ahead_len {
                    _mm_prefetch::<_MM_HINT_NTA>(ahead.wrapping_add(next));
                    next += 64;
                }
            }
        }

        /// Fills `len` bytes at `dst` with `byte`; `nt` asks for
        /// non-temporal stores on the bulk of a long range.
        ///
        /// # Safety
        ///
        /// `dst` writable for `len` bytes; the CPU has this module's
        /// features.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn fill_impl(dst: *mut u8, byte: u8, len: usize, nt: bool) {
            // SAFETY: (whole body) every store is at an offset o with
            // o + width <= len; stream() only at V-aligned addresses.
            unsafe {
                if len <= 64 {
                    return super::small::fill_le64(dst, byte, len);
                }
                let v = splat(byte);
                if len <= 2 * V {
                    store(dst, v);
                    store(dst.add(len - V), v);
                    return;
                }
                if len <= 4 * V {
                    let t = len - 2 * V;
                    store(dst, v);
                    store(dst.add(V), v);
                    store(dst.add(t), v);
                    store(dst.add(t + V), v);
                    return;
                }
                let v4 = [v; 4];
                if len <= 8 * V {
                    store4(dst, v4);
                    store4(dst.add(len - 4 * V), v4);
                    return;
                }
                if nt {
                    // Every whole vector of the aligned part streamed once,
                    // the head and the last partial vector stored
                    // temporally over the first and last of them, as in
                    // `copy_impl`.
                    let mut off = (V - (dst as usize & (V - 1))) & (V - 1);
                    if off != 0 {
                        store(dst, v);
                    }
                    while off + 4 * V <= len {
                        stream4(dst.add(off), v4);
                        off += 4 * V;
                    }
                    while off + V <= len {
                        stream(dst.add(off), v);
                        off += V;
                    }
                    if off < len {
                        store(dst.add(len - V), v);
                    }
                    return;
                }
                store(dst, v);
                let mut off = V - (dst as usize & (V - 1));
                let last = len - 4 * V;
                while off < last {
                    store4(dst.add(off), v4);
                    off += 4 * V;
                }
                store4(dst.add(last), v4);
            }
        }

        /// Whether `len` bytes at `a` and `b` are equal; returns at the
        /// first 4-vector step that differs.
        ///
        /// # Safety
        ///
        /// `a` and `b` readable for `len` bytes; the CPU has this module's
        /// features.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn compare_impl(a: *const u8, b: *const u8, len: usize) -> bool {
            // SAFETY: (whole body) every load is at an offset o of a and b
            // with o + width <= len.
            unsafe {
                if len <= 64 {
                    return super::small::eq_le64(a, b, len);
                }
                if len <= 2 * V {
                    let t = len - V;
                    let x = or(ne(load(a), load(b)), ne(load(a.add(t)), load(b.add(t))));
                    return !any(x);
                }
                if len <= 4 * V {
                    let t = len - 2 * V;
                    let x = or(
                        or(ne(load(a), load(b)), ne(load(a.add(V)), load(b.add(V)))),
                        or(
                            ne(load(a.add(t)), load(b.add(t))),
                            ne(load(a.add(t + V)), load(b.add(t + V))),
                        ),
                    );
                    return !any(x);
                }
                let mut off = 0;
                let last = len - 4 * V;
                while off < last {
                    if differ4(a.add(off), b.add(off)) {
                        return false;
                    }
                    off += 4 * V;
                }
                !differ4(a.add(last), b.add(last))
            }
        }

        /// Stores `v` at offset `off` of `dst`, and of `dst2` when `DUAL`.
        ///
        /// # Safety
        ///
        /// `off + V` bytes writable at the destinations.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn put<const DUAL: bool>(dst: *mut u8, dst2: *mut u8, off: usize, v: Vector) {
            // SAFETY: the caller's contract.
            unsafe {
                store(dst.add(off), v);
                if DUAL {
                    store(dst2.add(off), v);
                }
            }
        }

        /// [`put`] of four consecutive vectors.
        ///
        /// # Safety
        ///
        /// `off + 4 * V` bytes writable at the destinations.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn put4<const DUAL: bool>(dst: *mut u8, dst2: *mut u8, off: usize, v: [Vector; 4]) {
            // SAFETY: the caller's contract.
            unsafe {
                store4(dst.add(off), v);
                if DUAL {
                    store4(dst2.add(off), v);
                }
            }
        }

        /// Four consecutive unaligned loads.
        ///
        /// # Safety
        ///
        /// `4 * V` bytes readable at `p`.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn load4(p: *const u8) -> [Vector; 4] {
            // SAFETY: the caller's contract.
            unsafe {
                [
                    load(p),
                    load(p.add(V)),
                    load(p.add(2 * V)),
                    load(p.add(3 * V)),
                ]
            }
        }

        /// Four consecutive unaligned stores.
        ///
        /// # Safety
        ///
        /// `4 * V` bytes writable at `p`.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn store4(p: *mut u8, v: [Vector; 4]) {
            // SAFETY: the caller's contract.
            unsafe {
                store(p, v[0]);
                store(p.add(V), v[1]);
                store(p.add(2 * V), v[2]);
                store(p.add(3 * V), v[3]);
            }
        }

        /// Four consecutive non-temporal stores.
        ///
        /// # Safety
        ///
        /// `4 * V` bytes writable at `p`, `p` aligned to `V`.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn stream4(p: *mut u8, v: [Vector; 4]) {
            // SAFETY: the caller's contract.
            unsafe {
                stream(p, v[0]);
                stream(p.add(V), v[1]);
                stream(p.add(2 * V), v[2]);
                stream(p.add(3 * V), v[3]);
            }
        }

        /// Whether `4 * V` bytes at `a` and `b` differ.
        ///
        /// # Safety
        ///
        /// `4 * V` bytes readable at `a` and `b`.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn differ4(a: *const u8, b: *const u8) -> bool {
            // SAFETY: the caller's contract.
            unsafe {
                let x = load4(a);
                let y = load4(b);
                any(or(
                    or(ne(x[0], y[0]), ne(x[1], y[1])),
                    or(ne(x[2], y[2]), ne(x[3], y[3])),
                ))
            }
        }
    };
}

/// 32-byte vectors.
pub(super) mod avx2 {
    use core::arch::x86_64::*;

    /// Vector bytes.
    const V: usize = 32;
    type Vector = __m256i;

    /// # Safety
    ///
    /// `V` bytes readable at `p`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load(p: *const u8) -> Vector {
        // SAFETY: the caller's contract; unaligned load.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }

    /// # Safety
    ///
    /// `V` bytes writable at `p`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn store(p: *mut u8, v: Vector) {
        // SAFETY: the caller's contract; unaligned store.
        unsafe { _mm256_storeu_si256(p.cast(), v) }
    }

    /// # Safety
    ///
    /// `V` bytes writable at `p`, `p` aligned to `V`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn stream(p: *mut u8, v: Vector) {
        // SAFETY: the caller's contract (alignment included).
        unsafe { _mm256_stream_si256(p.cast(), v) }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn splat(byte: u8) -> Vector {
        _mm256_set1_epi8(byte as i8)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn ne(a: Vector, b: Vector) -> Vector {
        _mm256_xor_si256(a, b)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn or(a: Vector, b: Vector) -> Vector {
        _mm256_or_si256(a, b)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn any(v: Vector) -> bool {
        _mm256_testz_si256(v, v) == 0
    }

    vector_kernels!("avx2");
}

/// 64-byte vectors. Needs only AVX-512F (whole-register loads, stores,
/// streams, xor/or and a test into a mask register); AVX2 covers the small
/// sizes.
pub(super) mod avx512 {
    use core::arch::x86_64::*;

    /// Vector bytes.
    const V: usize = 64;
    type Vector = __m512i;

    /// # Safety
    ///
    /// `V` bytes readable at `p`.
    #[inline]
    #[target_feature(enable = "avx512f,avx2")]
    unsafe fn load(p: *const u8) -> Vector {
        // SAFETY: the caller's contract; unaligned load.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }

    /// # Safety
    ///
    /// `V` bytes writable at `p`.
    #[inline]
    #[target_feature(enable = "avx512f,avx2")]
    unsafe fn store(p: *mut u8, v: Vector) {
        // SAFETY: the caller's contract; unaligned store.
        unsafe { _mm512_storeu_si512(p.cast(), v) }
    }

    /// # Safety
    ///
    /// `V` bytes writable at `p`, `p` aligned to `V`.
    #[inline]
    #[target_feature(enable = "avx512f,avx2")]
    unsafe fn stream(p: *mut u8, v: Vector) {
        // SAFETY: the caller's contract (alignment included).
        unsafe { _mm512_stream_si512(p.cast(), v) }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx2")]
    fn splat(byte: u8) -> Vector {
        _mm512_set1_epi8(byte as i8)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx2")]
    fn ne(a: Vector, b: Vector) -> Vector {
        _mm512_xor_si512(a, b)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx2")]
    fn or(a: Vector, b: Vector) -> Vector {
        _mm512_or_si512(a, b)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx2")]
    fn any(v: Vector) -> bool {
        _mm512_test_epi64_mask(v, v) != 0
    }

    vector_kernels!("avx512f,avx2");
}
