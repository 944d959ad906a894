//! Provisional scalar kernels; replaced by the SIMD kernels.
//!
//! Thread: any caller; no state.

/// The kernel set.
pub struct Kernels;

static K: Kernels = Kernels;

impl Kernels {
    /// The best set for this CPU.
    pub fn get() -> &'static Kernels {
        &K
    }
    /// Name of the instruction set used.
    pub fn name(&self) -> &'static str {
        "scalar"
    }
    /// # Safety
    /// Valid, non-overlapping buffers.
    pub unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
    }
    /// # Safety
    /// Valid buffer.
    pub unsafe fn fill(&self, dst: *mut u8, byte: u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::write_bytes(dst, byte, len) }
    }
    /// # Safety
    /// Valid buffers.
    pub unsafe fn compare(&self, a: *const u8, b: *const u8, len: usize) -> bool {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(a, len) == std::slice::from_raw_parts(b, len) }
    }
    /// # Safety
    /// Valid, non-overlapping buffers.
    pub unsafe fn dualcast(&self, d1: *mut u8, d2: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(src, d1, len);
            std::ptr::copy_nonoverlapping(src, d2, len);
        }
    }
    /// # Safety
    /// Valid, non-overlapping buffers.
    pub unsafe fn copy_crc32c(&self, dst: *mut u8, src: *const u8, len: usize, crc: u32) -> u32 {
        // SAFETY: the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, len);
            crc32c_update(crc, std::slice::from_raw_parts(src, len))
        }
    }
}

/// Standard CRC-32C of `data` appended to `crc`.
pub fn crc32c_update(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}
