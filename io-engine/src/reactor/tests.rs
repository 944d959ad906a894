//! Reactor tests. Most run in adaptive mode so parallel tests do not spin
//! every core of the machine.

use super::*;
use crate::env::affinity;
use crate::env::cores::{CoreSet, allowed_cpus};
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

fn all_cores() -> CoreSet {
    allowed_cpus().unwrap()
}

/// A bound for things that must happen and take microseconds: only a broken
/// feature, never a loaded machine, makes them take this long.
const NEVER: Duration = Duration::from_secs(30);

/// An adaptive mode whose sleeps last an hour unless something ends them:
/// a test that finishes at all proves the thing it waits for woke the
/// reactor.
const SLEEPS_AN_HOUR: PollMode = PollMode::Adaptive {
    idle_before_sleep: Duration::ZERO,
    sleep: Duration::from_secs(3600),
};

/// Waits until `cond` holds, panicking with `what` after [`NEVER`].
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < NEVER, "{what} never happened");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until reactor 0 of `r` starts a sleep after its `after`th one,
/// and returns how many it has started.
fn wait_for_sleep(r: &Reactors, after: u64) -> u64 {
    let mut n = 0;
    wait_until("a sleep", || {
        n = r.sleeps()[0];
        n > after
    });
    n
}

#[test]
fn each_reactor_runs_pinned_on_its_core() {
    let cores = all_cores();
    for mode in [PollMode::Busy, PollMode::ADAPTIVE] {
        let r = Reactors::start(&cores, mode).unwrap();
        assert_eq!(r.len(), cores.len());
        for (i, &cpu) in cores.cpus().iter().enumerate() {
            let (on_cpu, index) = r
                .run_on(i, || (affinity::current_cpu(), current_core()))
                .wait()
                .unwrap();
            assert_eq!(on_cpu, cpu, "reactor {i} not on cpu {cpu}");
            assert_eq!(index, Some(i));
            assert_eq!(r.cpu(i), Some(cpu));
        }
        r.stop();
    }
}

#[test]
fn run_on_and_spawn_on_return_results() {
    let r = Reactors::start(&all_cores(), PollMode::ADAPTIVE).unwrap();
    assert_eq!(r.run_on(0, || 6 * 7).wait().unwrap(), 42);
    // A !Send future, built on the reactor.
    let out = r
        .spawn_on(0, || async {
            let local = Rc::new(Cell::new(1));
            local.set(local.get() + 1);
            local.get()
        })
        .wait()
        .unwrap();
    assert_eq!(out, 2);
    assert!(matches!(
        r.run_on(99, || ()).wait(),
        Err(ReactorError::NoSuchCore { index: 99, .. })
    ));
}

#[test]
fn a_task_woken_from_another_thread_resumes_on_its_reactor() {
    let r = Reactors::start(&all_cores(), PollMode::ADAPTIVE).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    let reply = r.spawn_on(0, move || async move {
        let v = rx.await.unwrap();
        (v, current_core())
    });
    std::thread::sleep(Duration::from_millis(20));
    tx.send(7).unwrap();
    assert_eq!(reply.wait().unwrap(), (7, Some(0)));
}

#[test]
fn pollers_run_until_their_handle_drops() {
    let r = Reactors::start(&all_cores(), PollMode::Busy).unwrap();
    let count = r
        .spawn_on(0, || async {
            let n = Rc::new(Cell::new(0u32));
            let m = n.clone();
            let handle = register_poller("count", move || {
                m.set(m.get() + 1);
                Poll::Busy
            });
            assert_eq!(handle.name(), "count");
            while n.get() < 100 {
                crate::reactor::yield_now().await;
            }
            drop(handle);
            let at_drop = n.get();
            for _ in 0..100 {
                crate::reactor::yield_now().await;
            }
            (at_drop, n.get())
        })
        .wait()
        .unwrap();
    // It may run once more in the round where it was dropped, never after.
    assert!(
        count.1 <= count.0 + 1,
        "poller ran after its handle dropped: {count:?}"
    );
    r.stop();
}

#[test]
fn panics_in_jobs_tasks_and_pollers_are_contained() {
    let r = Reactors::start(&all_cores(), PollMode::ADAPTIVE).unwrap();
    let bad = r.run_on(0, || -> u32 { panic!("boom") });
    assert!(matches!(bad.wait(), Err(ReactorError::Canceled(0))));
    assert_eq!(r.run_on(0, || 5).wait().unwrap(), 5);

    let bad = r.spawn_on(0, || async { panic!("task boom") });
    assert!(matches!(
        bad.wait(),
        Err::<(), _>(ReactorError::Canceled(0))
    ));
    assert_eq!(r.run_on(0, || 6).wait().unwrap(), 6);

    // A panicking poller is removed; the others keep running.
    let (ok_runs, bad_runs) = r
        .spawn_on(0, || async {
            let ok = Rc::new(Cell::new(0u32));
            let bad = Rc::new(Cell::new(0u32));
            let (o, b) = (ok.clone(), bad.clone());
            let _good = register_poller("good", move || {
                o.set(o.get() + 1);
                Poll::Idle
            });
            let _bad = register_poller("bad", move || {
                b.set(b.get() + 1);
                panic!("poller boom")
            });
            while ok.get() < 50 {
                yield_now().await;
            }
            (ok.get(), bad.get())
        })
        .wait()
        .unwrap();
    assert!(ok_runs >= 50);
    assert_eq!(bad_runs, 1);
    assert_eq!(r.run_on(0, || 7).wait().unwrap(), 7);
}

#[test]
fn stats_count_iterations_and_messages() {
    let r = Reactors::start(&all_cores(), PollMode::ADAPTIVE).unwrap();
    for _ in 0..10 {
        r.run_on(0, || ()).wait().unwrap();
    }
    // The round that ran a message is counted when it ends, after its
    // reply: wait for the last one's round, not a fixed time.
    wait_until("every round and its time counted", || {
        let s = &r.stats()[0];
        s.busy_ns > 0 && s.idle_ns > 0 && s.iterations >= 10
    });
    let s = &r.stats()[0];
    assert_eq!(s.index, 0);
    assert!(s.messages >= 10, "{s:?}");
    assert!(s.iterations >= 10, "{s:?}");
    assert_eq!(s.poll_mode, "adaptive");
}

#[test]
fn a_sleeping_adaptive_reactor_wakes_on_a_message() {
    // Each message reaches a reactor that has gone to sleep for an hour:
    // it is handled only if posting it wakes the reactor.
    let r = Reactors::start(&all_cores(), SLEEPS_AN_HOUR).unwrap();
    let mut sleeps = 0;
    for i in 0..5 {
        sleeps = wait_for_sleep(&r, sleeps);
        let reply = r.run_on(0, move || i);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(reply.wait()));
        let got = rx
            .recv_timeout(NEVER)
            .expect("the message did not wake the reactor");
        assert_eq!(got.unwrap(), i);
    }
}

#[test]
fn a_sleeping_reactor_wakes_when_a_registered_fd_is_ready() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    struct Echo {
        sock: Rc<UnixStream>,
        seen: Rc<Cell<u32>>,
    }
    impl FdHandler for Echo {
        fn on_ready(&self, ready: Readiness) {
            if ready.readable {
                let mut b = [0u8; 64];
                if let Ok(n) = (&*self.sock).read(&mut b)
                    && n > 0
                {
                    let _ = (&*self.sock).write_all(&b[..n]);
                    self.seen.set(self.seen.get() + 1);
                }
            }
        }
    }

    let r = Reactors::start(&all_cores(), SLEEPS_AN_HOUR).unwrap();
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    theirs.set_nonblocking(true).unwrap();
    r.run_on(0, move || {
        let sock = Rc::new(theirs);
        let echo = Rc::new(Echo {
            sock: sock.clone(),
            seen: Rc::new(Cell::new(0)),
        });
        let weak: std::rc::Weak<dyn FdHandler> = Rc::downgrade(&echo) as _;
        let reg = register_fd(sock, Interest::READ, weak).unwrap();
        // Kept alive by a poller for the reactor's life.
        let keep = (echo, reg);
        std::mem::forget(register_poller("keep", move || {
            let _ = &keep;
            Poll::Idle
        }));
    })
    .wait()
    .unwrap();
    // Each write reaches a reactor that has gone to sleep for an hour: the
    // echo comes back only if the fd's readiness wakes it.
    ours.set_read_timeout(Some(NEVER)).unwrap();
    let mut sleeps = 0;
    for i in 0..5u8 {
        sleeps = wait_for_sleep(&r, sleeps);
        ours.write_all(&[i; 16]).unwrap();
        let mut back = [0u8; 16];
        ours.read_exact(&mut back)
            .expect("the fd's readiness did not wake the reactor");
        assert_eq!(back, [i; 16]);
    }
}

/// An fd handler that panics is dropped and logged; the reactor goes on
/// serving its other fds, messages and pollers.
#[test]
fn a_panicking_fd_handler_is_dropped_and_the_reactor_goes_on() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    struct Boom(Rc<Cell<u32>>);
    impl FdHandler for Boom {
        fn on_ready(&self, _: Readiness) {
            self.0.set(self.0.get() + 1);
            panic!("fd handler boom")
        }
    }

    let r = Reactors::start(&all_cores(), PollMode::ADAPTIVE).unwrap();
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    let calls = r
        .spawn_on(0, move || async move {
            let sock = Rc::new(theirs);
            let calls = Rc::new(Cell::new(0u32));
            let boom = Rc::new(Boom(calls.clone()));
            let weak: std::rc::Weak<dyn FdHandler> = Rc::downgrade(&boom) as _;
            let _reg = register_fd(sock, Interest::READ, weak).unwrap();
            ours.write_all(b"x").unwrap();
            // Readable, level-triggered: it would be told every round.
            for _ in 0..50 {
                yield_now().await;
            }
            calls.get()
        })
        .wait()
        .unwrap();
    assert_eq!(calls, 1, "told once, then dropped");
    assert_eq!(r.run_on(0, || 8).wait().unwrap(), 8);
}

#[test]
fn a_sleeping_reactor_is_awake_by_the_time_a_poller_asked_for() {
    // Sleeps of an hour: without wake_by the poller would next run then.
    let r = Reactors::start(&all_cores(), SLEEPS_AN_HOUR).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let sleeps_before = r.sleeps()[0];
    r.run_on(0, move || {
        let at = crate::env::tsc::now() + crate::env::tsc::ns_to_ticks(20_000_000);
        let mut rounds = 0u32;
        let mut tx = Some(tx);
        std::mem::forget(register_poller("timer", move || {
            rounds += 1;
            let now = crate::env::tsc::now();
            if now < at {
                wake_by(at);
            } else if let Some(tx) = tx.take() {
                let _ = tx.send(rounds);
            }
            Poll::Idle
        }));
    })
    .wait()
    .unwrap();
    let rounds = rx
        .recv_timeout(NEVER)
        .expect("the poller never saw its time: wake_by did not end the sleep");
    // It got there by sleeping, not by spinning: every round it waited
    // ended in a sleep (all but the round that registered it and the one
    // that saw the time), and those sleeps blocked, so there were only a
    // handful of rounds. (A count, not a time: a spinning reactor runs
    // ~10^5 rounds in the 20 ms, and a loaded machine gives it fewer rounds,
    // never more.)
    let slept = r.sleeps()[0] - sleeps_before;
    assert!(
        slept + 2 >= u64::from(rounds),
        "{rounds} rounds, {slept} sleeps"
    );
    assert!(rounds < 1000, "{rounds} rounds: it spun");
}

#[test]
fn poll_modes_parse_with_an_optional_idle_time() {
    assert_eq!("busy".parse::<PollMode>(), Ok(PollMode::Busy));
    assert_eq!("adaptive".parse::<PollMode>(), Ok(PollMode::ADAPTIVE));
    assert_eq!(
        "adaptive:25".parse::<PollMode>(),
        Ok(PollMode::Adaptive {
            idle_before_sleep: Duration::from_micros(25),
            sleep: Duration::from_millis(1),
        })
    );
    let e = "adaptive:soon".parse::<PollMode>().unwrap_err();
    assert!(e.contains("adaptive:MICROSECONDS"), "{e}");
    let e = "lazy".parse::<PollMode>().unwrap_err();
    assert!(e.contains("busy, adaptive or adaptive:MICROSECONDS"), "{e}");
}
