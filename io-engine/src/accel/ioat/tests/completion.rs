//! Tests of the data path against a stricter model: completions from the
//! completion word only (a held completion write, stepped by the test so
//! the race is the same every run), zero-length requests, the model's
//! prefetch, its CHANCTRL-gated halts and size-0 nulls, a slow but alive
//! device, and an unmap racing a copy.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::driver::{Channel, DriverConfig, WorkBound};
use super::super::model::{IoatModel, ModelConfig, ModelHandle};
use super::super::spec::{self, chan, chanerr, chansts, control, op};
use super::{Bench, bytes, mapped, one};
use crate::accel::conformance::{self, scribble};
use crate::accel::{Completion, Opcode, Status, Task, TaskId};
use crate::env::dma::{DmaRegion, HugepagePolicy};

/// A channel driven by the test on a model whose handle it keeps.
fn channel(model: ModelConfig, driver: DriverConfig) -> (Channel, ModelHandle) {
    let m = IoatModel::new(model);
    let h = m.handle();
    (Channel::start(mapped(m), driver).unwrap(), h)
}

fn copy_task(dst: *mut u8, src: *const u8, len: usize) -> Task {
    let mut t = Task::empty();
    t.set(Opcode::Copy, len);
    t.dst = dst;
    t.src = src;
    t
}

fn region(len: usize) -> DmaRegion {
    DmaRegion::alloc_with(len, HugepagePolicy::Never).unwrap()
}

/// The ids and statuses `reap` found, by id.
fn statuses(ch: &mut Channel, n: usize) -> Vec<(TaskId, Status)> {
    let mut done: Vec<_> = reap(ch, n).iter().map(|(id, c)| (*id, c.status)).collect();
    done.sort_by_key(|(id, _)| *id);
    done
}

/// Polls `ch` until `n` completions were reported or 10 s passed.
fn reap(ch: &mut Channel, n: usize) -> Vec<(TaskId, Completion)> {
    let mut done = Vec::new();
    let start = Instant::now();
    while done.len() < n && start.elapsed() < Duration::from_secs(10) {
        ch.poll(&mut done);
        std::hint::spin_loop();
    }
    done
}

#[test]
fn a_request_is_reported_done_only_once_its_completion_word_has_landed() {
    // A 16-slot ring, 4 KiB per descriptor, a stall check on every poll
    // (CHANSTS read whenever the word stands still), and a device that
    // runs one step at a time when the test says so: each completion
    // write (and the data it covers) is held for 3 descriptors or until
    // CHANSTS is read, while CHANSTS names every descriptor as it starts.
    let (mut ch, h) = channel(
        ModelConfig {
            xfercap: 12,
            ..ModelConfig::default()
        },
        DriverConfig {
            ring_size: 16,
            stall_check: Duration::ZERO,
            timeout: Duration::from_secs(24 * 3600),
            ..DriverConfig::default()
        },
    );
    h.faults().manual(true);
    h.faults().hold_completions(3);
    const N: usize = 48;
    const MAX: usize = 3 * 4096;
    let src = region(N * MAX);
    let dst = region(N * MAX);
    let len = |i: usize| (i % 3 + 1) * 4096 - (i % 2) * 100;
    let at = |r: &DmaRegion, i: usize| {
        // SAFETY: i < N, inside the region.
        unsafe { r.as_ptr().add(i * MAX) }
    };
    for i in 0..N {
        scribble(at(&src, i), len(i), i as u64 + 1);
        // SAFETY: inside the region, nothing in flight yet.
        unsafe { std::ptr::write_bytes(at(&dst, i), 0, len(i)) };
    }
    let mut reported = vec![false; N];
    let mut next = 0;
    let mut done = Vec::new();
    for round in 0..100_000 {
        // Batches of 4 requests (1 to 3 descriptors each), two batches
        // ahead of the device: the ring fills and the backlog holds the
        // rest.
        if next < N && round % 6 == 0 {
            for _ in 0..2 {
                let k = (N - next).min(4);
                let tasks: Vec<Task> = (next..next + k)
                    .map(|i| copy_task(at(&dst, i), at(&src, i), len(i)))
                    .collect();
                ch.submit(&tasks, next as TaskId, &mut done);
                next += k;
            }
        }
        h.step();
        for _ in 0..2 {
            ch.poll(&mut done);
            for (id, c) in done.drain(..) {
                let i = id as usize;
                assert_eq!(c, Completion::SUCCESS, "request {i}");
                assert!(!reported[i], "request {i} reported twice");
                reported[i] = true;
                assert!(
                    bytes(at(&src, i), len(i)) == bytes(at(&dst, i), len(i)),
                    "request {i} reported done before its data landed (round {round})"
                );
            }
        }
        if next == N && reported.iter().all(|&r| r) {
            break;
        }
    }
    assert!(reported.iter().all(|&r| r), "{reported:?}");
    assert_eq!(ch.in_flight(), 0);
    let t = ch.counters();
    assert!(t.ring_full.load(std::sync::atomic::Ordering::Relaxed) > 0);
    let c = h.counters();
    assert_eq!(c.prefetch_mismatches, 0, "{c:?}");
    assert_eq!(c.halts, 0, "{c:?}");
}

#[test]
fn a_zero_length_request_is_a_null_descriptor_of_its_own() {
    let (mut ch, h) = channel(ModelConfig::default(), DriverConfig::default());
    let src = region(8192);
    let dst = region(8192);
    scribble(src.as_ptr(), 8192, 7);
    let nulls = h.counters().nulls;
    // SAFETY: inside the regions.
    let (s2, d2) = unsafe { (src.as_ptr().add(4096), dst.as_ptr().add(4096)) };
    let tasks = [
        copy_task(dst.as_ptr(), src.as_ptr(), 4096),
        copy_task(dst.as_ptr(), src.as_ptr(), 0),
        copy_task(d2, s2, 4096),
    ];
    let mut done = Vec::new();
    ch.submit(&tasks, 10, &mut done);
    let ok = Status::Success;
    assert_eq!(statuses(&mut ch, 3), vec![(10, ok), (11, ok), (12, ok)]);
    assert_eq!(ch.in_flight(), 0);
    assert!(bytes(src.as_ptr(), 8192) == bytes(dst.as_ptr(), 8192));
    assert_eq!(h.counters().nulls, nulls + 1, "one null descriptor");
}

#[test]
fn a_null_descriptor_of_size_zero_is_a_length_error() {
    let b = Bench::new();
    b.put(
        0,
        0,
        control::with_op(op::COPY, control::NULL),
        0,
        0,
        b.iova(64),
    );
    let (st, err) = b.ring(1);
    assert_eq!(chansts::state(st), chansts::HALTED);
    assert_eq!(err, chanerr::LENGTH, "{}", chanerr::describe(err));
}

#[test]
fn without_any_err_abort_en_an_error_is_latched_and_the_channel_goes_on() {
    let b = Bench::new();
    let c = spec::channel_base(0);
    b.write(16, c + chan::CHANCTRL, 0);
    // SAFETY: inside the region.
    unsafe { std::ptr::write_bytes(b.r.as_ptr().add(8192), 0x5c, 64) };
    // Above XFERCAP (64 KiB here): a length error.
    let copy = control::with_op(op::COPY, 0);
    b.put(0, 1 << 17, copy, b.iova(8192), b.iova(16384), b.iova(64));
    b.put(
        1,
        64,
        control::with_op(op::COPY, control::COMPLETION_UPDATE),
        b.iova(8192),
        b.iova(16384),
        b.iova(128),
    );
    let (st, err) = b.ring(2);
    assert_eq!(st, b.iova(64) | chansts::IDLE, "not halted");
    assert_eq!(err, chanerr::LENGTH, "latched");
    // SAFETY: inside the region, the device is idle.
    let copied = unsafe { std::slice::from_raw_parts(b.r.as_ptr().add(16384), 64) };
    assert!(copied.iter().all(|&x| x == 0x5c), "the next descriptor ran");
    assert_eq!(b.m.counters().halts, 0);
}

#[test]
fn the_model_flags_a_driver_write_to_a_slot_it_has_handed_over() {
    let b = Bench::new();
    let ok = control::with_op(op::COPY, 0);
    b.put(0, 64, ok, b.iova(8192), b.iova(16384), b.iova(64));
    b.put(1, 64, ok, b.iova(8192), b.iova(20480), b.iova(128));
    b.m.faults().manual(true);
    let c = spec::channel_base(0);
    b.write(16, c + chan::DMACOUNT, 2);
    assert!(b.m.step(), "the first descriptor runs");
    // Both were read ahead at the doorbell: rewriting the second is a
    // write to a slot the device may have fetched.
    b.put(1, 128, ok, b.iova(8192), b.iova(20480), b.iova(128));
    assert!(b.m.step());
    let n = b.m.counters();
    assert_eq!((n.descriptors, n.prefetch_mismatches), (2, 1), "{n:?}");
    // The device ran what it had fetched: 64 bytes, not 128.
    // SAFETY: inside the region, the device is idle.
    let tail = unsafe { std::slice::from_raw_parts(b.r.as_ptr().add(20480 + 64), 64) };
    assert!(tail.iter().all(|&x| x == 0));
}

#[test]
fn the_suite_on_the_strict_model_writes_no_slot_the_device_has_fetched() {
    let (ioat, h) = one(ModelConfig::default(), super::cfg(64));
    let accel = super::accel_of(&ioat);
    conformance::run_all(&accel, 1 << 20);
    let c = h.counters();
    assert!(c.descriptors > 100, "{c:?}");
    assert_eq!(c.prefetch_mismatches, 0, "{c:?}");
}

#[test]
fn a_slow_but_alive_device_is_not_timed_out_while_its_completion_word_moves() {
    let timeout = Duration::from_millis(50);
    let (mut ch, h) = channel(
        ModelConfig::default(),
        DriverConfig {
            timeout,
            stall_check: Duration::ZERO,
            ..DriverConfig::default()
        },
    );
    let src = region(1 << 16);
    let dst = region(1 << 16);
    scribble(src.as_ptr(), 1 << 16, 3);
    let at = |r: &DmaRegion, i: usize| {
        // SAFETY: i < 16, inside the region.
        unsafe { r.as_ptr().add(i * 4096) }
    };
    h.faults().manual(true);
    let mut done = Vec::new();
    // Six batches of one request, one step each, every step longer than
    // the timeout after the last: the completion word moves every time,
    // so nothing times out.
    for i in 0..6 {
        let task = copy_task(at(&dst, i), at(&src, i), 4096);
        ch.submit(&[task], i as TaskId, &mut done);
        std::thread::sleep(timeout + Duration::from_millis(10));
        assert!(h.step());
        ch.poll(&mut done);
        assert_eq!(done, vec![(i as TaskId, Completion::SUCCESS)], "step {i}");
        done.clear();
    }
    // One batch of four, one step at a time: the word moves only at the
    // batch's end, but CHANSTS shows each descriptor: a sign of life, so
    // nothing times out and nothing is reported before the end.
    let tasks: Vec<Task> = (10..14)
        .map(|i| copy_task(at(&dst, i), at(&src, i), 4096))
        .collect();
    ch.submit(&tasks, 10, &mut done);
    for i in 0..4 {
        std::thread::sleep(timeout + Duration::from_millis(10));
        assert!(h.step());
        ch.poll(&mut done);
        if i < 3 {
            assert!(done.is_empty(), "step {i}: {done:?}");
        }
    }
    assert_eq!(
        done,
        (10..14)
            .map(|i| (i, Completion::SUCCESS))
            .collect::<Vec<_>>()
    );
    done.clear();
    assert_eq!(
        ch.counters()
            .timeouts
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    // Once it stops, the driver gives up after the timeout.
    h.faults().manual(false);
    h.faults().stall();
    let tasks: Vec<Task> = (6..9)
        .map(|i| copy_task(at(&dst, i), at(&src, i), 4096))
        .collect();
    ch.submit(&tasks, 6, &mut done);
    std::thread::sleep(timeout + Duration::from_millis(10));
    let e = Status::EngineError;
    assert_eq!(statuses(&mut ch, 3), vec![(6, e), (7, e), (8, e)]);
    assert_eq!(
        ch.counters()
            .timeouts
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

#[test]
fn an_unmap_racing_a_long_copy_returns_only_after_the_copy() {
    let (mut ch, h) = channel(ModelConfig::default(), DriverConfig::default());
    let len = 1 << 20;
    let src = region(len);
    let dst = region(len);
    scribble(src.as_ptr(), len, 11);
    h.faults().slow(Duration::from_millis(300));
    let before = h.counters();
    let mut done = Vec::new();
    ch.submit(&[copy_task(dst.as_ptr(), src.as_ptr(), len)], 1, &mut done);
    // The copy has started (the device sleeps in it, as a long transfer).
    let start = Instant::now();
    while h.counters().started == before.started {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the copy never started"
        );
        std::thread::yield_now();
    }
    let map = Arc::clone(h.map());
    let va = dst.as_ptr() as usize;
    let seen = h.clone();
    let unmapper = std::thread::spawn(move || {
        map.remove(va, len);
        // What the device had finished when the unmap returned.
        seen.counters().descriptors
    });
    let copied = unmapper.join().unwrap();
    assert!(
        copied > before.descriptors,
        "the unmap returned while the copy was still running"
    );
    let done = reap(&mut ch, 1);
    assert_eq!(done, vec![(1, Completion::SUCCESS)]);
    assert!(bytes(src.as_ptr(), len) == bytes(dst.as_ptr(), len));
}

#[test]
fn a_halt_that_only_chansts_shows_fails_the_work_at_once_not_at_the_timeout() {
    // The halt writes no completion word: only CHANSTS says HALTED. The
    // timeout is long; the stall check (1 ms) must find the halt.
    let timeout = Duration::from_secs(5);
    let (mut ch, h) = channel(
        ModelConfig {
            silent_halt: true,
            ..ModelConfig::default()
        },
        DriverConfig {
            timeout,
            stall_check: Duration::from_millis(1),
            ..DriverConfig::default()
        },
    );
    let src = region(1 << 16);
    let dst = region(1 << 16);
    scribble(src.as_ptr(), 1 << 16, 5);
    let at = |r: &DmaRegion, i: usize| {
        // SAFETY: i < 16, inside the region.
        unsafe { r.as_ptr().add(i * 4096) }
    };
    h.faults().fail_nth(2);
    let tasks: Vec<Task> = (0..4)
        .map(|i| copy_task(at(&dst, i), at(&src, i), 4096))
        .collect();
    let start = Instant::now();
    let mut done = Vec::new();
    ch.submit(&tasks, 0, &mut done);
    let got = statuses(&mut ch, 4);
    let took = start.elapsed();
    assert_eq!(got.len(), 4, "{got:?} after {took:?}");
    assert!(
        took < Duration::from_millis(500),
        "the halt was reported after {took:?} (timeout {timeout:?})"
    );
    assert!(
        got.iter().any(|(_, s)| *s == Status::EngineError),
        "{got:?}"
    );
    let c = ch.counters();
    assert_eq!(c.timeouts.load(std::sync::atomic::Ordering::Relaxed), 0);
    assert_eq!(c.halts.load(std::sync::atomic::Ordering::Relaxed), 1);
    // The channel was reset and serves again.
    let tasks: Vec<Task> = (8..12)
        .map(|i| copy_task(at(&dst, i), at(&src, i), 4096))
        .collect();
    ch.submit(&tasks, 8, &mut done);
    assert_eq!(
        statuses(&mut ch, 4),
        (8..12).map(|i| (i, Status::Success)).collect::<Vec<_>>()
    );
    assert!(bytes(at(&src, 8), 4 * 4096) == bytes(at(&dst, 8), 4 * 4096));
}

#[test]
fn a_long_descriptor_is_split_so_a_slow_legitimate_copy_is_not_timed_out() {
    // 16 MiB descriptors allowed by XFERCAP, a device at 16 MiB/s, a
    // 200 ms timeout: one 8 MiB descriptor would take 500 ms with no
    // sign of life. Assumed rate 16 MiB/s: the bound is 16 MiB/s * 50 ms
    // (816 KiB, in whole pages) a descriptor, and a completion write at
    // least as often.
    let timeout = Duration::from_millis(200);
    let rate: u64 = 16 << 20;
    let driver = DriverConfig {
        timeout,
        stall_check: Duration::from_millis(1),
        min_rate: rate,
        ..DriverConfig::default()
    };
    let (mut ch, h) = channel(
        ModelConfig {
            xfercap: 24,
            ..ModelConfig::default()
        },
        driver.clone(),
    );
    let bound = WorkBound::of(&driver);
    assert_eq!(bound.bytes, rate / 20 / 4096 * 4096);
    let len = 8 << 20;
    let src = region(len);
    let dst = region(len);
    scribble(src.as_ptr(), len, 9);
    h.faults().rate(rate);
    let before = h.counters();
    let mut done = Vec::new();
    ch.submit(&[copy_task(dst.as_ptr(), src.as_ptr(), len)], 1, &mut done);
    assert_eq!(statuses(&mut ch, 1), vec![(1, Status::Success)]);
    assert!(bytes(src.as_ptr(), len) == bytes(dst.as_ptr(), len));
    let c = h.counters();
    let descriptors = c.descriptors - before.descriptors;
    assert!(
        descriptors >= (len as u64).div_ceil(bound.bytes),
        "{descriptors} descriptors"
    );
    assert!(c.completions - before.completions >= descriptors - 1);
    assert_eq!(
        ch.counters()
            .timeouts
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

#[test]
fn a_batch_of_many_descriptors_writes_its_completion_word_within_the_bound() {
    // A device whose CHANSTS moves only with completion writes, 5 ms a
    // descriptor, a 200 ms timeout and an assumed 200 descriptors/s: at
    // most 10 descriptors (50 ms) between two completion writes, where one
    // write at the end of a batch of 100 (500 ms) would time out.
    let timeout = Duration::from_millis(200);
    let driver = DriverConfig {
        timeout,
        stall_check: Duration::from_millis(1),
        min_descriptor_rate: 200,
        ..DriverConfig::default()
    };
    assert_eq!(WorkBound::of(&driver).descriptors, 10);
    let (mut ch, h) = channel(
        ModelConfig {
            quiet_status: true,
            ..ModelConfig::default()
        },
        driver,
    );
    const N: usize = 100;
    let src = region(N * 4096);
    let dst = region(N * 4096);
    scribble(src.as_ptr(), N * 4096, 13);
    let at = |r: &DmaRegion, i: usize| {
        // SAFETY: i < N, inside the region.
        unsafe { r.as_ptr().add(i * 4096) }
    };
    h.faults().slow(Duration::from_millis(5));
    let before = h.counters();
    let tasks: Vec<Task> = (0..N)
        .map(|i| copy_task(at(&dst, i), at(&src, i), 4096))
        .collect();
    let mut done = Vec::new();
    ch.submit(&tasks, 0, &mut done);
    assert_eq!(
        statuses(&mut ch, N),
        (0..N as TaskId)
            .map(|i| (i, Status::Success))
            .collect::<Vec<_>>()
    );
    assert!(bytes(src.as_ptr(), N * 4096) == bytes(dst.as_ptr(), N * 4096));
    let writes = h.counters().completions - before.completions;
    assert!(writes >= N as u64 / 10, "{writes} completion writes");
    assert_eq!(
        ch.counters()
            .timeouts
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}
