//! Tests of the model DSA device alone, driven with hand-built
//! descriptors: each operation, each status the model reports, each fault
//! it injects and each violation it records.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use super::*;
use crate::accel::dsa::portal::{Retry, WqMode};
use crate::accel::dsa::spec::{self, Descriptor, comp, flags, opcode, status};
use crate::accel::software::kernels::crc32c_update;
use crate::env::dma::{DmaBuffer, Window};
use crate::env::dma::{MapperRegistration, register_mapper};

/// A model device with its mapper registered, and its first WQ.
struct Rig {
    model: DsaModel,
    wq: ModelWq,
    _mapping: MapperRegistration,
}

fn rig(cfg: ModelConfig) -> Rig {
    let model = DsaModel::new(cfg);
    let mapping = register_mapper(model.mapper());
    let wq = model.wq(0).expect("a WQ");
    Rig {
        model,
        wq,
        _mapping: mapping,
    }
}

fn default_rig() -> Rig {
    rig(ModelConfig::default())
}

impl Rig {
    fn buf(&self, len: usize) -> DmaBuffer {
        self.wq.memory().alloc(len).expect("DMA memory")
    }

    /// A raw store to the WQ's portal.
    fn store(&self, offset: usize, bytes: &[u8]) -> Result<(), Violation> {
        // SAFETY: the bytes are a descriptor naming the test's buffers,
        // kept until its record is waited for.
        unsafe { self.wq.write_portal(offset, bytes) }
    }

    fn submit(&self, d: &Descriptor) -> Result<(), Retry> {
        // SAFETY: the tests' descriptors name their own buffers (kept until
        // the record is waited for) or addresses nothing is mapped at,
        // which the model only looks up.
        unsafe { self.wq.submit(d) }
    }
}

/// Copies `data` into `b` at `off`.
fn put(b: &DmaBuffer, off: usize, data: &[u8]) {
    assert!(off + data.len() <= b.len());
    // SAFETY: inside the buffer; no descriptor in flight uses these bytes.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), b.as_ptr().add(off), data.len()) };
}

/// `len` bytes of `b` at `off`.
fn get(b: &DmaBuffer, off: usize, len: usize) -> Vec<u8> {
    assert!(off + len <= b.len());
    let mut v = vec![0u8; len];
    // SAFETY: inside the buffer; read after the record said done.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr().add(off), v.as_mut_ptr(), len) };
    v
}

/// Bytes whose value depends on the seed and position.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// A completion record as read after its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rec {
    status: u8,
    result: u8,
    bytes: u32,
    fault_addr: u64,
    crc: u32,
}

fn byte(b: &DmaBuffer, off: usize) -> u8 {
    // SAFETY: inside the buffer; record bytes are only accessed atomically.
    unsafe { AtomicU8::from_ptr(b.as_ptr().add(off)) }.load(Ordering::Acquire)
}

/// Record `i` (32 bytes each) of `b`, as it is now.
fn rec(b: &DmaBuffer, i: usize) -> Rec {
    let off = spec::COMPLETION_SIZE * i;
    let status = byte(b, off + comp::STATUS);
    Rec {
        status,
        result: byte(b, off + comp::RESULT),
        bytes: b.read_u32(off + comp::BYTES_COMPLETED),
        fault_addr: b.read_u64(off + comp::FAULT_ADDR),
        crc: b.read_u32(off + comp::CRC_VALUE),
    }
}

/// Waits (at most 5 s) for record `i` of `b` to have a status.
fn wait(b: &DmaBuffer, i: usize) -> Rec {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        if byte(b, spec::COMPLETION_SIZE * i) != 0 {
            return rec(b, i);
        }
        assert!(Instant::now() < end, "record {i} was never written");
        std::thread::sleep(Duration::from_micros(20));
    }
}

fn rec_at(b: &DmaBuffer, i: usize) -> u64 {
    b.iova() + (spec::COMPLETION_SIZE * i) as u64
}

/// Submits `d` with record `i` of `recs` and waits for it.
fn run(r: &Rig, recs: &DmaBuffer, i: usize, d: Descriptor) -> Rec {
    r.submit(&d.with_completion(rec_at(recs, i)))
        .expect("accepted");
    wait(recs, i)
}

#[test]
fn copy_fill_and_dualcast() {
    let r = default_rig();
    let recs = r.buf(4096);
    let (src, dst) = (r.buf(16384), r.buf(3 * 8192));
    let data = pattern(8192, 7);
    put(&src, 0, &data);

    let out = run(
        &r,
        &recs,
        0,
        Descriptor::memmove(src.iova(), dst.iova(), 8192),
    );
    assert_eq!(out.status, status::SUCCESS);
    assert_eq!(get(&dst, 0, 8192), data);

    // A byte pattern and an 8-byte one (byte i of the destination is byte
    // i % 8 of the pattern, little endian).
    let out = run(
        &r,
        &recs,
        1,
        Descriptor::fill(spec::fill_pattern(0xa5), dst.iova(), 100),
    );
    assert_eq!(out.status, status::SUCCESS);
    assert_eq!(get(&dst, 0, 100), vec![0xa5; 100]);
    assert_eq!(get(&dst, 100, 4), data[100..104], "fill went past its size");
    let p = 0x0807_0605_0403_0201u64;
    let out = run(&r, &recs, 2, Descriptor::fill(p, dst.iova() + 3, 21));
    assert_eq!(out.status, status::SUCCESS);
    let want: Vec<u8> = (0..21).map(|i| (i % 8) as u8 + 1).collect();
    assert_eq!(get(&dst, 3, 21), want);

    // Dualcast: destinations whose bits 11:0 agree.
    let (d1, d2) = (dst.iova() + 8192 + 64, dst.iova() + 16384 + 64);
    let out = run(&r, &recs, 3, Descriptor::dualcast(src.iova(), d1, d2, 4096));
    assert_eq!(out.status, status::SUCCESS);
    assert_eq!(get(&dst, 8192 + 64, 4096), data[..4096]);
    assert_eq!(get(&dst, 16384 + 64, 4096), data[..4096]);

    let c = r.model.counters();
    assert_eq!(
        (c.portal_writes, c.accepted, c.descriptors, c.completions),
        (4, 4, 4, 4)
    );
    assert!(r.model.violations().is_empty());
}

#[test]
fn compare_and_compare_pattern() {
    let r = default_rig();
    let recs = r.buf(4096);
    let (a, b) = (r.buf(8192), r.buf(8192));
    let data = pattern(8192, 3);
    put(&a, 0, &data);
    put(&b, 0, &data);
    let out = run(&r, &recs, 0, Descriptor::compare(a.iova(), b.iova(), 8192));
    assert_eq!((out.status, out.result), (status::SUCCESS, 0));

    put(&b, 5000, &[data[5000] ^ 1]);
    let out = run(&r, &recs, 1, Descriptor::compare(a.iova(), b.iova(), 8192));
    assert_eq!(
        (out.status, out.result, out.bytes),
        (status::SUCCESS, 1, 5000)
    );
    // Before the difference: equal.
    let out = run(&r, &recs, 2, Descriptor::compare(a.iova(), b.iova(), 5000));
    assert_eq!(out.result, 0);

    // Check Result: a result other than the expected one is "success with
    // false predicate".
    let mut d = Descriptor::compare(a.iova(), b.iova(), 8192);
    d.set_flags(flags::CHECK_RESULT);
    let out = run(&r, &recs, 3, d);
    assert_eq!((out.status, out.result), (status::SUCCESS_PRED, 1));
    d.op_specific[0] = 1;
    let out = run(&r, &recs, 4, d);
    assert_eq!(out.status, status::SUCCESS);

    let p = 0x1122_3344_5566_7788u64;
    let fill: Vec<u8> = (0..4096).map(|i| p.to_le_bytes()[i % 8]).collect();
    put(&a, 0, &fill);
    let out = run(&r, &recs, 5, Descriptor::compare_pattern(a.iova(), p, 4096));
    assert_eq!((out.status, out.result), (status::SUCCESS, 0));
    put(&a, 1234, &[0]);
    let out = run(&r, &recs, 6, Descriptor::compare_pattern(a.iova(), p, 4096));
    assert_eq!(
        (out.status, out.result, out.bytes),
        (status::SUCCESS, 1, 1234)
    );
}

#[test]
fn crc32c_and_copy_crc32c_match_the_software_module() {
    let r = default_rig();
    let recs = r.buf(4096);
    let (src, dst) = (r.buf(65536 + 4096), r.buf(65536 + 4096));
    let data = pattern(65536 + 100, 11);
    put(&src, 0, &data);

    let out = run(&r, &recs, 0, Descriptor::crc32c(src.iova(), 9, 0));
    put(&src, 0, b"123456789");
    let out9 = run(&r, &recs, 1, Descriptor::crc32c(src.iova(), 9, 0));
    assert_eq!(out9.crc, 0xe306_9283, "the standard CRC-32C check value");
    assert_ne!(out.crc, out9.crc);
    put(&src, 0, &data[..9]);

    let len = data.len() as u32;
    let out = run(
        &r,
        &recs,
        2,
        Descriptor::crc32c(src.iova(), len, 0x1234_5678),
    );
    assert_eq!(out.status, status::SUCCESS);
    assert_eq!(out.crc, crc32c_update(0x1234_5678, &data));

    // Chained as SPDK chains a scattered crc32c: the second descriptor
    // reads its seed from the first one's record.
    let first = Descriptor::crc32c(src.iova(), 1000, 7);
    let out1 = run(&r, &recs, 3, first);
    let second = Descriptor::crc32c(src.iova() + 1000, len - 1000, 0)
        .with_seed_address(rec_at(&recs, 3) + comp::CRC_VALUE as u64);
    let out2 = run(&r, &recs, 4, second);
    assert_eq!(out1.crc, crc32c_update(7, &data[..1000]));
    assert_eq!(out2.crc, crc32c_update(7, &data));

    let out = run(
        &r,
        &recs,
        5,
        Descriptor::copy_crc32c(src.iova(), dst.iova(), len, 99),
    );
    assert_eq!(out.status, status::SUCCESS);
    assert_eq!(out.crc, crc32c_update(99, &data));
    assert_eq!(get(&dst, 0, data.len()), data);
}

#[test]
fn invalid_descriptors_get_their_status() {
    let mut cfg = ModelConfig::default();
    cfg.wqs[0].max_transfer = 4096;
    cfg.opcap = spec::opcap_of(&[
        opcode::MEMMOVE,
        opcode::DUALCAST,
        opcode::CRCGEN,
        opcode::COMPARE,
    ]);
    let r = rig(cfg);
    let recs = r.buf(4096);
    let (a, b) = (r.buf(16384), r.buf(16384));
    let case = |i: usize, d: Descriptor| run(&r, &recs, i, d);

    // Outside OPCAP.
    assert_eq!(
        case(0, Descriptor::fill(0, b.iova(), 64)).status,
        status::BAD_OPCODE
    );
    // Transfer sizes.
    assert_eq!(
        case(1, Descriptor::memmove(a.iova(), b.iova(), 0)).status,
        status::XFER_ERANGE
    );
    assert_eq!(
        case(2, Descriptor::memmove(a.iova(), b.iova(), 4097)).status,
        status::XFER_ERANGE
    );
    assert_eq!(
        case(3, Descriptor::memmove(a.iova(), b.iova(), 4096)).status,
        status::SUCCESS
    );
    // Reserved fields.
    let mut d = Descriptor::memmove(a.iova(), b.iova(), 64);
    d.op_specific[2] = 1;
    assert_eq!(case(4, d).status, status::NOZERO_RESERVE);
    let mut d = Descriptor::memmove(a.iova(), b.iova(), 64);
    d.rsvd = 1;
    assert_eq!(case(5, d).status, status::NOZERO_RESERVE);
    // Flags the operation does not take: invalid, named in the record.
    let mut d = Descriptor::memmove(a.iova(), b.iova(), 64);
    d.set_flags(flags::CRC_READ_SEED);
    let out = case(6, d);
    assert_eq!(out.status, status::INVALID_FLAGS);
    assert_eq!(
        recs.read_u32(6 * 32 + comp::INVALID_FLAGS),
        flags::CRC_READ_SEED
    );
    // Overlap, dualcast alignment, seed alignment.
    let out = case(7, Descriptor::memmove(a.iova(), a.iova() + 100, 200));
    assert_eq!(out.status, status::OVERLAP_BUFFERS);
    let out = case(
        8,
        Descriptor::dualcast(a.iova(), b.iova(), b.iova() + 4096 + 64, 64),
    );
    assert_eq!(out.status, status::DCAST_ERR);
    let out = case(
        9,
        Descriptor::dualcast(a.iova(), b.iova(), b.iova() + 4096, 4097),
    );
    assert_eq!(out.status, status::XFER_ERANGE);
    let out = case(
        10,
        Descriptor::dualcast(a.iova(), b.iova(), b.iova() + 4096, 4096),
    );
    assert_eq!(out.status, status::SUCCESS);
    let out = case(
        11,
        Descriptor::dualcast(a.iova(), b.iova(), b.iova() + 4096, 4096 + 64),
    );
    assert_eq!(out.status, status::XFER_ERANGE);
    let out = case(
        12,
        Descriptor::crc32c(a.iova(), 64, 0).with_seed_address(b.iova() + 2),
    );
    assert_eq!(out.status, status::ADDR_ALIGN);
    assert!(r.model.violations().is_empty());
}

#[test]
fn record_address_errors_go_to_the_software_error_register() {
    let r = default_rig();
    let recs = r.buf(4096);
    let (a, b) = (r.buf(4096), r.buf(4096));
    // Misaligned: nothing written, a software error.
    r.submit(&Descriptor::memmove(a.iova(), b.iova(), 64).with_completion(rec_at(&recs, 1) + 8))
        .unwrap();
    assert!(r.model.wait_idle(Duration::from_secs(5)));
    assert_eq!(rec(&recs, 1).status, 0);
    let e = r.wq.device_error().expect("a software error");
    assert!(e.contains("completion record address misaligned"), "{e}");
    // Unmapped (a virtual address where an IOVA belongs).
    let va = recs.as_ptr() as u64;
    r.submit(&Descriptor::memmove(a.iova(), b.iova(), 64).with_completion(va))
        .unwrap();
    assert!(r.model.wait_idle(Duration::from_secs(5)));
    let e = r.wq.device_error().expect("a software error");
    assert!(e.contains("translation failed"), "{e}");
    // A failure with no record address: a software error too.
    r.submit(&Descriptor::memmove(a.iova(), b.iova(), 0))
        .unwrap();
    assert!(r.model.wait_idle(Duration::from_secs(5)));
    let e = r.wq.device_error().expect("a software error");
    assert!(e.contains("transfer size out of range"), "{e}");
    assert_eq!(r.wq.device_error(), None);
    assert_eq!(r.model.counters().software_errors, 3);
}

#[test]
fn unmapped_data_is_a_page_fault_with_partial_completion() {
    let r = default_rig();
    let recs = r.buf(4096);
    let (a, b) = (r.buf(8192), r.buf(8192));
    // A driver that forgot to translate: the virtual address is not an
    // IOVA of the model.
    let va = a.as_ptr() as u64;
    let out = run(&r, &recs, 0, Descriptor::memmove(va, b.iova(), 64));
    assert_eq!(out.status, status::PAGE_FAULT_NOBOF);
    assert_eq!((out.bytes, out.fault_addr), (0, va));
    let out = run(
        &r,
        &recs,
        1,
        Descriptor::memmove(a.iova(), b.as_ptr() as u64, 64),
    );
    assert_eq!(out.status, status::PAGE_FAULT_NOBOF | status::WRITE);
    assert_eq!(out.fault_addr, b.as_ptr() as u64);
    // Running off the end of a mapped window into nothing: the bytes before
    // it are done. (An IOVA window of one page, far from every other.)
    let far = 1u64 << 52;
    // SAFETY: the window names the first page of `b`, alive until the
    // window is removed below, reached by the model only.
    unsafe {
        r.model.map().insert(Window {
            va: b.as_ptr() as usize + 4096,
            len: 4096,
            iova: far,
        })
    };
    put(&a, 0, &pattern(8192, 1));
    let out = run(&r, &recs, 2, Descriptor::memmove(a.iova(), far + 4000, 200));
    assert_eq!(out.status, status::PAGE_FAULT_NOBOF | status::WRITE);
    assert_eq!((out.bytes, out.fault_addr), (96, far + 4096));
    assert_eq!(get(&b, 4096 + 4000, 96), pattern(8192, 1)[..96]);
    r.model.map().remove(b.as_ptr() as usize + 4096, 1);
    assert_eq!(r.model.counters().page_faults, 3);
}

#[test]
fn injected_page_faults_complete_partially_and_resume() {
    let r = default_rig();
    let recs = r.buf(4096);
    let (a, b) = (r.buf(8192), r.buf(8192));
    let data = pattern(8192, 9);
    put(&a, 0, &data);

    r.model.faults().page_fault(1, 1000, false);
    let out = run(&r, &recs, 0, Descriptor::memmove(a.iova(), b.iova(), 4096));
    assert_eq!(out.status, status::PAGE_FAULT_NOBOF);
    assert_eq!((out.bytes, out.fault_addr), (1000, a.iova() + 1000));
    assert_eq!(get(&b, 0, 1000), data[..1000]);
    assert_eq!(get(&b, 1000, 8), vec![0; 8], "nothing after the fault");
    // Resumed where it stopped.
    let out = run(
        &r,
        &recs,
        1,
        Descriptor::memmove(a.iova() + 1000, b.iova() + 1000, 3096),
    );
    assert_eq!(out.status, status::SUCCESS);
    assert_eq!(get(&b, 0, 4096), data[..4096]);

    // On the write side.
    r.model.faults().page_fault(1, 10, true);
    let out = run(&r, &recs, 2, Descriptor::memmove(a.iova(), b.iova(), 64));
    assert_eq!(out.status, status::PAGE_FAULT_NOBOF | status::WRITE);
    assert_eq!(out.fault_addr, b.iova() + 10);

    // A CRC stops with the CRC so far, which seeds the rest.
    r.model.faults().page_fault(1, 3000, false);
    let out = run(&r, &recs, 3, Descriptor::crc32c(a.iova(), 8192, 5));
    assert!(status::is_page_fault(out.status));
    assert_eq!(out.bytes, 3000);
    assert_eq!(out.crc, crc32c_update(5, &data[..3000]));
    let out = run(
        &r,
        &recs,
        4,
        Descriptor::crc32c(a.iova() + 3000, 8192 - 3000, out.crc),
    );
    assert_eq!(out.crc, crc32c_update(5, &data));

    // The second descriptor from now; a shorter one does not fault.
    r.model.faults().page_fault(2, 100, false);
    assert_eq!(
        run(&r, &recs, 5, Descriptor::memmove(a.iova(), b.iova(), 64)).status,
        status::SUCCESS
    );
    assert_eq!(
        run(&r, &recs, 6, Descriptor::memmove(a.iova(), b.iova(), 64)).status,
        status::SUCCESS
    );
    assert_eq!(r.model.counters().page_faults, 3);
}

#[test]
fn block_on_fault() {
    // Not allowed on the WQ: invalid flags.
    let r = default_rig();
    let recs = r.buf(4096);
    let (a, b) = (r.buf(4096), r.buf(4096));
    let mut d = Descriptor::memmove(a.iova(), b.iova(), 64);
    d.set_flags(flags::BOF);
    let out = run(&r, &recs, 0, d);
    assert_eq!(out.status, status::INVALID_FLAGS);
    assert_eq!(recs.read_u32(comp::INVALID_FLAGS), flags::BOF);
    drop(r);

    let r = rig(ModelConfig::with_wq(WqConfig {
        block_on_fault: true,
        ..WqConfig::default()
    }));
    let recs = r.buf(4096);
    let (a, b) = (r.buf(4096), r.buf(4096));
    put(&a, 0, &pattern(4096, 2));
    // A fault the OS resolves: the operation completes.
    r.model.faults().page_fault(1, 100, false);
    let mut d = Descriptor::memmove(a.iova(), b.iova(), 4096);
    d.set_flags(flags::BOF);
    assert_eq!(run(&r, &recs, 0, d).status, status::SUCCESS);
    assert_eq!(get(&b, 0, 4096), pattern(4096, 2));
    assert_eq!(r.model.counters().faults_resolved, 1);
    // One it cannot: not resolved, partial completion.
    let mut d = Descriptor::memmove(a.as_ptr() as u64, b.iova(), 64);
    d.set_flags(flags::BOF);
    let out = run(&r, &recs, 1, d);
    assert_eq!((out.status, out.bytes), (status::PAGE_FAULT_IR, 0));
}

/// Writes `descs` into `list` (64 bytes each) through the buffer's atomic
/// accessors.
fn write_list(list: &DmaBuffer, descs: &[Descriptor]) {
    for (i, d) in descs.iter().enumerate() {
        for (k, w) in d.to_bytes().chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            list.write_u64(64 * i + 8 * k, u64::from_le_bytes(b));
        }
    }
}

#[test]
fn batch_runs_each_descriptor_with_one_portal_write() {
    let r = default_rig();
    let recs = r.buf(4096);
    let list = r.buf(4096);
    let (a, b) = (r.buf(8192), r.buf(8192));
    let data = pattern(4096, 4);
    put(&a, 0, &data);
    let descs = [
        Descriptor::memmove(a.iova(), b.iova(), 512).with_completion(rec_at(&recs, 1)),
        Descriptor::fill(spec::fill_pattern(0x5a), b.iova() + 512, 512)
            .with_completion(rec_at(&recs, 2)),
        Descriptor::crc32c(a.iova(), 4096, 0).with_completion(rec_at(&recs, 3)),
        // No record on success: only an address for a failure.
        {
            let mut d = Descriptor::memmove(a.iova() + 1024, b.iova() + 1024, 512);
            d.completion = rec_at(&recs, 4);
            d.set_flags(flags::CRAV);
            d
        },
    ];
    write_list(&list, &descs);
    let out = run(&r, &recs, 0, Descriptor::batch(list.iova(), 4));
    assert_eq!((out.status, out.bytes), (status::SUCCESS, 4));
    assert_eq!(
        [
            rec(&recs, 1).status,
            rec(&recs, 2).status,
            rec(&recs, 3).status
        ],
        [status::SUCCESS; 3]
    );
    assert_eq!(rec(&recs, 3).crc, crc32c_update(0, &data));
    assert_eq!(
        rec(&recs, 4).status,
        0,
        "success without RCR writes no record"
    );
    assert_eq!(get(&b, 0, 512), data[..512]);
    assert_eq!(get(&b, 512, 512), vec![0x5a; 512]);
    assert_eq!(get(&b, 1024, 512), data[1024..1536]);
    let c = r.model.counters();
    assert_eq!(
        (c.portal_writes, c.batches, c.descriptors, c.completions),
        (1, 1, 5, 4)
    );
}

#[test]
fn a_batch_of_256_copies_is_one_portal_write() {
    // accel-perf's case (copy 512 B, batches of 256): one portal write
    // per 256 operations.
    let r = default_rig();
    let recs = r.buf(4096);
    let list = r.buf(256 * 64);
    let (a, b) = (r.buf(256 * 512), r.buf(256 * 512));
    let data = pattern(256 * 512, 8);
    put(&a, 0, &data);
    let descs: Vec<Descriptor> = (0..256u64)
        .map(|i| Descriptor::memmove(a.iova() + 512 * i, b.iova() + 512 * i, 512))
        .collect();
    write_list(&list, &descs);
    let out = run(&r, &recs, 0, Descriptor::batch(list.iova(), 256));
    assert_eq!((out.status, out.bytes), (status::SUCCESS, 256));
    assert_eq!(get(&b, 0, data.len()), data);
    let c = r.model.counters();
    assert_eq!((c.portal_writes, c.descriptors), (1, 257));
    assert!(
        c.portal_writes * 128 <= 256,
        "at most 1/128 portal writes per op"
    );
}

#[test]
fn crc_flags_the_model_does_not_implement_are_invalid() {
    let r = rig(ModelConfig::with_wq(WqConfig {
        block_on_fault: true,
        ..WqConfig::default()
    }));
    let recs = r.buf(4096);
    let a = r.buf(4096);
    let mut d = Descriptor::crc32c(a.iova(), 64, 0);
    d.set_flags(flags::CRC_BYPASS_INVERSION | flags::CRC_BYPASS_REFLECTION);
    let out = run(&r, &recs, 0, d);
    assert_eq!(out.status, status::INVALID_FLAGS);
    // Block on Fault is reserved for a drain, even on a WQ that allows it.
    let mut d = Descriptor::drain();
    d.set_flags(flags::BOF);
    assert_eq!(run(&r, &recs, 1, d).status, status::INVALID_FLAGS);
    assert_eq!(
        run(&r, &recs, 2, Descriptor::drain()).status,
        status::SUCCESS
    );
    assert_eq!(
        run(&r, &recs, 3, Descriptor::noop()).status,
        status::SUCCESS
    );
}

#[test]
fn batch_failures_fences_and_limits() {
    let r = rig(ModelConfig::with_wq(WqConfig {
        max_batch: 8,
        ..WqConfig::default()
    }));
    let recs = r.buf(4096);
    let list = r.buf(4096);
    let (a, b) = (r.buf(8192), r.buf(8192));
    put(&a, 0, &pattern(4096, 6));
    let unrecorded = |d: Descriptor, i: usize| {
        let mut d = d;
        d.completion = rec_at(&recs, i);
        d.set_flags(d.flags() | flags::CRAV);
        d
    };
    // Descriptor 1 points at unmapped memory; 2 runs anyway (no fence);
    // 3 is fenced: abandoned with 4.
    let mut fenced =
        Descriptor::memmove(a.iova(), b.iova() + 3000, 64).with_completion(rec_at(&recs, 4));
    fenced.set_flags(fenced.flags() | flags::FENCE);
    let descs = [
        Descriptor::memmove(a.iova(), b.iova(), 64).with_completion(rec_at(&recs, 1)),
        unrecorded(
            Descriptor::memmove(a.as_ptr() as u64, b.iova() + 1000, 64),
            2,
        ),
        Descriptor::memmove(a.iova(), b.iova() + 2000, 64).with_completion(rec_at(&recs, 3)),
        fenced,
        Descriptor::memmove(a.iova(), b.iova() + 4000, 64).with_completion(rec_at(&recs, 5)),
    ];
    write_list(&list, &descs);
    let out = run(&r, &recs, 0, Descriptor::batch(list.iova(), 5));
    assert_eq!((out.status, out.bytes), (status::BATCH_FAIL, 3));
    assert_eq!(rec(&recs, 1).status, status::SUCCESS);
    let failed = rec(&recs, 2);
    assert_eq!(
        (failed.status, failed.fault_addr),
        (status::PAGE_FAULT_NOBOF, a.as_ptr() as u64)
    );
    assert_eq!(rec(&recs, 3).status, status::SUCCESS);
    assert_eq!(
        (rec(&recs, 4).status, rec(&recs, 5).status),
        (0, 0),
        "abandoned"
    );
    assert_eq!(get(&b, 3000, 64), vec![0; 64]);

    // Counts: 1 and above the WQ's maximum are out of range.
    assert_eq!(
        run(&r, &recs, 6, Descriptor::batch(list.iova(), 1)).status,
        status::DESC_CNT_ERANGE
    );
    assert_eq!(
        run(&r, &recs, 7, Descriptor::batch(list.iova(), 9)).status,
        status::DESC_CNT_ERANGE
    );
    // The list's alignment.
    assert_eq!(
        run(&r, &recs, 8, Descriptor::batch(list.iova() + 32, 2)).status,
        status::DESCLIST_ALIGN
    );
    // A batch (or drain) inside a batch.
    write_list(
        &list,
        &[
            Descriptor::batch(list.iova(), 2).with_completion(rec_at(&recs, 10)),
            Descriptor::drain().with_completion(rec_at(&recs, 11)),
        ],
    );
    let out = run(&r, &recs, 9, Descriptor::batch(list.iova(), 2));
    assert_eq!((out.status, out.bytes), (status::BATCH_FAIL, 2));
    assert_eq!(
        (rec(&recs, 10).status, rec(&recs, 11).status),
        (status::BAD_OPCODE, status::BAD_OPCODE)
    );
    // A list in unmapped memory (its virtual address).
    let out = run(&r, &recs, 12, Descriptor::batch(list.as_ptr() as u64, 2));
    assert_eq!(
        (out.status, out.bytes, out.fault_addr),
        (status::BATCH_PAGE_FAULT, 0, list.as_ptr() as u64)
    );
}

#[test]
fn batch_list_running_into_unmapped_memory() {
    let r = default_rig();
    let recs = r.buf(4096);
    let list = r.buf(8192);
    let (a, b) = (r.buf(4096), r.buf(4096));
    // The list seen through a window of two descriptors, far from every
    // other: the third is unreadable.
    let far = 1u64 << 51;
    // SAFETY: the window names 128 bytes of `list`, alive until the window
    // is removed below, reached by the model only.
    unsafe {
        r.model.map().insert(Window {
            va: list.as_ptr() as usize + 4096,
            len: 128,
            iova: far,
        })
    };
    let descs: Vec<Descriptor> = (0..3)
        .map(|i| {
            Descriptor::memmove(a.iova(), b.iova() + 64 * i, 64)
                .with_completion(rec_at(&recs, 1 + i as usize))
        })
        .collect();
    let mut bytes = Vec::new();
    for d in &descs {
        bytes.extend_from_slice(&d.to_bytes());
    }
    put(&list, 4096, &bytes);
    let out = run(&r, &recs, 0, Descriptor::batch(far, 3));
    assert_eq!(
        (out.status, out.bytes, out.fault_addr),
        (status::BATCH_PAGE_FAULT, 2, far + 128)
    );
    assert_eq!(
        (
            rec(&recs, 1).status,
            rec(&recs, 2).status,
            rec(&recs, 3).status
        ),
        (1, 1, 0)
    );
    r.model.map().remove(list.as_ptr() as usize + 4096, 1);
}

#[test]
fn batch_list_rewritten_after_submission_is_a_violation() {
    let r = default_rig();
    r.model.faults().manual(true);
    let recs = r.buf(4096);
    let list = r.buf(4096);
    let (a, b) = (r.buf(4096), r.buf(4096));
    let descs = [
        Descriptor::memmove(a.iova(), b.iova(), 64).with_completion(rec_at(&recs, 1)),
        Descriptor::memmove(a.iova(), b.iova() + 64, 64).with_completion(rec_at(&recs, 2)),
    ];
    write_list(&list, &descs);
    r.submit(&Descriptor::batch(list.iova(), 2).with_completion(rec_at(&recs, 0)))
        .unwrap();
    write_list(
        &list,
        &[descs[0], Descriptor::memmove(a.iova(), b.iova() + 128, 64)],
    );
    assert!(r.model.step());
    assert_eq!(rec(&recs, 0).status, status::SUCCESS);
    assert_eq!(
        r.model.violations(),
        vec![Violation::BatchListRewritten {
            wq: 0,
            addr: list.iova() + 64
        }]
    );
}

#[test]
fn shared_wq_refuses_beyond_its_size() {
    let r = rig(ModelConfig::with_wq(WqConfig::shared(4)));
    assert_eq!(r.wq.info().mode, WqMode::Shared);
    r.model.faults().manual(true);
    let recs = r.buf(4096);
    let (a, b) = (r.buf(4096), r.buf(4096));
    let d =
        |i: usize| Descriptor::memmove(a.iova(), b.iova(), 64).with_completion(rec_at(&recs, i));
    for i in 0..4 {
        assert_eq!(r.submit(&d(i)), Ok(()));
    }
    assert_eq!(r.submit(&d(4)), Err(Retry), "full");
    assert_eq!(r.model.occupancy(0), 4);
    assert!(r.model.step());
    assert_eq!(rec(&recs, 0).status, status::SUCCESS);
    assert_eq!(
        r.submit(&d(4)),
        Ok(()),
        "an entry came free with the completion"
    );
    // Refused whatever the occupancy (a device busy elsewhere).
    while r.model.step() {}
    r.model.faults().refuse(2);
    assert_eq!(r.submit(&d(5)), Err(Retry));
    assert_eq!(r.submit(&d(5)), Err(Retry));
    assert_eq!(r.submit(&d(5)), Ok(()));
    assert!(r.model.step());
    let c = r.model.counters();
    assert_eq!((c.portal_writes, c.accepted, c.retries), (9, 6, 3));
    assert!(r.model.violations().is_empty());
}

#[test]
fn dedicated_wq_overflow_is_dropped_and_reported() {
    let r = rig(ModelConfig::with_wq(WqConfig {
        size: 2,
        ..WqConfig::default()
    }));
    r.model.faults().manual(true);
    let recs = r.buf(4096);
    let (a, b) = (r.buf(4096), r.buf(4096));
    for i in 0..3 {
        let d = Descriptor::memmove(a.iova(), b.iova(), 64).with_completion(rec_at(&recs, i));
        assert_eq!(r.submit(&d), Ok(()), "a posted write is never refused");
    }
    while r.model.step() {}
    assert_eq!(
        (
            rec(&recs, 0).status,
            rec(&recs, 1).status,
            rec(&recs, 2).status
        ),
        (1, 1, 0)
    );
    assert_eq!(
        r.model.violations(),
        vec![Violation::DedicatedOverflow { wq: 0 }]
    );
    assert!(r.wq.device_error().unwrap().contains("dropped"));
    assert_eq!(r.model.counters().dropped, 1);
}

#[test]
fn an_entry_is_free_once_its_record_says_done() {
    // A driver that submits again as soon as it sees a completion never
    // overflows a dedicated WQ of one entry.
    let r = rig(ModelConfig::with_wq(WqConfig {
        size: 1,
        ..WqConfig::default()
    }));
    let recs = r.buf(4096);
    let (a, b) = (r.buf(4096), r.buf(4096));
    for n in 0..500 {
        let i = n % 2;
        recs.write_u64(32 * i, 0);
        r.submit(&Descriptor::memmove(a.iova(), b.iova(), 64).with_completion(rec_at(&recs, i)))
            .unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        while byte(&recs, 32 * i) == 0 {
            assert!(Instant::now() < end);
            std::hint::spin_loop();
        }
        assert_eq!(
            r.model.occupancy(0),
            0,
            "the entry is free when the status shows"
        );
        assert_eq!(rec(&recs, i).status, status::SUCCESS);
    }
    assert!(r.model.violations().is_empty());
    assert_eq!(r.model.counters().dropped, 0);
}

#[test]
fn torn_and_plain_portal_writes_are_dropped() {
    let r = default_rig();
    let recs = r.buf(4096);
    let (a, b) = (r.buf(4096), r.buf(4096));
    let d = Descriptor::memmove(a.iova(), b.iova(), 64).with_completion(rec_at(&recs, 0));
    let bytes = d.to_bytes();
    let torn = r.store(0, &bytes[..32]);
    assert_eq!(
        torn,
        Err(Violation::TornWrite {
            wq: 0,
            offset: 0,
            len: 32
        })
    );
    let misaligned = r.store(32, &bytes);
    assert_eq!(
        misaligned,
        Err(Violation::TornWrite {
            wq: 0,
            offset: 32,
            len: 64
        })
    );
    let outside = r.store(4096, &bytes);
    assert!(outside.is_err());
    assert!(r.model.wait_idle(Duration::from_secs(1)));
    assert_eq!(rec(&recs, 0).status, 0, "nothing executed");
    assert_eq!(r.store(64, &bytes), Ok(()));
    assert_eq!(wait(&recs, 0).status, status::SUCCESS);
    assert_eq!(r.model.violations().len(), 3);
    assert_eq!(r.model.counters().dropped, 3);
    assert!(r.wq.device_error().unwrap().contains("TornWrite"));

    let r = rig(ModelConfig::with_wq(WqConfig::shared(8)));
    let recs = r.buf(4096);
    let d = Descriptor::memmove(a.iova(), b.iova(), 64).with_completion(rec_at(&recs, 0));
    let plain = r.store(0, &d.to_bytes());
    assert_eq!(plain, Err(Violation::PlainWriteToShared { wq: 0 }));
}

#[test]
fn a_record_read_before_its_status_is_garbage() {
    let r = default_rig();
    r.model.faults().slow_completion(Duration::from_millis(30));
    let recs = r.buf(4096);
    let (a, b) = (r.buf(4096), r.buf(4096));
    r.model.faults().page_fault(1, 100, false);
    r.submit(&Descriptor::memmove(a.iova(), b.iova(), 4096).with_completion(rec_at(&recs, 0)))
        .unwrap();
    // A reader that looks at Bytes Completed without waiting for the
    // status sees garbage at some point; one that waits sees the truth.
    let mut early = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while byte(&recs, 0) == 0 {
        early.push(recs.read_u32(comp::BYTES_COMPLETED));
        assert!(Instant::now() < end);
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(
        early.contains(&0xdbdb_dbdb),
        "no garbage seen before the status: {early:?}"
    );
    let out = rec(&recs, 0);
    assert_eq!(
        (out.status, out.bytes, out.fault_addr),
        (status::PAGE_FAULT_NOBOF, 100, a.iova() + 100)
    );
}

#[test]
fn a_record_not_cleared_before_reuse_is_a_violation() {
    let r = default_rig();
    let recs = r.buf(4096);
    let (a, b) = (r.buf(4096), r.buf(4096));
    assert_eq!(
        run(&r, &recs, 0, Descriptor::memmove(a.iova(), b.iova(), 64)).status,
        1
    );
    // Reused without zeroing its status.
    let _ = run(&r, &recs, 0, Descriptor::memmove(a.iova(), b.iova(), 64));
    assert!(r.model.wait_idle(Duration::from_secs(5)));
    assert_eq!(
        r.model.violations(),
        vec![Violation::StaleRecord {
            wq: 0,
            addr: rec_at(&recs, 0),
            status: status::SUCCESS
        }]
    );
}

#[test]
fn a_record_owned_by_a_descriptor_in_flight_is_a_violation() {
    let r = default_rig();
    r.model.faults().manual(true);
    let recs = r.buf(4096);
    let list = r.buf(4096);
    let (a, b) = (r.buf(4096), r.buf(4096));
    let copy =
        |i: usize| Descriptor::memmove(a.iova(), b.iova(), 64).with_completion(rec_at(&recs, i));
    r.submit(&copy(0)).unwrap();
    r.submit(&copy(0)).unwrap();
    // A batch whose descriptor requests record 1, then a descriptor that
    // uses record 1 for itself.
    write_list(&list, &[copy(1), copy(2)]);
    r.submit(&Descriptor::batch(list.iova(), 2).with_completion(rec_at(&recs, 3)))
        .unwrap();
    r.submit(&copy(1)).unwrap();
    while r.model.step() {}
    let v = r.model.take_violations();
    assert!(
        v.contains(&Violation::RecordInUse {
            wq: 0,
            addr: rec_at(&recs, 0)
        }),
        "{v:?}"
    );
    assert!(
        v.contains(&Violation::RecordInUse {
            wq: 0,
            addr: rec_at(&recs, 1)
        }),
        "{v:?}"
    );
    // Reused once its status is seen: fine.
    for i in 0..4 {
        recs.write_u64(32 * i, 0);
    }
    r.submit(&copy(0)).unwrap();
    assert!(r.model.step());
    recs.write_u64(0, 0);
    r.submit(&copy(0)).unwrap();
    assert!(r.model.step());
    assert_eq!(r.model.violations(), vec![]);
}

#[test]
fn many_submitters_on_a_shared_wq() {
    // Four threads share a WQ of 8 entries, retrying when refused: every
    // descriptor completes once, none is lost.
    let r = rig(ModelConfig::with_wq(WqConfig::shared(8)));
    let recs = r.buf(4 * 64 * 32);
    let (a, b) = (r.buf(4096), r.buf(4096));
    std::thread::scope(|s| {
        for t in 0..4 {
            let (r, recs, a, b) = (&r, &recs, &a, &b);
            s.spawn(move || {
                for k in 0..64 {
                    let i = t * 64 + k;
                    let d = Descriptor::memmove(a.iova(), b.iova() + 64 * t as u64, 64)
                        .with_completion(rec_at(recs, i));
                    let end = Instant::now() + Duration::from_secs(5);
                    while r.submit(&d) == Err(Retry) {
                        assert!(Instant::now() < end);
                        std::thread::yield_now();
                    }
                }
            });
        }
    });
    for i in 0..256 {
        assert_eq!(wait(&recs, i).status, status::SUCCESS);
    }
    let c = r.model.counters();
    assert_eq!(c.accepted, 256);
    assert_eq!(c.portal_writes, 256 + c.retries);
    assert!(r.model.violations().is_empty());
}

#[test]
fn dropping_the_model_stops_its_thread() {
    let model = DsaModel::new(ModelConfig::default());
    let h = model.handle();
    assert!(h.thread_running());
    drop(model);
    assert!(!h.thread_running());
    assert_eq!(h.name(), format!("dsa-model-{}", h.shared.id));
}
