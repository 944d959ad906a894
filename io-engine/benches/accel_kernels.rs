//! The software accel kernels against the plain operations they replace,
//! measured in the same run: `std::ptr::copy_nonoverlapping` (the C
//! library's memcpy), `write_bytes` (memset), slice `==` (memcmp/bcmp), two
//! copies for dualcast, and a copy then [`crc32c_update`] for copy+crc32c.
//! For copy and fill, `rep movsb` / `rep stosb` (ERMS/FSRM) too.
//!
//! Per op and size (512 B, 4 KiB, 64 KiB, 1 MiB), two working sets: "hot",
//! 16 KiB per buffer side (L1) or one buffer when larger, and "dram",
//! 256 MiB per side walked in order (65536 buffers of 4 KiB, as SPDK's
//! `accel_perf -a`). Every figure is the best of `--rounds` samples of
//! `--ms` each, samples of the kernels and of the ceiling interleaved, so a
//! neighbour's burst on the shared machine hits both alike.
//!
//! Then the non-temporal threshold sweep: copies and fills with temporal
//! and with non-temporal stores, from 4 KiB to 16 MiB, over the same two
//! working sets.
//!
//! Run: `cargo bench -p io-engine --bench accel_kernels [-- --core 1 --ms 25]`.
//!
//! Thread: the main thread, pinned to `--core`.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use io_engine::accel::software::kernels::{Isa, Kernels, NT_THRESHOLD, crc32c_update};
use io_engine::env::affinity::pin_current_thread;
use io_engine::env::dma::DmaRegion;

/// Software accel kernels against memcpy, memset and memcmp.
#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// CPU to pin the benchmark thread to.
    #[arg(long, default_value_t = 0)]
    core: u32,
    /// Milliseconds per sample.
    #[arg(long, default_value_t = 20)]
    ms: u64,
    /// Samples per figure (the best counts).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Only the non-temporal threshold sweep.
    #[arg(long)]
    sweep_only: bool,
    /// Skip the non-temporal threshold sweep.
    #[arg(long)]
    no_sweep: bool,
    /// Only this op in the table (copy, fill, compare, dualcast, crc32c,
    /// copy_crc32c).
    #[arg(long)]
    only: Option<String>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Bytes per side of the DRAM-sized working set.
const DRAM_BYTES: usize = 256 << 20;
/// Bytes per side of the cache-resident working set.
const HOT_BYTES: usize = 16 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Copy,
    Fill,
    Compare,
    Dualcast,
    Crc32c,
    CopyCrc32c,
}

impl Op {
    const ALL: [Op; 6] = [
        Op::Copy,
        Op::Fill,
        Op::Compare,
        Op::Dualcast,
        Op::Crc32c,
        Op::CopyCrc32c,
    ];

    fn name(self) -> &'static str {
        match self {
            Op::Copy => "copy",
            Op::Fill => "fill",
            Op::Compare => "compare",
            Op::Dualcast => "dualcast",
            Op::Crc32c => "crc32c",
            Op::CopyCrc32c => "copy_crc32c",
        }
    }
}

/// Who does the op.
#[derive(Debug, Clone, Copy)]
enum Imp {
    /// The plain std operation (the ceiling).
    Std,
    /// `rep movsb` / `rep stosb`.
    Rep,
    /// A kernel set.
    Kernels(&'static Kernels),
}

/// Three big regions: source, destination, second destination (and the
/// other side of compare).
struct Regions {
    src: DmaRegion,
    dst: DmaRegion,
    dst2: DmaRegion,
}

/// Calls `op(i)` for buffer i = 0, 1, .. nbuf - 1, 0, .. for about
/// `duration`, starting at `*next`; returns ops per second.
fn measure(
    nbuf: usize,
    size: usize,
    duration: Duration,
    next: &mut usize,
    mut op: impl FnMut(usize),
) -> f64 {
    let batch = (4 << 20) / size.max(1);
    let batch = batch.clamp(8, 65_536);
    let mut i = *next;
    let mut ops = 0u64;
    let start = Instant::now();
    loop {
        for _ in 0..batch {
            op(i);
            i += 1;
            if i == nbuf {
                i = 0;
            }
        }
        ops += batch as u64;
        if start.elapsed() >= duration {
            break;
        }
    }
    *next = i;
    ops as f64 / start.elapsed().as_secs_f64()
}

/// `rep movsb`: the CPU's own microcoded copy.
///
/// # Safety
///
/// As for `copy_nonoverlapping`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn rep_movsb(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller's contract; the instruction touches exactly
    // [dst, dst + len) and [src, src + len), and the direction flag is clear
    // per the ABI.
    unsafe {
        std::arch::asm!("rep movsb", inout("rcx") len => _, inout("rdi") dst => _,
            inout("rsi") src => _, options(nostack, preserves_flags));
    }
}

/// `rep stosb`.
///
/// # Safety
///
/// As for `write_bytes`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn rep_stosb(dst: *mut u8, byte: u8, len: usize) {
    // SAFETY: the caller's contract; the instruction writes exactly
    // [dst, dst + len).
    unsafe {
        std::arch::asm!("rep stosb", inout("rcx") len => _, inout("rdi") dst => _,
            in("al") byte, options(nostack, preserves_flags));
    }
}

/// Ops per second of `imp` doing `op` on `nbuf` buffers of `size` bytes.
fn run(
    r: &Regions,
    op: Op,
    imp: Imp,
    size: usize,
    nbuf: usize,
    d: Duration,
    next: &mut usize,
) -> f64 {
    let (src, dst, dst2) = (r.src.as_ptr(), r.dst.as_ptr(), r.dst2.as_ptr());
    let mut sink = 0u32;
    // In every closure below: i < nbuf and nbuf * size <= each region's
    // length, so each buffer lies within its region; the three regions are
    // distinct mappings and this thread is their only user.
    let ops = match (op, imp) {
        // SAFETY: buffer i of each region, as said above.
        (Op::Copy, Imp::Std) => measure(nbuf, size, d, next, |i| unsafe {
            std::ptr::copy_nonoverlapping(src.add(i * size), dst.add(i * size), size)
        }),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: buffer i of each region, as said above.
        (Op::Copy, Imp::Rep) => measure(nbuf, size, d, next, |i| unsafe {
            rep_movsb(dst.add(i * size), src.add(i * size), size)
        }),
        // SAFETY: buffer i of each region, as said above.
        (Op::Copy, Imp::Kernels(k)) => measure(nbuf, size, d, next, |i| unsafe {
            k.copy(dst.add(i * size), src.add(i * size), size)
        }),
        // SAFETY: buffer i of each region, as said above.
        (Op::Fill, Imp::Std) => measure(nbuf, size, d, next, |i| unsafe {
            std::ptr::write_bytes(dst.add(i * size), i as u8, size)
        }),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: buffer i of each region, as said above.
        (Op::Fill, Imp::Rep) => measure(nbuf, size, d, next, |i| unsafe {
            rep_stosb(dst.add(i * size), i as u8, size)
        }),
        // SAFETY: buffer i of each region, as said above.
        (Op::Fill, Imp::Kernels(k)) => measure(nbuf, size, d, next, |i| unsafe {
            k.fill(dst.add(i * size), i as u8, size)
        }),
        // SAFETY: buffer i of each region, as said above.
        (Op::Compare, Imp::Std) => measure(nbuf, size, d, next, |i| unsafe {
            let a = std::slice::from_raw_parts(src.add(i * size), size);
            let b = std::slice::from_raw_parts(dst2.add(i * size), size);
            sink += u32::from(black_box(a) == black_box(b));
        }),
        // SAFETY: buffer i of each region, as said above.
        (Op::Compare, Imp::Kernels(k)) => measure(nbuf, size, d, next, |i| unsafe {
            sink += u32::from(k.compare(src.add(i * size), dst2.add(i * size), size));
        }),
        // SAFETY: buffer i of each region, as said above.
        (Op::Dualcast, Imp::Std) => measure(nbuf, size, d, next, |i| unsafe {
            std::ptr::copy_nonoverlapping(src.add(i * size), dst.add(i * size), size);
            std::ptr::copy_nonoverlapping(src.add(i * size), dst2.add(i * size), size);
        }),
        // SAFETY: buffer i of each region, as said above.
        (Op::Dualcast, Imp::Kernels(k)) => measure(nbuf, size, d, next, |i| unsafe {
            k.dualcast(
                dst.add(i * size),
                dst2.add(i * size),
                src.add(i * size),
                size,
            )
        }),
        // SAFETY: buffer i of each region, as said above.
        (Op::Crc32c, _) => measure(nbuf, size, d, next, |i| unsafe {
            sink ^= crc32c_update(0, std::slice::from_raw_parts(src.add(i * size), size));
        }),
        // SAFETY: buffer i of each region, as said above.
        (Op::CopyCrc32c, Imp::Std) => measure(nbuf, size, d, next, |i| unsafe {
            std::ptr::copy_nonoverlapping(src.add(i * size), dst.add(i * size), size);
            sink ^= crc32c_update(0, std::slice::from_raw_parts(src.add(i * size), size));
        }),
        // SAFETY: buffer i of each region, as said above.
        (Op::CopyCrc32c, Imp::Kernels(k)) => measure(nbuf, size, d, next, |i| unsafe {
            sink ^= k.copy_crc32c(dst.add(i * size), src.add(i * size), size, 0);
        }),
        _ => f64::NAN,
    };
    black_box(sink);
    ops
}

/// Which implementations an op is measured with, ceiling first.
fn imps(op: Op, sets: &[&'static Kernels]) -> Vec<Imp> {
    let mut imps = vec![Imp::Std];
    if cfg!(target_arch = "x86_64") && matches!(op, Op::Copy | Op::Fill) {
        imps.push(Imp::Rep);
    }
    if op != Op::Crc32c {
        imps.extend(sets.iter().map(|&k| Imp::Kernels(k)));
    }
    imps
}

fn imp_name(imp: Imp) -> &'static str {
    match imp {
        Imp::Std => "std",
        Imp::Rep => "rep",
        Imp::Kernels(k) => k.name(),
    }
}

fn table(r: &Regions, args: &Args, sets: &[&'static Kernels]) {
    let d = Duration::from_millis(args.ms);
    println!(
        "\nkernels vs the plain operation, M ops/s (GB/s), x = ratio to std; best of {} x {} ms",
        args.rounds, args.ms
    );
    println!("std: memcpy / memset / slice == (memcmp) / 2x memcpy / memcpy + crc32c_update");
    println!("rep: rep movsb / rep stosb");
    for op in Op::ALL {
        if args.only.as_deref().is_some_and(|only| only != op.name()) {
            continue;
        }
        let imps = imps(op, sets);
        print!("\n{:<12} {:>8} {:>5}", op.name(), "size", "set");
        for &imp in &imps {
            let name = match op {
                Op::Crc32c => "crc32c_update",
                _ => imp_name(imp),
            };
            print!(" | {name:>20}");
        }
        println!();
        for size in [512, 4096, 65536, 1 << 20] {
            for (set, bytes) in [("hot", HOT_BYTES), ("dram", DRAM_BYTES)] {
                let nbuf = (bytes / size).max(1);
                let mut best = vec![0f64; imps.len()];
                let mut next = vec![0usize; imps.len()];
                for _ in 0..args.rounds {
                    for (j, &imp) in imps.iter().enumerate() {
                        best[j] = best[j].max(run(r, op, imp, size, nbuf, d, &mut next[j]));
                    }
                }
                print!("{:<12} {:>8} {:>5}", "", size, set);
                for (j, &ops) in best.iter().enumerate() {
                    let gbs = ops * size as f64 / 1e9;
                    if j == 0 {
                        print!(" | {:>8.2} ({:>5.1})      ", ops / 1e6, gbs);
                    } else {
                        print!(
                            " | {:>8.2} ({:>5.1}) {:>4.2}x",
                            ops / 1e6,
                            gbs,
                            ops / best[0]
                        );
                    }
                }
                println!();
            }
        }
    }
}

/// Temporal against non-temporal stores, and the kernels' temporal path
/// against `rep movsb`/`rep stosb`, per size and working set.
fn sweep(r: &Regions, args: &Args, k: &'static Kernels) {
    let d = Duration::from_millis(args.ms);
    println!(
        "\nstore sweep ({}): GB/s of the kernel with temporal stores (t), of rep movsb/stosb \
         (rep) and of the kernel with non-temporal stores (nt); hot = one buffer reused, \
         dram = 256 MiB walked; NT_THRESHOLD = {} KiB",
        k.name(),
        NT_THRESHOLD >> 10
    );
    println!(
        "{:>9} | {:>20} | {:>20} | {:>20} | {:>20}",
        "size",
        "copy hot t/rep/nt",
        "copy dram t/rep/nt",
        "fill hot t/rep/nt",
        "fill dram t/rep/nt"
    );
    let (src, dst) = (r.src.as_ptr(), r.dst.as_ptr());
    for shift in 12..=24 {
        let size = 1usize << shift;
        print!("{:>6} KiB", size >> 10);
        for fill in [false, true] {
            for bytes in [size, DRAM_BYTES] {
                let nbuf = bytes / size;
                let mut best = [0f64; 3];
                let mut next = [0usize; 3];
                for _ in 0..args.rounds {
                    for (j, how) in [Some(false), None, Some(true)].into_iter().enumerate() {
                        // Buffer i < nbuf, nbuf * size <= DRAM_BYTES, the
                        // regions' length; distinct regions, one user.
                        let ops = match (fill, how) {
                            #[cfg(target_arch = "x86_64")]
                            // SAFETY: buffer i within the region, as above.
                            (true, None) => measure(nbuf, size, d, &mut next[j], |i| unsafe {
                                rep_stosb(dst.add(i * size), i as u8, size)
                            }),
                            #[cfg(target_arch = "x86_64")]
                            // SAFETY: buffers i within their regions, as above.
                            (false, None) => measure(nbuf, size, d, &mut next[j], |i| unsafe {
                                rep_movsb(dst.add(i * size), src.add(i * size), size)
                            }),
                            // SAFETY: buffer i within the region, as above.
                            (true, Some(nt)) => measure(nbuf, size, d, &mut next[j], |i| unsafe {
                                k.fill_with(dst.add(i * size), i as u8, size, nt)
                            }),
                            // SAFETY: buffers i within their regions, as above.
                            (false, Some(nt)) => measure(nbuf, size, d, &mut next[j], |i| unsafe {
                                k.copy_with(dst.add(i * size), src.add(i * size), size, nt)
                            }),
                            #[cfg(not(target_arch = "x86_64"))]
                            (_, None) => f64::NAN,
                        };
                        best[j] = best[j].max(ops * size as f64 / 1e9);
                    }
                }
                print!(
                    " | {:>5.0} {:>5.0} {:>5.0}{}",
                    best[0],
                    best[1],
                    best[2],
                    if best[2] > best[0].max(best[1]) {
                        "*"
                    } else {
                        " "
                    }
                );
            }
        }
        println!();
    }
    println!("(* where non-temporal stores win)");
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(err) = pin_current_thread(args.core) {
        eprintln!("error: {err}");
        return ExitCode::from(2);
    }
    let alloc = || DmaRegion::alloc(DRAM_BYTES);
    let regions = match (alloc(), alloc(), alloc()) {
        (Ok(src), Ok(dst), Ok(dst2)) => Regions { src, dst, dst2 },
        (Err(err), _, _) | (_, Err(err), _) | (_, _, Err(err)) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    // Same bytes on both compare sides, so compare reads everything.
    // SAFETY: both regions hold DRAM_BYTES bytes; distinct mappings.
    unsafe {
        std::ptr::write_bytes(regions.src.as_ptr(), 0x5a, DRAM_BYTES);
        std::ptr::write_bytes(regions.dst2.as_ptr(), 0x5a, DRAM_BYTES);
    }
    let sets: Vec<&'static Kernels> = Isa::ALL
        .into_iter()
        .rev()
        .filter_map(Kernels::with_isa)
        .collect();
    println!(
        "accel kernels: core {}, best set {}, hugepages: {}, sets measured: {}",
        args.core,
        Kernels::get().name(),
        if regions.src.is_hugetlb() {
            "yes"
        } else {
            "no (normal pages, THP advised)"
        },
        sets.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
    );
    if !args.sweep_only {
        table(&regions, &args, &sets);
    }
    if !args.no_sweep {
        sweep(&regions, &args, Kernels::get());
    }
    ExitCode::SUCCESS
}
