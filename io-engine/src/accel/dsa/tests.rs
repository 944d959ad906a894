//! Tests of the DSA driver and module on the device model: the
//! conformance suite on dedicated and shared work queues, one portal write
//! per batch (a batch of one sent as a plain descriptor), and one test per
//! model fault, each failing without the driver's handling of it: torn
//! portal writes (impossible: every submission is one `Descriptor` through
//! the seam), completion fields read before the status byte, a batch
//! whose descriptor list cannot be read, shared-WQ retry, and page faults
//! with partial completion (resumed, or failed).
//!
//! Thread: each test's own thread holds the accel channel and polls it;
//! the model's device thread executes the descriptors.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::devices::{hardware_of, model_hardware};
use super::driver::{DriverConfig, Hardware};
use super::model::{DsaModel, ModelConfig, ModelHandle, WqConfig};
use super::portal::{Retry, WorkQueue, WqInfo, WqMode};
use super::spec::{Descriptor, opcode};
use super::{Dsa, NAME};
use crate::accel::conformance::{self, Arena, Recorder, reference_crc32c, scribble};
use crate::accel::{Accel, Completion, IoVec, Module, Opcode, Status, model_count};
use crate::env::dma::{DmaMemory, register_mapper};

/// What a test does to every descriptor on its way to the device.
type Rewrite = Arc<dyn Fn(&mut Descriptor) + Send + Sync>;

/// A model work queue seen through the seam with a [`Rewrite`] applied to
/// every descriptor it is given.
struct Intercepted {
    inner: Arc<dyn WorkQueue>,
    rewrite: Rewrite,
}

// SAFETY: forwards to a work queue that keeps the contract; the tests'
// rewrites only count descriptors or move a batch's list address to
// memory the model has not mapped, which it reports as a batch page fault
// without touching anything.
unsafe impl WorkQueue for Intercepted {
    fn info(&self) -> &WqInfo {
        self.inner.info()
    }
    fn memory(&self) -> &dyn DmaMemory {
        self.inner.memory()
    }
    unsafe fn submit(&self, desc: &Descriptor) -> Result<(), Retry> {
        let mut d = *desc;
        (self.rewrite)(&mut d);
        // SAFETY: the caller's contract, passed on (a moved list address
        // names nothing the device can reach).
        unsafe { self.inner.submit(&d) }
    }
}

/// A module on the work queues of a model made with `mc` (each seen
/// through `rewrite`, when given), with the model's mapper registered
/// (kept by each work queue's hardware, dropped after it); and the model's
/// handle.
fn module_of(
    mc: ModelConfig,
    cfg: &DriverConfig,
    rewrite: Option<Rewrite>,
) -> (Arc<Dsa>, ModelHandle) {
    let model = Arc::new(DsaModel::new(mc));
    let h = model.handle();
    let mapping = register_mapper(model.mapper());
    let mut hardware = hardware_of(&model);
    if let Some(rewrite) = rewrite {
        for hw in &mut hardware {
            hw.wq = Arc::new(Intercepted {
                inner: hw.wq.clone(),
                rewrite: rewrite.clone(),
            });
        }
    }
    let dsa = Dsa::start(Hardware::all_keeping(hardware, mapping), cfg, Vec::new());
    assert!(dsa.channels() > 0, "{:?}", dsa.notes());
    (Arc::new(dsa), h)
}

/// A module of one model work queue `wq`, and the model's handle.
fn one(wq: WqConfig, cfg: &DriverConfig) -> (Arc<Dsa>, ModelHandle) {
    module_of(ModelConfig::with_wq(wq), cfg, None)
}

/// A module of one model work queue `wq` seen through `rewrite`.
fn intercepted(
    wq: WqConfig,
    cfg: &DriverConfig,
    rewrite: impl Fn(&mut Descriptor) + Send + Sync + 'static,
) -> (Arc<Dsa>, ModelHandle) {
    module_of(ModelConfig::with_wq(wq), cfg, Some(Arc::new(rewrite)))
}

fn accel_of(dsa: &Arc<Dsa>) -> Arc<Accel> {
    Accel::new(vec![dsa.clone() as Arc<dyn Module>], &[]).unwrap()
}

fn bytes<'a>(p: *const u8, len: usize) -> &'a [u8] {
    // SAFETY: callers pass arena pieces whose tasks have completed.
    unsafe { std::slice::from_raw_parts(p, len) }
}

fn assert_clean(h: &ModelHandle) {
    assert_eq!(h.violations(), Vec::new(), "model violations");
    let c = h.counters();
    assert_eq!(c.dropped, 0, "{c:?}");
    assert_eq!(c.software_errors, 0, "{c:?}");
}

// ---------------------------------------------------------------------------
// The conformance suite
// ---------------------------------------------------------------------------

fn suite(wq: WqConfig) {
    let (dsa, h) = one(wq, &DriverConfig::default());
    let accel = accel_of(&dsa);
    for op in Opcode::ALL {
        assert_eq!(accel.assigned(op), NAME, "{op}");
    }
    conformance::run_all(&accel, 4 << 20);
    let (ops, _) = accel.stats();
    for op in Opcode::ALL {
        let s = ops
            .iter()
            .find(|s| s.opcode == op && s.module == NAME)
            .unwrap();
        assert!(s.executed > 0 && s.failed == 0, "{s:?}");
    }
    let t = dsa.totals();
    assert_eq!(t.failed + t.timeouts + t.page_faults, 0, "{t:?}");
    assert!(t.batches > 0, "the mixed batch went as one batch: {t:?}");
    let c = h.counters();
    assert_eq!(c.accepted, t.portal_writes, "driver and device agree");
    assert_eq!(c.portal_writes, t.portal_writes + t.retries);
    assert_clean(&h);
}

#[test]
fn the_conformance_suite_passes_on_a_dedicated_model_wq() {
    suite(WqConfig::default());
}

#[test]
fn the_conformance_suite_passes_on_a_shared_model_wq() {
    suite(WqConfig::shared(32));
}

#[test]
fn small_transfer_and_batch_limits_split_and_still_pass() {
    // 4 KiB transfers: every large case runs as a sequence of
    // descriptors; batches of at most 4.
    suite(WqConfig {
        max_transfer: 4096,
        max_batch: 4,
        size: 8,
        ..WqConfig::default()
    });
}

#[test]
fn the_flags_make_model_work_queues() {
    let args = super::DsaArgs {
        dsa_model: 2,
        ..Default::default()
    };
    let modules = args.modules(register_mapper);
    assert_eq!(modules.len(), 1);
    let m = &modules[0];
    assert_eq!(m.name(), NAME);
    assert_eq!(
        m.implementation().matches("dsa-model-").count(),
        2,
        "{}",
        m.implementation()
    );
    let notes = m.notes().join("\n");
    assert!(notes.contains("dsa: 2 work queues ready"), "{notes}");
    let accel = Accel::new(modules, &[]).unwrap();
    conformance::run_all(&accel, 1 << 16);
}

#[test]
fn model_wqs_are_refused_without_the_feature() {
    let model_wqs = |s, built_in| model_count(s, built_in, super::args::MODEL_NOT_BUILT);
    let e = model_wqs("2", false).unwrap_err();
    assert!(
        e.contains("--dsa-model") && e.contains("`dsa-model` cargo feature"),
        "{e}"
    );
    assert_eq!(model_wqs("0", false), Ok(0));
    assert_eq!(model_wqs("3", true), Ok(3));
}

// ---------------------------------------------------------------------------
// Batches
// ---------------------------------------------------------------------------

#[test]
fn a_framework_batch_is_one_portal_write_and_a_batch_of_one_a_plain_descriptor() {
    let (dsa, h) = one(WqConfig::default(), &DriverConfig::default());
    let accel = accel_of(&dsa);
    let ch = accel.channel();
    let arena = Arena::new(8 << 20);
    let r = Recorder::new(&ch);
    let before = h.counters();
    let mut batch = r.q.batch();
    let mut pairs = Vec::new();
    for i in 0..256u64 {
        let src = arena.take(512, 0);
        let dst = arena.take(512, 0);
        scribble(src, 512, i);
        // SAFETY: arena pieces, untouched until the wait.
        unsafe { batch.copy(dst, src, 512, i) }.unwrap();
        pairs.push((src, dst));
    }
    batch.submit();
    r.wait(256, "batch of 256");
    for (src, dst) in pairs {
        assert!(bytes(src, 512) == bytes(dst, 512));
    }
    let c = h.counters();
    assert_eq!(c.portal_writes - before.portal_writes, 1, "{c:?}");
    assert_eq!(c.batches - before.batches, 1, "{c:?}");
    assert_eq!(
        c.descriptors - before.descriptors,
        256 + 1,
        "256 and the batch"
    );

    // One task: no batch descriptor (a batch of 1 is out of range).
    let r = Recorder::new(&ch);
    let before = h.counters();
    let src = arena.take(512, 0);
    let dst = arena.take(512, 0);
    // SAFETY: arena pieces, untouched until the wait.
    unsafe { r.q.copy(dst, src, 512, 0) }.unwrap();
    r.wait(1, "one copy");
    let c = h.counters();
    assert_eq!(c.portal_writes - before.portal_writes, 1);
    assert_eq!(c.batches, before.batches, "no batch for one task");
    assert_clean(&h);
}

// ---------------------------------------------------------------------------
// Model faults
// ---------------------------------------------------------------------------

#[test]
fn every_portal_write_is_one_whole_descriptor_through_the_seam() {
    // The seam takes a `&Descriptor` (64 bytes, 64-byte aligned: checked at
    // compile time in spec.rs), so the driver has no way to make a partial
    // or split portal write; the model counts every portal write, and each
    // one the device saw came through `submit` whole.
    const _: () = assert!(std::mem::size_of::<Descriptor>() == 64);
    const _: () = assert!(std::mem::align_of::<Descriptor>() == 64);
    let submits = Arc::new(AtomicU64::new(0));
    let seen = submits.clone();
    let (dsa, h) = intercepted(WqConfig::default(), &DriverConfig::default(), move |_| {
        seen.fetch_add(1, Ordering::Relaxed);
    });
    let accel = accel_of(&dsa);
    conformance::run_all(&accel, 1 << 20);
    let c = h.counters();
    assert_eq!(c.portal_writes, submits.load(Ordering::Relaxed), "{c:?}");
    assert!(
        !h.violations()
            .iter()
            .any(|v| matches!(v, super::model::Violation::TornWrite { .. })),
        "{:?}",
        h.violations()
    );
    assert_clean(&h);
}

/// Runs crc32c, copy_crc32c and compare cases (whose results are in the
/// completion record's fields) and checks each result.
fn record_fields_cases(accel: &Arc<Accel>) {
    let ch = accel.channel();
    let arena = Arena::new(4 << 20);
    for (i, len) in [1usize, 64, 4096, 65536].into_iter().enumerate() {
        arena.reset();
        let src = arena.take(len, 0);
        let dst = arena.take(len, 0);
        let other = arena.take(len, 0);
        scribble(src, len, i as u64);
        // SAFETY: distinct arena pieces.
        unsafe { std::ptr::copy_nonoverlapping(src, other, len) };
        // SAFETY: inside the piece.
        unsafe { *other.add(len - 1) ^= 1 };
        let r = Recorder::new(&ch);
        // SAFETY: arena pieces, untouched until the wait.
        unsafe {
            r.q.crc32c(&[IoVec::new(src, len)], 5, 1).unwrap();
            r.q.copy_crc32c(dst, &[IoVec::new(src, len)], 0, 2).unwrap();
            r.q.compare(src, other, len, 3).unwrap();
        }
        r.wait(3, "record fields");
        let mut seen = r.seen.borrow().clone();
        seen.sort_by_key(|(t, _)| *t);
        let want = vec![
            (
                1,
                Completion {
                    status: Status::Success,
                    crc: reference_crc32c(5, bytes(src, len)),
                },
            ),
            (
                2,
                Completion {
                    status: Status::Success,
                    crc: reference_crc32c(0, bytes(src, len)),
                },
            ),
            (3, Completion::with(Status::Miscompare)),
        ];
        assert_eq!(seen, want, "len {len}");
    }
}

#[test]
fn record_fields_are_read_only_after_the_status_byte() {
    // The model first fills each record with garbage (status 0), then the
    // real fields 200 µs later, then the status 200 µs after that: a driver
    // that read the CRC or the compare result before the status byte said
    // the record was written would report garbage.
    let (dsa, h) = one(WqConfig::default(), &DriverConfig::default());
    h.faults().slow_completion(Duration::from_micros(200));
    record_fields_cases(&accel_of(&dsa));
    assert!(h.counters().completions > 0);
    assert_clean(&h);
}

/// A rewrite that gives the device an unreadable descriptor list for the
/// first `n` batch descriptors (their list address moved to memory the
/// device has not mapped), as a device meets a list in memory that went
/// away.
fn bad_lists(n: u64) -> impl Fn(&mut Descriptor) + Send + Sync + 'static {
    let left = AtomicU64::new(n);
    move |d| {
        if d.opcode() == opcode::BATCH
            && left
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok()
        {
            d.src = 0x10_0000;
        }
    }
}

/// A batch of 8 copies of 4 KiB on `accel`; returns the completions by
/// tag and whether each destination holds its source.
fn batch_of_copies(accel: &Arc<Accel>) -> (Vec<(u64, Completion)>, Vec<bool>) {
    let ch = accel.channel();
    let arena = Arena::new(1 << 20);
    let r = Recorder::new(&ch);
    let mut batch = r.q.batch();
    let mut pairs = Vec::new();
    for i in 0..8u64 {
        let src = arena.take(4096, 0);
        let dst = arena.take(4096, 0);
        scribble(src, 4096, i + 40);
        scribble(dst, 4096, i + 80);
        // SAFETY: arena pieces, untouched until the wait.
        unsafe { batch.copy(dst, src, 4096, i) }.unwrap();
        pairs.push((src, dst));
    }
    batch.submit();
    r.wait(8, "batch of copies");
    let mut seen = r.seen.borrow().clone();
    seen.sort_by_key(|(t, _)| *t);
    let copied = pairs
        .iter()
        .map(|&(s, d)| bytes(s, 4096) == bytes(d, 4096))
        .collect();
    (seen, copied)
}

#[test]
fn a_batch_whose_list_cannot_be_read_is_sent_again_never_reported_done() {
    let (dsa, h) = intercepted(WqConfig::default(), &DriverConfig::default(), bad_lists(1));
    let (seen, copied) = batch_of_copies(&accel_of(&dsa));
    assert!(
        seen.iter().all(|(_, c)| *c == Completion::SUCCESS),
        "{seen:?}"
    );
    assert!(copied.iter().all(|&c| c), "every copy done once reported");
    let t = dsa.totals();
    assert_eq!(t.not_run, 8, "{t:?}");
    assert_eq!(t.batches, 2, "sent again as one batch: {t:?}");
    assert!(h.counters().batches >= 2);
}

#[test]
fn a_batch_list_that_never_reads_fails_its_tasks_after_bounded_attempts() {
    let cfg = DriverConfig {
        max_stalls: 3,
        ..DriverConfig::default()
    };
    let (dsa, _h) = intercepted(WqConfig::default(), &cfg, bad_lists(u64::MAX));
    let (seen, copied) = batch_of_copies(&accel_of(&dsa));
    assert!(
        seen.iter()
            .all(|(_, c)| *c == Completion::with(Status::EngineError)),
        "{seen:?}"
    );
    assert!(copied.iter().all(|&c| !c), "nothing was copied");
    let t = dsa.totals();
    assert_eq!(t.batches, 4, "the first send and 3 more: {t:?}");
    assert_eq!(t.failed, 8);
}

#[test]
fn a_shared_wq_that_answers_retry_is_offered_again_on_later_polls() {
    let (dsa, h) = one(WqConfig::shared(16), &DriverConfig::default());
    h.faults().refuse(5);
    let (seen, copied) = batch_of_copies(&accel_of(&dsa));
    assert!(
        seen.iter().all(|(_, c)| *c == Completion::SUCCESS),
        "{seen:?}"
    );
    assert!(copied.iter().all(|&c| c));
    let t = dsa.totals();
    assert_eq!(t.retries, 5, "{t:?}");
    assert_eq!(t.portal_writes, 1, "{t:?}");
    assert_eq!(h.counters().retries, 5);
    assert_clean(&h);
}

#[test]
fn a_shared_wq_that_keeps_refusing_fails_the_tasks_without_spinning() {
    let cfg = DriverConfig {
        retry_timeout: Duration::from_millis(50),
        ..DriverConfig::default()
    };
    let (dsa, h) = one(WqConfig::shared(16), &cfg);
    h.faults().refuse(u64::MAX);
    let accel = accel_of(&dsa);
    let ch = accel.channel();
    let arena = Arena::new(1 << 20);
    let r = Recorder::new(&ch);
    let (src, dst) = (arena.take(4096, 0), arena.take(4096, 0));
    let start = Instant::now();
    // SAFETY: arena pieces, untouched until the wait.
    unsafe { r.q.copy(dst, src, 4096, 7) }.unwrap();
    assert!(
        start.elapsed() < Duration::from_millis(20),
        "a submission does not wait for the WQ"
    );
    let mut polls = 0u64;
    while r.seen.borrow().is_empty() {
        let mut got = r.seen.borrow_mut();
        if r.q.reap(&mut got) == 0 {
            polls += 1;
        }
        drop(got);
        assert!(start.elapsed() < Duration::from_secs(10), "never failed");
    }
    assert_eq!(r.only("refused"), Completion::with(Status::EngineError));
    let t = dsa.totals();
    assert_eq!(t.portal_writes, 0);
    // Backed off: far fewer ENQCMDs than polls.
    assert!(
        t.retries * 8 < polls,
        "{} ENQCMDs in {polls} polls",
        t.retries
    );
    assert_eq!(h.counters().accepted, 0);
}

#[test]
fn a_partial_completion_is_resumed_from_the_bytes_completed() {
    let (dsa, h) = one(WqConfig::default(), &DriverConfig::default());
    let accel = accel_of(&dsa);
    let ch = accel.channel();
    let arena = Arena::new(1 << 20);
    let len = 65536;
    for (i, op) in [
        Opcode::Copy,
        Opcode::Crc32c,
        Opcode::CopyCrc32c,
        Opcode::Fill,
    ]
    .into_iter()
    .enumerate()
    {
        arena.reset();
        let src = arena.take(len, 0);
        let dst = arena.take(len, 0);
        scribble(src, len, 9 + i as u64);
        scribble(dst, len, 99);
        h.faults().page_fault(1, 1000 + 4096 * i as u32, i % 2 == 0);
        let r = Recorder::new(&ch);
        // SAFETY: arena pieces, untouched until the wait.
        unsafe {
            match op {
                Opcode::Copy => r.q.copy(dst, src, len, 0),
                Opcode::Crc32c => r.q.crc32c(&[IoVec::new(src, len)], 3, 0),
                Opcode::CopyCrc32c => r.q.copy_crc32c(dst, &[IoVec::new(src, len)], 3, 0),
                _ => r.q.fill(dst, 0x5a, len, 0),
            }
        }
        .unwrap();
        r.wait(1, "faulted");
        let c = r.only("faulted");
        assert_eq!(c.status, Status::Success, "{op}");
        match op {
            Opcode::Copy => assert!(bytes(dst, len) == bytes(src, len)),
            Opcode::Crc32c => assert_eq!(c.crc, reference_crc32c(3, bytes(src, len))),
            Opcode::CopyCrc32c => {
                assert_eq!(c.crc, reference_crc32c(3, bytes(src, len)));
                assert!(bytes(dst, len) == bytes(src, len));
            }
            _ => assert!(bytes(dst, len).iter().all(|&b| b == 0x5a)),
        }
    }
    let t = dsa.totals();
    assert_eq!(t.page_faults, 4, "{t:?}");
    assert_eq!(t.resumed, 4, "{t:?}");
    assert_eq!(t.touched, 0, "IOVAs are not touched: {t:?}");
    assert_eq!(h.counters().page_faults, 4);
    assert_clean(&h);
}

#[test]
fn a_partial_completion_fails_when_resumption_is_off() {
    let cfg = DriverConfig {
        resume_faults: false,
        ..DriverConfig::default()
    };
    let (dsa, h) = one(WqConfig::default(), &cfg);
    let accel = accel_of(&dsa);
    let ch = accel.channel();
    let arena = Arena::new(1 << 20);
    let (src, dst) = (arena.take(65536, 0), arena.take(65536, 0));
    scribble(src, 65536, 1);
    h.faults().page_fault(1, 8192, true);
    let r = Recorder::new(&ch);
    // SAFETY: arena pieces, untouched until the wait.
    unsafe { r.q.copy(dst, src, 65536, 0) }.unwrap();
    r.wait(1, "faulted copy");
    assert_eq!(
        r.only("faulted copy"),
        Completion::with(Status::EngineError)
    );
    let t = dsa.totals();
    assert_eq!((t.page_faults, t.resumed, t.failed), (1, 0, 1), "{t:?}");
}

#[test]
fn model_hardware_names_each_wq() {
    let (hw, _mapper) = model_hardware(ModelConfig {
        wqs: vec![WqConfig::default(), WqConfig::shared(8)],
        ..ModelConfig::default()
    });
    assert_eq!(hw.len(), 2);
    assert_eq!(hw[1].wq.info().mode, WqMode::Shared);
}

#[test]
fn under_shared_virtual_addressing_a_faulting_page_is_touched_and_resumed() {
    // IOVA = virtual address, as with the idxd driver's SVA: the driver
    // touches the faulting byte (inside the request's own buffer) before
    // it resumes; the data must be untouched by that and the task done.
    let (dsa, h) = module_of(
        ModelConfig {
            iova_offset: 0,
            ..ModelConfig::default()
        },
        &DriverConfig::default(),
        None,
    );
    let accel = accel_of(&dsa);
    let ch = accel.channel();
    let arena = Arena::new(1 << 20);
    let len = 65536;
    let (src, dst) = (arena.take(len, 0), arena.take(len, 0));
    scribble(src, len, 77);
    for write in [true, false] {
        h.faults().page_fault(1, 5000, write);
        let r = Recorder::new(&ch);
        // SAFETY: arena pieces, untouched until the wait.
        unsafe { r.q.copy_crc32c(dst, &[IoVec::new(src, len)], 0, 0) }.unwrap();
        r.wait(1, "faulted under SVA");
        let c = r.only("faulted under SVA");
        assert_eq!(c.status, Status::Success);
        assert_eq!(c.crc, reference_crc32c(0, bytes(src, len)));
        assert!(bytes(dst, len) == bytes(src, len));
    }
    let t = dsa.totals();
    assert_eq!((t.resumed, t.touched), (2, 2), "{t:?}");
    assert_clean(&h);
}
