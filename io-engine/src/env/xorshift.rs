//! A small, fast, reproducible pseudo-random stream (xorshift64*, Vigna
//! 2016) for benchmark offsets and test data: a few cycles a number, the
//! same stream for the same seed on every machine. Not for anything that
//! must be unpredictable. Written here rather than taken from `rand`: the
//! data path's benchmarks need it inlined in their hot loops, and this is
//! the whole of it.
//!
//! Thread: any; each user owns its generator.

/// The generator's state; `Copy`, so a hot loop can keep it in a `Cell`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator seeded with `seed` (0 is replaced: the state must not
    /// be zero).
    pub const fn new(seed: u64) -> XorShift {
        XorShift(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A uniformly random number below `n` (Lemire's multiply-shift, no
    /// division).
    #[inline(always)]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Fills `buf` with the stream, eight bytes per number.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let n = rest.len();
        rest.copy_from_slice(&self.next_u64().to_le_bytes()[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::XorShift;

    #[test]
    fn the_stream_is_reproducible_and_not_constant() {
        let (mut a, mut b) = (XorShift::new(7), XorShift::new(7));
        let xs: Vec<u64> = (0..64).map(|_| a.next_u64()).collect();
        assert!(xs.iter().all(|&x| x == b.next_u64()));
        let distinct: std::collections::BTreeSet<_> = xs.iter().collect();
        assert_eq!(distinct.len(), 64);
        // The published xorshift64* stream for seed 1.
        assert_eq!(XorShift::new(1).next_u64(), 0x47e4_ce4b_896c_dd1d);
    }

    #[test]
    fn below_stays_below_and_covers_the_range() {
        let mut r = XorShift::new(3);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = r.below(10);
            assert!(v < 10);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn fill_covers_every_byte_including_a_ragged_tail() {
        let mut buf = [0u8; 21];
        XorShift::new(5).fill(&mut buf);
        let mut again = XorShift::new(5);
        assert_eq!(buf[..8], again.next_u64().to_le_bytes());
        assert_eq!(buf[8..16], again.next_u64().to_le_bytes());
        assert_eq!(buf[16..], again.next_u64().to_le_bytes()[..5]);
        assert_ne!(XorShift::new(0), XorShift(0), "a zero seed is replaced");
    }
}
