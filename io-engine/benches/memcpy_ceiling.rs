//! The memcpy ceiling: how many block-sized copies per second one core does
//! between a big DMA region and a few small buffers, with nothing else in
//! the way. The malloc block device moves its data with the same copies, so
//! this is the figure its benchmark is quoted against.
//!
//! One thread, pinned to `--core`, copies `--size` bytes at random
//! block-aligned offsets of a `--region-mb` MiB [`DmaRegion`] (on hugepages
//! when the host has them reserved) to (`read`, as a block-device read) or
//! from (`write`) `--qd` buffers in turn, for `--seconds` per mode.
//!
//! Run: `cargo bench -p io-engine --bench memcpy_ceiling [-- --json ...]`.
//!
//! Thread: the main thread, pinned.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use io_engine::env::affinity::pin_current_thread;
use io_engine::env::dma::DmaRegion;
use io_engine::env::xorshift::XorShift;

/// Copies between random offsets of a big region and a few buffers.
#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// Size of the region copied from and to, in MiB.
    #[arg(long, default_value_t = 1024)]
    region_mb: usize,
    /// Number of buffers, used in turn.
    #[arg(long, default_value_t = 32)]
    qd: usize,
    /// Bytes per copy; offsets in the region are multiples of it.
    #[arg(long, default_value_t = 4096)]
    size: usize,
    /// Seconds per mode.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Which direction to measure.
    #[arg(long, value_enum, default_value_t = Mode::Both)]
    mode: Mode,
    /// CPU to pin the copying thread to.
    #[arg(long, default_value_t = 0)]
    core: u32,
    /// Bytes of the next copy's region side to prefetch before each copy
    /// (0: none, the plain memcpy ceiling). The malloc device prefetches
    /// 1024 for reads and 256 for writes.
    #[arg(long, default_value_t = 0)]
    prefetch: usize,
    /// Print one JSON object per mode instead of a line of text.
    #[arg(long)]
    json: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Direction of the copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Region to buffer, as a block-device read.
    Read,
    /// Buffer to region, as a block-device write.
    Write,
    /// `read`, then `write`.
    Both,
}

/// What one mode measured.
struct Outcome {
    copies: u64,
    elapsed: Duration,
}

/// Copies between the region and the buffers until `duration` is up;
/// `READ` picks the direction at compile time so the loop has no branch.
/// Prefetches the first `bytes` at `at`: for reading, or for writing when
/// `READ` is false.
#[inline(always)]
fn prefetch_lines<const READ: bool>(at: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    for l in (0..bytes).step_by(64) {
        use std::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch};
        let p = at.wrapping_add(l) as *const i8;
        // SAFETY: prefetch has no architectural effect and never faults.
        unsafe {
            if READ {
                _mm_prefetch::<_MM_HINT_T0>(p)
            } else {
                _mm_prefetch::<_MM_HINT_ET0>(p)
            }
        }
    }
}

fn run<const READ: bool>(
    region: &DmaRegion,
    buffers: &DmaRegion,
    size: usize,
    qd: usize,
    prefetch: usize,
    duration: Duration,
) -> Outcome {
    /// Copies between clock reads.
    const BATCH: u64 = 1024;
    let blocks = (region.len() / size) as u64;
    let mut rng = XorShift::new(if READ {
        0x9e37_79b9_7f4a_7c15
    } else {
        0xd1b5_4a32_d192_ed03
    });
    let mut slot = 0;
    let mut copies = 0;
    let mut next = rng.below(blocks) as usize * size;
    let start = Instant::now();
    loop {
        for _ in 0..BATCH {
            let offset = next;
            next = rng.below(blocks) as usize * size;
            prefetch_lines::<READ>(region.as_ptr().wrapping_add(next), prefetch.min(size));
            // SAFETY: offset + size <= blocks * size <= region.len(), and
            // slot * size + size <= qd * size <= buffers.len(); the regions
            // are distinct mappings, so the ranges do not overlap, and this
            // thread is their only user.
            unsafe {
                let block = region.as_ptr().add(offset);
                let buffer = buffers.as_ptr().add(slot * size);
                if READ {
                    std::ptr::copy_nonoverlapping(block, buffer, size);
                } else {
                    std::ptr::copy_nonoverlapping(buffer, block, size);
                }
            }
            slot += 1;
            if slot == qd {
                slot = 0;
            }
        }
        copies += BATCH;
        if start.elapsed() >= duration {
            break;
        }
    }
    Outcome {
        copies,
        elapsed: start.elapsed(),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Shows the warning DmaRegion logs when it falls back to normal pages.
    io_engine::env::logging::init("info", false);
    let region_len = args.region_mb.checked_mul(1 << 20);
    let buffers_len = args.qd.checked_mul(args.size);
    let (Some(region_len), Some(buffers_len)) = (region_len, buffers_len) else {
        eprintln!("error: --region-mb or --qd times --size is too large");
        return ExitCode::from(2);
    };
    if args.size == 0 || args.qd == 0 || args.size > region_len {
        eprintln!("error: --size and --qd must be at least 1, and --size at most the region");
        return ExitCode::from(2);
    }
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        eprintln!("error: --seconds must be a positive number");
        return ExitCode::from(2);
    }
    let duration = Duration::from_secs_f64(args.seconds);
    if let Err(err) = pin_current_thread(args.core) {
        eprintln!("error: {err}");
        return ExitCode::from(2);
    }
    let regions =
        DmaRegion::alloc(region_len).and_then(|r| Ok((r, DmaRegion::alloc(buffers_len)?)));
    let (region, buffers) = match regions {
        Ok(regions) => regions,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    let reads: &[bool] = match args.mode {
        Mode::Both => &[true, false],
        Mode::Read => &[true],
        Mode::Write => &[false],
    };
    for &read in reads {
        let run = if read { run::<true> } else { run::<false> };
        let outcome = run(
            &region,
            &buffers,
            args.size,
            args.qd,
            args.prefetch,
            duration,
        );
        let secs = outcome.elapsed.as_secs_f64();
        let copies_per_s = outcome.copies as f64 / secs;
        let gb_per_s = copies_per_s * args.size as f64 / 1e9;
        let ns_per_copy = secs * 1e9 / outcome.copies as f64;
        let name = if read { "read" } else { "write" };
        if args.json {
            let line = serde_json::json!({
                "bench": "memcpy_ceiling",
                "mode": name,
                "size": args.size,
                "qd": args.qd,
                "prefetch": args.prefetch,
                "region_mb": region.len() >> 20,
                "hugepages": region.is_hugetlb(),
                "core": args.core,
                "seconds": secs,
                "copies": outcome.copies,
                "mcopies_per_s": copies_per_s / 1e6,
                "gb_per_s": gb_per_s,
                "ns_per_copy": ns_per_copy,
            });
            println!("{line}");
        } else {
            println!(
                "memcpy {name:<5} {} B, qd {}, {} MiB region, hugepages: {}, core {}: \
                 {:.2} M copies/s, {gb_per_s:.2} GB/s, {ns_per_copy:.1} ns/copy",
                args.size,
                args.qd,
                region.len() >> 20,
                if region.is_hugetlb() {
                    "yes"
                } else {
                    "no (normal pages, THP advised)"
                },
                args.core,
                copies_per_s / 1e6,
            );
        }
    }
    ExitCode::SUCCESS
}
