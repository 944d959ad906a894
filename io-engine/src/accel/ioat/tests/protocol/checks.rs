//! The protocol's checks: each scenario run under the rules as they stand
//! (no violation in any interleaving) and under the old rule (loom finds
//! the data race, or the driver reports a request before its data).
//!
//! Thread: each test's own; loom runs the model's threads on it.

use std::panic::{AssertUnwindSafe, catch_unwind};

use loom::sync::Arc;
use loom::thread;

use super::device::Device;
use super::driver::Driver;
use super::rules::Rules;
use super::system::System;

/// Preemptions loom explores per execution: enough for every race below,
/// few enough that each test takes a fraction of a second.
const PREEMPTIONS: usize = 2;

/// Explores every interleaving of `scenario` under `rules`; the first
/// violation's message, if any.
fn explore(rules: Rules, scenario: fn(&mut Driver)) -> Result<(), String> {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTIONS);
    catch_unwind(AssertUnwindSafe(|| {
        builder.check(move || {
            let sys = Arc::new(System::new());
            let device = Device::new(sys.clone(), rules);
            let device = thread::spawn(move || device.run());
            let mut driver = Driver::new(sys, rules);
            scenario(&mut driver);
            driver.stop();
            device.join().unwrap();
        })
    }))
    .map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

/// Asserts that `rules` let `scenario` go wrong, as loom or the driver's
/// data check reports it.
fn assert_caught(rules: Rules, scenario: fn(&mut Driver)) {
    let Err(why) = explore(rules, scenario) else {
        panic!("{rules:?}: no interleaving went wrong");
    };
    assert!(
        why.contains("Causality violation") || why.contains("before its data landed"),
        "{rules:?}: failed for another reason: {why}"
    );
}

/// Two batches of one copy each, polled until both are reported.
fn two_batches(driver: &mut Driver) {
    driver.submit(&[(0, 2)]);
    driver.submit(&[(1, 3)]);
    poll_until(driver, 0);
}

/// One batch of two copies (completion update on the second only),
/// polled until both are reported.
fn one_batch_of_two(driver: &mut Driver) {
    driver.submit(&[(0, 2), (1, 3)]);
    poll_until(driver, 0);
}

/// The sequence of issue 18's point 1: a batch, a second batch, a third
/// built once the first two are (said to be) done, over the ring's wrap;
/// polled until all five copies are reported.
fn batches_over_the_wrap(driver: &mut Driver) {
    driver.submit(&[(0, 2)]);
    driver.submit(&[(1, 3), (0, 4)]);
    poll_until(driver, 1);
    driver.submit(&[(1, 5), (0, 6)]);
    poll_until(driver, 0);
}

/// Polls until at most `left` requests are in flight.
fn poll_until(driver: &mut Driver, left: usize) {
    while driver.in_flight() > left {
        if driver.poll() == 0 {
            thread::yield_now();
        }
    }
}

/// A batch of two copies, then a restart with both possibly in flight.
fn restart_in_flight(driver: &mut Driver) {
    driver.submit(&[(0, 2), (1, 3)]);
    if !driver.restart() {
        assert_eq!(driver.in_flight(), 2, "a broken channel reported requests");
    }
}

/// A copy, then its destination unmapped and handed back while the copy
/// may be in progress.
fn unmap_in_flight(driver: &mut Driver) {
    driver.submit(&[(0, 2)]);
    driver.unmap(2);
}

/// The rules now, with `change` applied.
fn with(change: impl FnOnce(&mut Rules)) -> Rules {
    let mut rules = Rules::NOW;
    change(&mut rules);
    rules
}

/// The old completion rule on the old model's CHANSTS (named when done,
/// so that reading it is safe in itself), and `late_word`.
fn old_completions_on_the_old_model(late_word: bool) -> Rules {
    with(|r| {
        r.chansts_completions = true;
        r.chansts_when_done = true;
        r.late_word = late_word;
    })
}

#[test]
fn completions_from_the_word_at_a_batch_end_report_only_written_data() {
    explore(Rules::NOW, two_batches).unwrap();
}

#[test]
fn completions_from_chansts_report_a_copy_the_device_is_still_doing() {
    assert_caught(with(|r| r.chansts_completions = true), two_batches);
}

#[test]
fn a_late_completion_word_is_taken_for_the_batch_end_it_names() {
    explore(with(|r| r.late_word = true), batches_over_the_wrap).unwrap();
}

#[test]
fn a_late_completion_word_after_a_chansts_read_retires_unfinished_descriptors() {
    // The stale word's wrap is what goes wrong.
    assert_caught(
        old_completions_on_the_old_model(true),
        batches_over_the_wrap,
    );
}

#[test]
fn a_completion_word_landing_between_the_drivers_two_reads_retires_unfinished_descriptors() {
    // No fault at all: a word written after the driver's load of it and
    // before its CHANSTS read is late enough (the old model's tests never
    // ran that interleaving; loom does).
    assert_caught(
        old_completions_on_the_old_model(false),
        batches_over_the_wrap,
    );
}

#[test]
fn a_release_doorbell_publishes_the_descriptors() {
    explore(Rules::NOW, one_batch_of_two).unwrap();
}

#[test]
fn a_relaxed_doorbell_lets_the_device_read_a_slot_being_written() {
    assert_caught(with(|r| r.relaxed_doorbell = true), one_batch_of_two);
}

#[test]
fn a_restart_rewrites_the_ring_and_fails_requests_only_after_a_confirmed_reset() {
    explore(Rules::NOW, restart_in_flight).unwrap();
}

#[test]
fn a_restart_without_a_confirmed_reset_races_the_step_in_progress() {
    assert_caught(with(|r| r.unconfirmed_restart = true), restart_in_flight);
}

#[test]
fn a_reset_never_confirmed_hands_nothing_back() {
    explore(with(|r| r.reset_ignored = true), restart_in_flight).unwrap();
}

#[test]
fn an_unmap_waits_for_the_copy_in_progress() {
    explore(Rules::NOW, unmap_in_flight).unwrap();
}

#[test]
fn a_copy_outside_the_map_lock_races_the_unmap() {
    assert_caught(with(|r| r.copy_outside_map_lock = true), unmap_in_flight);
}
