//! Tests of the framework with the software module: the conformance
//! suite, the CRC convention, batches, the task pool, assignment and
//! stats.

use std::rc::Rc;
use std::sync::Arc;

use proptest::prelude::*;

use super::conformance::{self, Arena, Recorder, reference_crc32c};
use super::software::kernels::crc32c_update;
use super::*;

#[test]
#[cfg_attr(miri, ignore)]
fn software_passes_the_conformance_suite() {
    let accel = Accel::software();
    conformance::run_all(&accel, 4 << 20);
    let (ops, mods) = accel.stats();
    for op in Opcode::ALL {
        let s = ops
            .iter()
            .find(|s| s.opcode == op && s.module == "software")
            .unwrap();
        assert!(s.executed > 0, "{op} counted nothing");
        assert_eq!(s.failed, 0, "{op}");
    }
    let compare = ops
        .iter()
        .find(|s| s.opcode == Opcode::Compare && s.module == "software")
        .unwrap();
    assert!(compare.miscompares > 0);
    assert!(mods[0].batches > 0);
}

#[test]
fn crc32c_check_value_and_chaining() {
    assert_eq!(crc32c_update(0, b"123456789"), 0xE306_9283);
    assert_eq!(reference_crc32c(0, b"123456789"), 0xE306_9283);
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let whole = crc32c_update(0, &data);
    for cut in [0, 1, 7, 4096, 9999, 10_000] {
        let (a, b) = data.split_at(cut);
        assert_eq!(crc32c_update(crc32c_update(0, a), b), whole, "cut at {cut}");
    }
    // SPDK's convention: its result for seed s is the complement of ours.
    let spdk_style = |seed: u32, d: &[u8]| !reference_crc32c(seed, d);
    assert_eq!(spdk_style(0, b"123456789"), !0xE306_9283u32);
}

#[test]
#[cfg_attr(miri, ignore)]
fn crc32c_through_the_framework_chains_across_tasks() {
    let accel = Accel::software();
    let ch = accel.channel();
    let data = b"123456789".to_vec();
    let r = Recorder::new(&ch);
    // SAFETY: `data` outlives the wait.
    unsafe { r.q.crc32c(&[IoVec::new(data.as_ptr(), 9)], 0, 0) }.unwrap();
    r.wait(1, "crc");
    assert_eq!(r.only("crc").crc, 0xE306_9283);
    let r = Recorder::new(&ch);
    let first = crc32c_update(0, &data[..4]);
    // SAFETY: as above.
    unsafe { r.q.crc32c(&[IoVec::new(data[4..].as_ptr(), 5)], first, 0) }.unwrap();
    r.wait(1, "chained crc");
    assert_eq!(r.only("chained crc").crc, 0xE306_9283);
}

#[test]
fn completions_wait_in_their_queue_until_reaped() {
    let accel = Accel::software();
    let ch = accel.channel();
    let q = ch.queue();
    let other = ch.queue();
    let src = vec![1u8; 4096];
    let mut dst = vec![0u8; 4096];
    // SAFETY: the buffers outlive the reap below.
    unsafe { q.copy(dst.as_mut_ptr(), src.as_ptr(), 4096, 7) }.unwrap();
    let mut b = q.batch();
    // SAFETY: as above.
    unsafe { b.fill(dst.as_mut_ptr(), 3, 4096, 8) }.unwrap();
    b.submit();
    // The software module has run both, but nothing was handed back inside
    // the submissions: the records wait for the submitter.
    assert_eq!(
        (ch.in_flight(), q.in_flight(), other.in_flight()),
        (2, 2, 0)
    );
    let mut out = Vec::new();
    assert_eq!(
        other.reap(&mut out),
        0,
        "another submitter's queue got them"
    );
    assert_eq!(q.reap(&mut out), 2);
    assert_eq!(
        out,
        vec![(7, Completion::SUCCESS), (8, Completion::SUCCESS)],
        "records in completion order, with their tags"
    );
    assert_eq!((ch.in_flight(), q.in_flight()), (0, 0));
    assert_eq!(q.reap(&mut out), 0);
    assert_eq!(out.len(), 2, "a reap with nothing to hand back keeps out");
    assert!(dst.iter().all(|&b| b == 3));
}

#[test]
fn a_reap_appends_to_a_list_that_is_not_empty() {
    let accel = Accel::software();
    let ch = accel.channel();
    let q = ch.queue();
    let src = [2u8; 64];
    let mut dst = [0u8; 128];
    let mut out = vec![(99, Completion::with(Status::EngineError))];
    // SAFETY: the buffers outlive the reaps.
    unsafe { q.copy(dst.as_mut_ptr(), src.as_ptr(), 64, 1) }.unwrap();
    assert_eq!(q.reap(&mut out), 1);
    // SAFETY: as above.
    unsafe { q.copy(dst.as_mut_ptr().add(64), src.as_ptr(), 64, 2) }.unwrap();
    assert_eq!(q.reap(&mut out), 1);
    let tags: Vec<u64> = out.iter().map(|r| r.0).collect();
    assert_eq!(tags, [99, 1, 2]);
}

#[test]
fn a_dropped_queue_gives_back_its_unreaped_tasks() {
    let accel = Accel::with_tasks(Vec::new(), &[], 2).unwrap();
    let ch = accel.channel();
    let src = [3u8; 32];
    let mut dst = [0u8; 64];
    {
        let q = ch.queue();
        // SAFETY: the buffers outlive the channel's use of them.
        unsafe { q.copy(dst.as_mut_ptr(), src.as_ptr(), 32, 0) }.unwrap();
        // SAFETY: as above.
        unsafe { q.copy(dst.as_mut_ptr().add(32), src.as_ptr(), 32, 1) }.unwrap();
        assert_eq!(ch.in_flight(), 2);
    }
    assert_eq!(ch.in_flight(), 0, "the dropped queue's records held tasks");
    let r = Recorder::new(&ch);
    // SAFETY: as above.
    unsafe { r.q.copy(dst.as_mut_ptr(), src.as_ptr(), 32, 5) }.unwrap();
    r.wait(1, "after a dropped queue");
    assert_eq!(r.only("after a dropped queue"), Completion::SUCCESS);
    assert_eq!(r.seen.borrow()[0].0, 5, "no record of the dropped queue");
}

#[test]
fn a_batch_counts_its_tasks_and_bytes_once_per_kind() {
    let accel = Accel::software();
    let ch = accel.channel();
    let r = Recorder::new(&ch);
    let src = [4u8; 256];
    let mut dst = vec![0u8; 256 * 8];
    let mut b = r.q.batch();
    for i in 0..8 {
        // SAFETY: the buffers outlive the wait.
        unsafe {
            if i % 4 == 3 {
                b.fill(dst.as_mut_ptr().add(i * 256), 1, 100, i as u64)
            } else {
                b.copy(dst.as_mut_ptr().add(i * 256), src.as_ptr(), 256, i as u64)
            }
        }
        .unwrap();
    }
    b.submit();
    r.wait(8, "mixed batch");
    let (ops, mods) = accel.stats();
    let get = |op| {
        let s = ops
            .iter()
            .find(|s| s.opcode == op && s.module == "software")
            .unwrap();
        (s.executed, s.bytes, s.failed)
    };
    assert_eq!(get(Opcode::Copy), (6, 6 * 256, 0));
    assert_eq!(get(Opcode::Fill), (2, 200, 0));
    assert_eq!(mods[0].batches, 1);
}

#[test]
fn a_batch_is_one_hand_off_and_its_limit_is_enforced() {
    let accel = Accel::software();
    let ch = accel.channel();
    let r = Recorder::new(&ch);
    let src = [7u8; 64];
    let mut dst = vec![0u8; 64 * software::MAX_BATCH];
    let before = accel.stats().1[0].batches;
    let mut b = r.q.batch();
    for i in 0..software::MAX_BATCH {
        // SAFETY: the buffers outlive the wait.
        unsafe { b.copy(dst.as_mut_ptr().add(i * 64), src.as_ptr(), 64, i as u64) }.unwrap();
    }
    assert_eq!(ch.max_batch(Opcode::Copy), software::MAX_BATCH);
    // SAFETY: refused before use.
    let e = unsafe { b.copy(dst.as_mut_ptr(), src.as_ptr(), 64, 0) }.unwrap_err();
    assert_eq!(
        e,
        AccelError::BatchFull {
            module: "software",
            max: software::MAX_BATCH
        }
    );
    b.submit();
    r.wait(software::MAX_BATCH, "full batch");
    assert_eq!(accel.stats().1[0].batches, before + 1);
    assert!(dst.iter().all(|&x| x == 7));
}

#[test]
fn a_dropped_batch_returns_its_tasks_without_records() {
    let accel = Accel::software();
    let ch = accel.channel();
    let r = Recorder::new(&ch);
    let src = [1u8; 16];
    let mut dst = [0u8; 16];
    {
        let mut b = r.q.batch();
        // SAFETY: never submitted.
        unsafe { b.copy(dst.as_mut_ptr(), src.as_ptr(), 16, 0) }.unwrap();
        assert_eq!(ch.in_flight(), 1);
    }
    assert_eq!(ch.in_flight(), 0);
    assert_eq!(r.q.in_flight(), 0);
    let mut out = Vec::new();
    assert_eq!(r.q.reap(&mut out), 0, "an unsubmitted task made a record");
    assert_eq!(dst, [0u8; 16]);
}

#[test]
fn an_exhausted_task_pool_refuses_and_recovers() {
    let accel = Accel::with_tasks(Vec::new(), &[], 4).unwrap();
    let ch = accel.channel();
    let r = Recorder::new(&ch);
    let src = [9u8; 8];
    let mut dst = [0u8; 40];
    for i in 0..4 {
        // SAFETY: the buffers outlive the wait.
        unsafe {
            r.q.copy(dst.as_mut_ptr().add(i * 8), src.as_ptr(), 8, i as u64)
        }
        .unwrap();
    }
    // SAFETY: refused before use.
    let e = unsafe { r.q.copy(dst.as_mut_ptr().add(32), src.as_ptr(), 8, 9) }.unwrap_err();
    assert_eq!(e, AccelError::NoTask { capacity: 4 });
    assert!(e.to_string().contains("all 4 accel tasks"));
    r.wait(4, "pool");
    // SAFETY: as above.
    unsafe { r.q.copy(dst.as_mut_ptr().add(32), src.as_ptr(), 8, 9) }.unwrap();
    r.wait(5, "pool after poll");
    assert!(dst.iter().all(|&x| x == 9));
}

#[test]
fn channels_are_per_thread_and_shared_on_a_thread() {
    let accel = Accel::software();
    let a = accel.channel();
    let b = accel.channel();
    assert!(Rc::ptr_eq(&a, &b));
    let other = Accel::software();
    assert!(!Rc::ptr_eq(&a, &other.channel()));
    let accel2 = accel.clone();
    std::thread::spawn(move || {
        let c = accel2.channel();
        assert_eq!(c.in_flight(), 0);
    })
    .join()
    .unwrap();
}

#[test]
fn assignments_parse_and_are_checked() {
    let a: Assignment = "copy=software".parse().unwrap();
    assert_eq!(a.op, Opcode::Copy);
    assert_eq!(a.module, "software");
    for bad in ["copy", "=software", "copy=", "move=software"] {
        assert!(
            matches!(bad.parse::<Assignment>(), Err(AccelError::BadAssignment(_))),
            "{bad}"
        );
    }
    let e = Accel::new(Vec::new(), &["fill=ioat".parse().unwrap()])
        .err()
        .unwrap();
    assert_eq!(e, AccelError::UnknownModule("ioat".into()));
    let accel = Accel::new(Vec::new(), &["fill=software".parse().unwrap()]).unwrap();
    assert!(accel.assignments().iter().all(|(_, m)| *m == "software"));
}

/// A module that claims copy only and has no channel for any thread.
struct Absent;
impl Module for Absent {
    fn name(&self) -> &'static str {
        "absent"
    }
    fn supports(&self, op: Opcode) -> bool {
        op == Opcode::Copy
    }
    fn max_transfer(&self, _op: Opcode) -> usize {
        4096
    }
    fn max_batch(&self) -> usize {
        8
    }
    fn implementation(&self) -> String {
        "nothing".into()
    }
    fn create_channel(&self) -> Option<Box<dyn ModuleChannel>> {
        None
    }
}

#[test]
fn a_module_without_a_channel_falls_back_to_software_and_says_so() {
    let accel = Accel::new(vec![Arc::new(Absent)], &[]).unwrap();
    assert_eq!(accel.assigned(Opcode::Copy), "absent");
    assert_eq!(accel.assigned(Opcode::Fill), "software");
    assert!(
        Accel::new(vec![Arc::new(Absent)], &["fill=absent".parse().unwrap()]).is_err(),
        "absent does not support fill"
    );
    let ch = accel.channel();
    assert_eq!(ch.module_for(Opcode::Copy), "software");
    let notes = accel.notes();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("copy (assigned to absent)"), "{notes:?}");
    let r = Recorder::new(&ch);
    let src = [5u8; 100];
    let mut dst = [0u8; 100];
    // SAFETY: the buffers outlive the wait.
    unsafe { r.q.copy(dst.as_mut_ptr(), src.as_ptr(), 100, 0) }.unwrap();
    r.wait(1, "fallback copy");
    assert_eq!(dst, src);
}

/// A module that holds its copies until a poll runs them (as an offload
/// engine does), and refuses 13-byte copies at once.
struct Later;
impl Module for Later {
    fn name(&self) -> &'static str {
        "later"
    }
    fn supports(&self, op: Opcode) -> bool {
        op == Opcode::Copy
    }
    fn max_transfer(&self, _op: Opcode) -> usize {
        1 << 20
    }
    fn max_batch(&self) -> usize {
        8
    }
    fn implementation(&self) -> String {
        "a list".into()
    }
    fn create_channel(&self) -> Option<Box<dyn ModuleChannel>> {
        Some(Box::new(LaterChannel(Vec::new())))
    }
}

/// The copies `Later` holds: (id, dst, src, len).
struct LaterChannel(Vec<(TaskId, *mut u8, *const u8, usize)>);
impl ModuleChannel for LaterChannel {
    fn submit(
        &mut self,
        tasks: &[Task],
        first: TaskId,
        done: &mut Vec<(TaskId, Completion)>,
    ) -> Submission {
        for (k, t) in tasks.iter().enumerate() {
            let id = first + k as TaskId;
            if t.len == 13 {
                done.push((id, Completion::with(Status::EngineError)));
            } else {
                self.0.push((id, t.dst, t.src, t.len));
            }
        }
        Submission::Submitted
    }
    fn poll(&mut self, done: &mut Vec<(TaskId, Completion)>) -> usize {
        let n = self.0.len();
        for (id, dst, src, len) in self.0.drain(..) {
            // SAFETY: the submitter's promise: the buffers stay valid until
            // the task is reported.
            unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
            done.push((id, Completion::SUCCESS));
        }
        n
    }
    fn in_flight(&self) -> usize {
        self.0.len()
    }
}

#[test]
fn a_module_that_holds_its_tasks_reports_them_from_its_poll() {
    let accel = Accel::new(vec![Arc::new(Later)], &[]).unwrap();
    let ch = accel.channel();
    assert_eq!(ch.module_for(Opcode::Copy), "later");
    let q = ch.queue();
    let src = [6u8; 64];
    let mut dst = vec![0u8; 64 * 16];
    let base = dst.as_mut_ptr();
    let d = |i: usize| base.wrapping_add(i * 64);
    // Two batches held at once, each mixing held copies with fills the
    // software module runs at once, one copy refused by the module, and
    // a single copy held too.
    let mut tags = Vec::new();
    for round in 0..2u64 {
        let mut b = q.batch();
        for i in 0..4u64 {
            let k = (round * 4 + i) as usize;
            let tag = round * 10 + i;
            // SAFETY: the buffers outlive the reaps below.
            unsafe {
                if i == 2 {
                    b.fill(d(k), 9, 64, tag)
                } else if i == 3 && round == 1 {
                    b.copy(d(k), src.as_ptr(), 13, tag)
                } else {
                    b.copy(d(k), src.as_ptr(), 64, tag)
                }
            }
            .unwrap();
            tags.push(tag);
        }
        b.submit();
    }
    // SAFETY: as above.
    unsafe { q.copy(d(8), src.as_ptr(), 64, 99) }.unwrap();
    tags.push(99);
    assert_eq!(q.in_flight(), 9);
    let mut out = Vec::new();
    while out.len() < 9 {
        q.reap(&mut out);
    }
    assert_eq!(ch.in_flight(), 0);
    let mut got: Vec<u64> = out.iter().map(|r| r.0).collect();
    got.sort_unstable();
    tags.sort_unstable();
    assert_eq!(got, tags, "every task reported once, under its own tag");
    for &(tag, c) in &out {
        let want = if tag == 13 {
            Status::EngineError
        } else {
            Status::Success
        };
        assert_eq!(c.status, want, "tag {tag}");
    }
    for k in [0, 1, 3, 4, 5, 8] {
        assert!(dst[k * 64..k * 64 + 64].iter().all(|&x| x == 6), "copy {k}");
    }
    assert!(
        dst[7 * 64..7 * 64 + 13].iter().all(|&x| x == 0),
        "refused copy ran"
    );
    let (ops, mods) = accel.stats();
    let get = |op, module| {
        let s = ops
            .iter()
            .find(|s| s.opcode == op && s.module == module)
            .unwrap();
        (s.executed, s.failed, s.bytes)
    };
    assert_eq!(get(Opcode::Copy, "later"), (6, 1, 6 * 64));
    assert_eq!(get(Opcode::Fill, "software"), (2, 0, 2 * 64));
    let batches = |m| mods.iter().find(|s| s.module == m).unwrap().batches;
    assert_eq!((batches("later"), batches("software")), (3, 2));
    // The stages are idle again: more rounds reuse them.
    for round in 0..3u64 {
        // SAFETY: as above.
        unsafe { q.copy(d(10), src.as_ptr(), 64, 100 + round) }.unwrap();
        out.clear();
        while out.is_empty() {
            q.reap(&mut out);
        }
        assert_eq!(out, [(100 + round, Completion::SUCCESS)]);
    }
    // Singles held at once (each parks its stage and the next one builds
    // in another), and a single the module refuses at submission.
    for (i, len) in [64, 64, 13, 64].into_iter().enumerate() {
        // SAFETY: as above.
        unsafe { q.copy(d(11 + i), src.as_ptr(), len, 200 + i as u64) }.unwrap();
    }
    assert_eq!(q.in_flight(), 4);
    out.clear();
    while out.len() < 4 {
        q.reap(&mut out);
    }
    out.sort_unstable_by_key(|r| r.0);
    let statuses: Vec<(u64, Status)> = out.iter().map(|r| (r.0, r.1.status)).collect();
    assert_eq!(
        statuses,
        [
            (200, Status::Success),
            (201, Status::Success),
            (202, Status::EngineError),
            (203, Status::Success)
        ]
    );
    for k in [11, 12, 14] {
        assert!(dst[k * 64..k * 64 + 64].iter().all(|&x| x == 6), "copy {k}");
    }
}

#[test]
fn stats_count_bytes_failures_and_miscompares() {
    let accel = Accel::software();
    let ch = accel.channel();
    let r = Recorder::new(&ch);
    let a = [1u8; 512];
    let mut b = [1u8; 512];
    // SAFETY: the buffers outlive the wait.
    unsafe {
        r.q.compare(a.as_ptr(), b.as_ptr(), 512, 0).unwrap();
    }
    r.wait(1, "compare");
    b[100] = 2;
    // SAFETY: as above.
    unsafe { r.q.compare(a.as_ptr(), b.as_ptr(), 512, 1).unwrap() };
    r.wait(2, "compare");
    let (ops, _) = accel.stats();
    let s = ops
        .iter()
        .find(|s| s.opcode == Opcode::Compare && s.module == "software")
        .unwrap();
    assert_eq!(
        (s.executed, s.miscompares, s.failed, s.bytes),
        (2, 1, 0, 512)
    );
}

#[derive(Debug, Clone)]
enum Op {
    Copy { len: usize, so: usize, d_o: usize },
    Fill { len: usize, o: usize, byte: u8 },
    Compare { len: usize, flip: Option<usize> },
    Crc { lens: Vec<usize>, seed: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1usize..20_000, 0usize..64, 0usize..64).prop_map(|(len, so, d_o)| Op::Copy {
            len,
            so,
            d_o
        }),
        (1usize..20_000, 0usize..64, any::<u8>()).prop_map(|(len, o, byte)| Op::Fill {
            len,
            o,
            byte
        }),
        (1usize..20_000, proptest::option::of(any::<usize>()))
            .prop_map(|(len, flip)| Op::Compare { len, flip }),
        (proptest::collection::vec(1usize..3000, 1..6), any::<u32>())
            .prop_map(|(lens, seed)| Op::Crc { lens, seed }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any batch of random operations gives what the plain reference
    /// gives, task by task.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn random_batches_match_the_reference(ops in proptest::collection::vec(op(), 1..24)) {
        let accel = Accel::software();
        let ch = accel.channel();
        let arena = Arena::new(8 << 20);
        let r = Recorder::new(&ch);
        let mut batch = r.q.batch();
        let mut want = Vec::new();
        let mut verify: Vec<Box<dyn Fn() -> bool>> = Vec::new();
        let mut iov_store: Vec<Vec<IoVec>> = Vec::new();
        for (i, o) in ops.iter().enumerate() {
            let tag = i as u64;
            match o.clone() {
                Op::Copy { len, so, d_o } => {
                    let s = arena.take(len, so);
                    let dst = arena.take(len, d_o);
                    for j in 0..len { unsafe_write(s, j, (j * 7 + i) as u8); }
                    // SAFETY: arena pieces outlive the wait.
                    unsafe { batch.copy(dst, s, len, tag) }.unwrap();
                    want.push((tag, Completion::SUCCESS));
                    verify.push(Box::new(move || slice(dst, len) == slice(s, len)));
                }
                Op::Fill { len, o, byte } => {
                    let dst = arena.take(len, o);
                    // SAFETY: as above.
                    unsafe { batch.fill(dst, byte, len, tag) }.unwrap();
                    want.push((tag, Completion::SUCCESS));
                    verify.push(Box::new(move || slice(dst, len).iter().all(|&b| b == byte)));
                }
                Op::Compare { len, flip } => {
                    let a = arena.take(len, 1);
                    let b = arena.take(len, 2);
                    for j in 0..len { unsafe_write(a, j, j as u8); unsafe_write(b, j, j as u8); }
                    if let Some(f) = flip { unsafe_write(b, f % len, (f % len) as u8 ^ 0x80); }
                    // SAFETY: as above.
                    unsafe { batch.compare(a, b, len, tag) }.unwrap();
                    let st = if flip.is_some() { Status::Miscompare } else { Status::Success };
                    want.push((tag, Completion::with(st)));
                }
                Op::Crc { lens, seed } => {
                    let mut flat = Vec::new();
                    let iovs: Vec<IoVec> = lens.iter().enumerate().map(|(k, &len)| {
                        let p = arena.take(len, k);
                        for j in 0..len { unsafe_write(p, j, (j ^ k) as u8); }
                        flat.extend_from_slice(slice(p, len));
                        IoVec::new(p, len)
                    }).collect();
                    // SAFETY: arena pieces and the vector (kept in
                    // iov_store) outlive the wait.
                    unsafe { batch.crc32c(&iovs, seed, tag) }.unwrap();
                    iov_store.push(iovs);
                    want.push((tag, Completion { status: Status::Success, crc: reference_crc32c(seed, &flat) }));
                }
            }
        }
        let n = batch.len();
        batch.submit();
        r.wait(n, "random batch");
        let mut seen = r.seen.borrow().clone();
        seen.sort_by_key(|(t, _)| *t);
        prop_assert_eq!(seen, want);
        for (i, v) in verify.iter().enumerate() {
            prop_assert!(v(), "task {} data", i);
        }
        drop(iov_store);
    }
}

fn unsafe_write(p: *mut u8, i: usize, v: u8) {
    // SAFETY: callers write inside arena pieces they took.
    unsafe { p.add(i).write(v) }
}

fn slice<'a>(p: *const u8, len: usize) -> &'a [u8] {
    // SAFETY: arena pieces, read after their tasks completed.
    unsafe { std::slice::from_raw_parts(p, len) }
}

#[test]
fn vectored_lengths_whose_sum_wraps_are_refused_not_summed() {
    let accel = Accel::software();
    let ch = accel.channel();
    let q = ch.queue();
    let data = [7u8; 64];
    let mut dst = [0u8; 64];
    // usize::MAX + 2 wraps to 1: a task of "1 byte" over a vector that
    // claims the whole address space.
    let srcs = [
        IoVec::new(data.as_ptr(), usize::MAX),
        IoVec::new(data.as_ptr(), 2),
    ];
    let refused = |r: Result<(), AccelError>| matches!(r, Err(AccelError::Invalid { .. }));
    // SAFETY: each call is refused at submission, before any module reads
    // the vectors' memory (which the test asserts).
    unsafe {
        assert!(refused(q.crc32c(&srcs, 0, 1)));
        assert!(refused(q.copy_crc32c(dst.as_mut_ptr(), &srcs, 0, 2)));
        let mut b = q.batch();
        assert!(refused(b.crc32c(&srcs, 0, 3)));
        assert!(refused(b.copy_crc32c(dst.as_mut_ptr(), &srcs, 0, 4)));
        b.submit();
    }
    assert_eq!(q.in_flight(), 0);
    assert_eq!(dst, [0u8; 64]);
}
