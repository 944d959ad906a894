//! One connection's share of the namespace: a disjoint range of LBAs cut
//! into units of one IO each, so that with `-y` a connection's reads check
//! only its own writes. With verify, each unit remembers what it holds (a
//! pattern derived from the LBA it was first written at and a generation;
//! a Copy moves that identity with the data) and is used by one command at
//! a time.
//!
//! Thread: the worker that owns the connection.

use io_engine::env::xorshift::XorShift;

/// What a unit holds: the unit its pattern was written for and the
/// generation of that write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Content {
    origin: u32,
    generation: u32,
}

/// Tries to find a unit not in use before giving up for this round.
const PICK_TRIES: u32 = 8;

/// The units of one connection.
pub struct Region {
    first_lba: u64,
    units: u32,
    nlb: u32,
    block_size: usize,
    next: u32,
    generation: u32,
    /// With verify: a unit in use, and what each holds (None: unknown).
    busy: Vec<bool>,
    content: Vec<Option<Content>>,
    /// With verify: a unit a Copy wrote that has not been read back.
    copied: Vec<bool>,
    verify: bool,
}

impl Region {
    /// `units` units of `nlb` blocks from `first_lba`.
    pub fn new(first_lba: u64, units: u32, nlb: u32, block_size: usize, verify: bool) -> Region {
        let n = if verify { units as usize } else { 0 };
        Region {
            first_lba,
            units,
            nlb,
            block_size,
            next: 0,
            generation: 0,
            busy: vec![false; n],
            content: vec![None; n],
            copied: vec![false; n],
            verify,
        }
    }

    /// The first LBA of `unit`.
    #[inline]
    pub fn lba(&self, unit: u32) -> u64 {
        self.first_lba + unit as u64 * self.nlb as u64
    }

    /// A unit to use, random or the next in order, other than `not`; None
    /// when (with verify) the ones tried are all in use.
    pub fn pick(&mut self, rng: &mut XorShift, random: bool, not: Option<u32>) -> Option<u32> {
        for _ in 0..PICK_TRIES {
            let u = if random {
                rng.below(self.units as u64) as u32
            } else {
                let u = self.next;
                self.next = (self.next + 1) % self.units;
                u
            };
            if Some(u) == not || (self.verify && self.busy[u as usize]) {
                continue;
            }
            if self.verify {
                self.busy[u as usize] = true;
            }
            return Some(u);
        }
        None
    }

    /// Ends the use of `unit`.
    #[inline]
    pub fn release(&mut self, unit: u32) {
        if self.verify {
            self.busy[unit as usize] = false;
        }
    }

    /// What `unit` holds, if known.
    pub fn content(&self, unit: u32) -> Option<Content> {
        self.content[unit as usize]
    }

    /// Sets what `unit` holds (None: unknown, after a failed write), and
    /// whether a Copy put it there.
    pub fn set_content(&mut self, unit: u32, c: Option<Content>, by_copy: bool) {
        self.content[unit as usize] = c;
        self.copied[unit as usize] = by_copy && c.is_some();
    }

    /// Whether a Copy wrote `unit` and it has not been read back since.
    pub fn copied(&self, unit: u32) -> bool {
        self.copied[unit as usize]
    }

    /// `unit` was read back.
    pub fn checked(&mut self, unit: u32) {
        self.copied[unit as usize] = false;
    }

    /// Fills `buf` with a new generation of `unit`'s pattern; returns what
    /// the unit holds once the write completes.
    pub fn fill(&mut self, unit: u32, buf: &mut [u8]) -> Content {
        self.generation = self.generation.wrapping_add(1).max(1);
        let c = Content {
            origin: unit,
            generation: self.generation,
        };
        for (i, w) in buf.chunks_exact_mut(8).enumerate() {
            w.copy_from_slice(&self.word(c, i).to_le_bytes());
        }
        c
    }

    /// Whether `buf` holds content `c`; the first differing LBA if not.
    pub fn check(&self, c: Content, buf: &[u8]) -> Result<(), u64> {
        for (i, w) in buf.chunks_exact(8).enumerate() {
            if u64::from_le_bytes(w.try_into().expect("8 bytes")) != self.word(c, i) {
                return Err(self.lba(c.origin) + (i * 8 / self.block_size) as u64);
            }
        }
        Ok(())
    }

    /// Word `i` of content `c`: its LBA, its place in the block and the
    /// generation.
    #[inline]
    fn word(&self, c: Content, i: usize) -> u64 {
        let per_block = self.block_size / 8;
        let lba = self.lba(c.origin) + (i / per_block) as u64;
        (lba << 16 | (i % per_block) as u64)
            ^ (c.generation as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_check_and_name_the_lba_that_differs() {
        let mut r = Region::new(100, 4, 2, 512, true);
        let mut a = vec![0u8; 1024];
        let ca = r.fill(1, &mut a);
        assert_eq!(r.check(ca, &a), Ok(()));
        let mut b = vec![0u8; 1024];
        let cb = r.fill(1, &mut b);
        assert_ne!(a, b, "a new generation differs");
        assert_eq!(r.check(ca, &b), Err(102));
        b[700] ^= 1;
        assert_eq!(r.check(cb, &b), Err(103));
    }

    #[test]
    fn a_copy_moves_the_pattern_and_is_read_back_once() {
        let mut r = Region::new(0, 4, 1, 512, true);
        let mut a = vec![0u8; 512];
        let c = r.fill(0, &mut a);
        r.set_content(0, Some(c), false);
        r.set_content(3, r.content(0), true);
        assert!(r.copied(3) && !r.copied(0));
        assert_eq!(
            r.check(r.content(3).unwrap(), &a),
            Ok(()),
            "unit 3 holds unit 0's data"
        );
        r.checked(3);
        assert!(!r.copied(3));
        r.set_content(2, None, true);
        assert!(!r.copied(2), "nothing known to read back");
    }

    #[test]
    fn units_in_use_are_not_picked_twice() {
        let mut r = Region::new(0, 2, 1, 512, true);
        let mut rng = XorShift::new(1);
        let a = r.pick(&mut rng, false, None).unwrap();
        let b = r.pick(&mut rng, false, None).unwrap();
        assert_ne!(a, b);
        assert_eq!(r.pick(&mut rng, true, None), None);
        r.release(a);
        assert_eq!(r.pick(&mut rng, true, Some(b)), Some(a));
    }
}
