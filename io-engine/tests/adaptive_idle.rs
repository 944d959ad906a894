//! An idle reactor in adaptive mode sleeps instead of spinning; in busy mode
//! it spins and never sleeps. Checked by what the reactors count (sleeps,
//! rounds), not by CPU time, which a loaded machine changes: load only ever
//! gives a reactor fewer rounds, so the bounds below hold on any machine and
//! break only when the poll modes do.

use std::time::{Duration, Instant};

use io_engine::env::cores::allowed_cpus;
use io_engine::reactor::{PollMode, Reactors};

/// A bound for things that must happen and take microseconds: only a broken
/// poll mode, never a loaded machine, makes them take this long.
const NEVER: Duration = Duration::from_secs(30);

/// Rounds of every reactor of `r`.
fn rounds(r: &Reactors) -> Vec<u64> {
    r.stats().iter().map(|s| s.iterations).collect()
}

/// The most rounds an adaptive reactor that sleeps up to `sleep` at a time
/// runs in `window` with nothing to do: one per sleep (a sleep ends early
/// only for a message or an fd, and there are none), and a few for start-up.
fn most_idle_rounds(window: Duration, sleep: Duration) -> u64 {
    2 * (window.as_nanos() / sleep.as_nanos()) as u64 + 100
}

#[test]
fn idle_adaptive_reactors_sleep_and_busy_ones_spin() {
    let cores = allowed_cpus().unwrap();
    let PollMode::Adaptive { sleep, .. } = PollMode::ADAPTIVE else {
        unreachable!("ADAPTIVE is adaptive")
    };

    // Adaptive: every reactor goes to sleep, and over a second it runs no
    // more rounds than its sleeps allow. A reactor that spun instead (a
    // broken sleep, a wake-up fd that stays readable) would run hundreds
    // of thousands.
    let adaptive = Reactors::start(&cores, PollMode::ADAPTIVE).unwrap();
    let start = Instant::now();
    while adaptive.sleeps().contains(&0) {
        assert!(start.elapsed() < NEVER, "an adaptive reactor never slept");
        std::thread::sleep(Duration::from_millis(1));
    }
    let before = rounds(&adaptive);
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let after = rounds(&adaptive);
    let window = t.elapsed();
    for (i, (a, b)) in before.iter().zip(&after).enumerate() {
        assert!(
            b - a <= most_idle_rounds(window, sleep),
            "idle adaptive reactor {i} ran {} rounds in {window:?}: it spun",
            b - a
        );
    }
    // Still responsive after sleeping.
    assert_eq!(adaptive.run_on(0, || 1).wait().unwrap(), 1);
    let stats = adaptive.stats();
    adaptive.stop();
    assert!(stats.iter().all(|s| s.idle_ns > s.busy_ns), "{stats:?}");

    // Busy: the same reactors never sleep and run more rounds than any
    // sleeping reactor could, however little CPU the machine gives them.
    let busy = Reactors::start(&cores, PollMode::Busy).unwrap();
    let before = rounds(&busy);
    let t = Instant::now();
    loop {
        let after = rounds(&busy);
        let bound = most_idle_rounds(t.elapsed(), sleep);
        if before.iter().zip(&after).all(|(a, b)| b - a > bound) {
            break;
        }
        assert!(t.elapsed() < NEVER, "busy reactors did not spin: {after:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let sleeps = busy.sleeps();
    busy.stop();
    assert!(
        sleeps.iter().all(|&n| n == 0),
        "a busy reactor slept: {sleeps:?}"
    );
}
