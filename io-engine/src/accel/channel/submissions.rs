//! The six submission calls (copy, fill, compare, dualcast, crc32c,
//! copy_crc32c), written once for [`Batch`](super::Batch) and for
//! [`Queue`](super::Queue): each sets the fields of a task its opcode
//! reads, and the one build path does the rest.
//!
//! Thread: the channel's, as its callers.

/// The six submission calls, written once for `Batch` (through `add`)
/// and for `Queue` (through `single`, a batch of one).
macro_rules! submissions {
    ($via:ident, $verb:literal $(, $m:tt)?) => {
        #[doc = concat!($verb, " a copy of `len` bytes from `src` to `dst`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn copy(
            &$($m)? self,
            dst: *mut u8,
            src: *const u8,
            len: usize,
            tag: u64,
        ) -> Result<(), AccelError> {
            // SAFETY: the caller's contract, passed on.
            unsafe { self.copy_placed(dst, src, len, Placement::Cache, tag) }
        }

        #[doc = concat!($verb, " a copy of `len` bytes from `src` to `dst`, its stores landing where `placement` asks.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn copy_placed(
            &$($m)? self,
            dst: *mut u8,
            src: *const u8,
            len: usize,
            placement: Placement,
            tag: u64,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Copy, len, tag, |t| {
                t.dst = dst;
                t.src = src;
                t.placement = placement;
            })
        }

        #[doc = concat!($verb, " a fill of `len` bytes at `dst` with `byte`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn fill(
            &$($m)? self,
            dst: *mut u8,
            byte: u8,
            len: usize,
            tag: u64,
        ) -> Result<(), AccelError> {
            // SAFETY: the caller's contract, passed on.
            unsafe { self.fill_placed(dst, byte, len, Placement::Cache, tag) }
        }

        #[doc = concat!($verb, " a fill of `len` bytes at `dst` with `byte`, its stores landing where `placement` asks.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn fill_placed(
            &$($m)? self,
            dst: *mut u8,
            byte: u8,
            len: usize,
            placement: Placement,
            tag: u64,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Fill, len, tag, |t| {
                t.dst = dst;
                t.fill = byte;
                t.placement = placement;
            })
        }

        #[doc = concat!($verb, " a compare of `len` bytes at `a` and `b`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn compare(
            &$($m)? self,
            a: *const u8,
            b: *const u8,
            len: usize,
            tag: u64,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Compare, len, tag, |t| {
                t.src = a;
                t.src2 = b;
            })
        }

        #[doc = concat!($verb, " a dualcast of `len` bytes from `src` to `dst1` and `dst2`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`].
        pub unsafe fn dualcast(
            &$($m)? self,
            dst1: *mut u8,
            dst2: *mut u8,
            src: *const u8,
            len: usize,
            tag: u64,
        ) -> Result<(), AccelError> {
            self.$via(Opcode::Dualcast, len, tag, |t| {
                t.dst = dst1;
                t.dst2 = dst2;
                t.src = src;
            })
        }

        #[doc = concat!($verb, " a CRC-32C of `srcs`, continuing from `seed`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`]; a vector of more than one entry must itself stay
        /// valid too (a single entry is copied into the task).
        pub unsafe fn crc32c(
            &$($m)? self,
            srcs: &[IoVec],
            seed: u32,
            tag: u64,
        ) -> Result<(), AccelError> {
            let len = super::validate::vector_len(srcs);
            self.$via(Opcode::Crc32c, len, tag, |t| {
                t.set_sources(srcs);
                t.seed = seed;
            })
        }

        #[doc = concat!($verb, " a copy of `srcs` to `dst` with their CRC-32C from `seed`.")]
        ///
        /// # Safety
        ///
        /// See [`Batch`]; a vector of more than one entry must itself stay
        /// valid too (a single entry is copied into the task).
        pub unsafe fn copy_crc32c(
            &$($m)? self,
            dst: *mut u8,
            srcs: &[IoVec],
            seed: u32,
            tag: u64,
        ) -> Result<(), AccelError> {
            let len = super::validate::vector_len(srcs);
            self.$via(Opcode::CopyCrc32c, len, tag, |t| {
                t.dst = dst;
                t.set_sources(srcs);
                t.seed = seed;
            })
        }
    };
}

pub(super) use submissions;
