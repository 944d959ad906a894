//! An idle reactor in adaptive mode uses under 5 % of a core; in busy mode it
//! spins. Measured as this process's CPU time over 2 s (the only test in
//! this binary, so nothing else runs in the process).

use std::time::{Duration, Instant};

use io_engine::env::cores::allowed_cpus;
use io_engine::reactor::{PollMode, Reactors};

fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// CPU used by the process over `window`, as a fraction of one core.
fn cpu_share(window: Duration) -> f64 {
    let (c0, t0) = (process_cpu(), Instant::now());
    std::thread::sleep(window);
    (process_cpu() - c0).as_secs_f64() / t0.elapsed().as_secs_f64()
}

#[test]
fn idle_adaptive_reactors_sleep_and_busy_ones_spin() {
    let cores = allowed_cpus().unwrap();
    let n = cores.len() as f64;

    let adaptive = Reactors::start(&cores, PollMode::ADAPTIVE).unwrap();
    std::thread::sleep(Duration::from_millis(200)); // past idle_before_sleep
    let share = cpu_share(Duration::from_secs(2));
    // Still responsive after sleeping.
    assert_eq!(adaptive.run_on(0, || 1).wait().unwrap(), 1);
    let stats = adaptive.stats();
    adaptive.stop();
    assert!(
        share < 0.05,
        "{n} idle adaptive reactors used {:.1} % of a core",
        share * 100.0
    );
    assert!(stats.iter().all(|s| s.idle_ns > s.busy_ns), "{stats:?}");

    // The same measurement sees busy reactors spin: it would catch a
    // broken clock as well as a broken sleep. (A quarter of each core: other
    // processes on a loaded machine take the rest; an idle one gives ~100 %.)
    let busy = Reactors::start(&cores, PollMode::Busy).unwrap();
    let share = cpu_share(Duration::from_millis(500));
    busy.stop();
    assert!(
        share > 0.25 * n,
        "{n} busy reactors used only {:.1} % of a core",
        share * 100.0
    );
}
