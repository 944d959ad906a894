//! The cycle clock: cheap timestamps for per-IO latency and reactor busy time.
//!
//! Thread: any. [`now`] is one `rdtsc` on x86-64 (the TSC is invariant on the
//! CPUs we run on: `constant_tsc nonstop_tsc`), so timestamps taken on
//! different cores compare. The tick rate is calibrated once against the
//! monotonic clock, on first use.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Reads the cycle counter.
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no memory effects and exists on every x86-64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Ticks of [`now`] per second, calibrated on first call (about 20 ms).
pub fn ticks_per_sec() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(calibrate)
}

/// Nanoseconds per tick as a 32.32 fixed-point factor:
/// `ns = ticks * factor >> 32`.
pub fn ns_per_tick_fixed() -> u64 {
    static MULT: OnceLock<u64> = OnceLock::new();
    *MULT.get_or_init(|| ((1_000_000_000u128 << 32) / ticks_per_sec() as u128) as u64)
}

/// [`ticks_to_ns`] with a multiply and a shift instead of a division, for
/// the data path (per-IO histograms); within a nanosecond of it.
#[inline(always)]
pub fn ticks_to_ns_fast(ticks: u64) -> u64 {
    ((ticks as u128 * ns_per_tick_fixed() as u128) >> 32) as u64
}

fn calibrate() -> u64 {
    if !cfg!(target_arch = "x86_64") {
        return 1_000_000_000;
    }
    let t0 = Instant::now();
    let c0 = now();
    std::thread::sleep(Duration::from_millis(20));
    let c1 = now();
    let elapsed = t0.elapsed();
    ((c1 - c0) as u128 * 1_000_000_000 / elapsed.as_nanos().max(1)) as u64
}

/// Converts a tick count into nanoseconds.
#[inline]
pub fn ticks_to_ns(ticks: u64) -> u64 {
    (ticks as u128 * 1_000_000_000 / ticks_per_sec() as u128) as u64
}

/// Converts nanoseconds into ticks.
#[inline]
pub fn ns_to_ticks(ns: u64) -> u64 {
    (ns as u128 * ticks_per_sec() as u128 / 1_000_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_advances_at_the_calibrated_rate() {
        let hz = ticks_per_sec();
        assert!(hz > 100_000_000, "tick rate {hz} Hz is implausible");
        let t0 = Instant::now();
        let c0 = now();
        std::thread::sleep(Duration::from_millis(50));
        let ns = ticks_to_ns(now() - c0);
        let real = t0.elapsed().as_nanos() as u64;
        // Within 10 % of the monotonic clock.
        assert!(
            ns.abs_diff(real) < real / 10,
            "tsc says {ns} ns, clock {real} ns"
        );
        assert!(ticks_to_ns(ns_to_ticks(1_000_000)).abs_diff(1_000_000) <= 1);
        for t in [0, 1, 1000, hz, 1 << 40] {
            let (slow, fast) = (ticks_to_ns(t), ticks_to_ns_fast(t));
            assert!(
                slow.abs_diff(fast) <= 1 + slow / 1_000_000_000,
                "{t}: {slow} vs {fast}"
            );
        }
    }
}
