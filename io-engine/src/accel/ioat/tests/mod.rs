//! Tests of the I/OAT driver against the device model: bring-up, the
//! ring, splitting, doorbells, recovery, the conformance suite on 1, 2 and
//! 4 channels and under fault injection; of the model's own error
//! behaviour and its device threads' end; and of the seams' memory (the
//! IOVA map, mapped memory, DMA buffers).

mod protocol;

use crate::accel::conformance::scribble;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::IdentityMapper;
use super::driver::{Channel, DriverConfig, Hardware, StartError};
use super::model::{Corruption, IoatModel, ModelConfig, ModelHandle};
use super::spec::{self, chan, chancmd, chanctrl, chanerr, chansts, control, desc, op};
use super::{Ioat, IoatDevices, model_hardware};
use crate::accel::conformance::{self, Arena, Recorder};
use crate::accel::{Accel, AccelChannel, Completion, Module, Opcode, Status};
use crate::env::dma::{
    DmaBuffer, DmaMemory, DmaRegion, HugepagePolicy, IovaMap, MappedMemory, MapperRegistration,
    Window, register_mapper,
};
use crate::env::vfio::{PCI_CAPABILITY_LIST, PCI_DEVICE_ID, PCI_STATUS};

mod bringup;
mod completion;
mod lifetimes;

fn cfg(ring: u32) -> DriverConfig {
    DriverConfig {
        ring_size: ring,
        ..DriverConfig::default()
    }
}

/// Starts `devices` with their mapper registered, as the module's creator
/// (the daemon's main) does.
fn started(devices: IoatDevices) -> Ioat {
    let mapping = register_mapper(devices.mapper());
    devices.start(mapping)
}

/// A module of `n` model channels.
fn models(n: usize) -> Ioat {
    started(IoatDevices::models(
        n,
        &ModelConfig::default(),
        &DriverConfig::default(),
    ))
}

/// `m` as hardware for a channel, its mapper registered as a module's
/// creator would, the registration kept with the device (and dropped after
/// it).
fn mapped(m: IoatModel) -> Hardware {
    let mapping = register_mapper(m.mapper());
    let mut hw = model_hardware(m);
    hw.keep_also(mapping);
    hw
}

/// A module of one model channel, and a handle on the model.
fn one(model: ModelConfig, driver: DriverConfig) -> (Arc<Ioat>, ModelHandle) {
    let m = IoatModel::new(model);
    let h = m.handle();
    let mapper = m.mapper();
    let ioat = started(IoatDevices::new(
        vec![model_hardware(m)],
        &driver,
        mapper,
        Vec::new(),
    ));
    assert_eq!(ioat.channels(), 1, "{:?}", ioat.notes());
    (Arc::new(ioat), h)
}

fn accel_of(ioat: &Arc<Ioat>) -> Arc<Accel> {
    Accel::new(vec![ioat.clone() as Arc<dyn Module>], &[]).unwrap()
}

fn bytes<'a>(p: *const u8, len: usize) -> &'a [u8] {
    // SAFETY: callers pass arena pieces whose tasks have completed.
    unsafe { std::slice::from_raw_parts(p, len) }
}

// ---------------------------------------------------------------------------
// Bring-up
// ---------------------------------------------------------------------------

#[test]
fn bring_up_follows_the_reference_sequence() {
    let m = IoatModel::new(ModelConfig::default());
    let h = m.handle();
    h.record(true);
    let hw = mapped(m);
    let ch = Channel::start(hw, cfg(64)).unwrap();
    h.record(false);
    let log = h.log();
    let c = spec::channel_base(0);
    let devctl = 0x40 + spec::PCI_EXP_DEVCTL as usize;
    // The accesses that matter, in order (CHANSTS and CHANCMD polls
    // between them are allowed); `true` first: in configuration space.
    let want: Vec<(bool, bool, usize, Option<u64>)> = vec![
        (false, false, spec::CBVER, None),
        (false, false, spec::CHANCNT, None),
        (false, false, spec::DMACAPABILITY, None),
        (false, false, spec::XFERCAP, None),
        // Relaxed ordering off (Linux `ioat3_dma_probe`), read back.
        (true, false, PCI_STATUS as usize, None),
        (true, false, PCI_CAPABILITY_LIST as usize, None),
        (true, false, 0x40, None),
        (true, false, devctl, None),
        (true, true, devctl, Some(0x2800)),
        (true, false, devctl, None),
        (true, false, PCI_DEVICE_ID as usize, None),
        (false, false, c + chan::CHANSTS, None),
        (
            false,
            true,
            c + chan::CHANCMD,
            Some(chancmd::SUSPEND as u64),
        ),
        (false, false, c + chan::CHANERR, None),
        (false, true, c + chan::CHANERR, Some(0)),
        (false, true, c + chan::CHANCMD, Some(chancmd::RESET as u64)),
        (false, false, c + chan::CHANCMD, None),
        (false, true, c + chan::CHANCTRL, Some(chanctrl::RUN as u64)),
        // 64-bit registers as 32-bit halves, low then high (Linux).
        (false, true, c + chan::CHANCMP, None),
        (false, true, c + chan::CHANCMP + 4, None),
        (false, true, c + chan::CHAINADDR, None),
        (false, true, c + chan::CHAINADDR + 4, None),
        (false, true, c + chan::DMACOUNT, Some(1)),
        (false, false, c + chan::CHANSTS, None),
    ];
    let mut it = log.iter();
    for (config, write, off, value) in &want {
        let found = it.by_ref().any(|a| {
            a.config == *config
                && a.write == *write
                && a.off == *off
                && value.is_none_or(|v| a.value == v)
        });
        assert!(
            found,
            "no {write} at {off:#x} ({value:?}, config {config}) in order in {log:#?}"
        );
    }
    // Nothing but polls after the doorbell.
    for a in it {
        assert!(!a.write, "unexpected write after bring-up: {a:?}");
    }
    // Exactly these writes, in this order.
    let writes: Vec<_> = log
        .iter()
        .filter(|a| a.write)
        .map(|a| (a.config, a.width, a.off))
        .collect();
    assert_eq!(
        writes,
        vec![
            (true, 16, devctl),
            (false, 8, c + chan::CHANCMD),
            (false, 32, c + chan::CHANERR),
            (false, 8, c + chan::CHANCMD),
            (false, 16, c + chan::CHANCTRL),
            (false, 32, c + chan::CHANCMP),
            (false, 32, c + chan::CHANCMP + 4),
            (false, 32, c + chan::CHAINADDR),
            (false, 32, c + chan::CHAINADDR + 4),
            (false, 16, c + chan::DMACOUNT),
        ],
        "{log:#?}"
    );
    let half = |off: usize| {
        log.iter()
            .find(|a| a.write && !a.config && a.off == off)
            .unwrap()
            .value
    };
    let chancmp = half(c + chan::CHANCMP) | half(c + chan::CHANCMP + 4) << 32;
    let chainaddr = half(c + chan::CHAINADDR) | half(c + chan::CHAINADDR + 4) << 32;
    assert_eq!(chainaddr % 64, 0);
    assert_eq!(chancmp % 8, 0);
    assert_eq!(
        chancmp,
        chainaddr + 64 * 64,
        "completion word after the ring"
    );
    let n = h.counters();
    assert_eq!(
        (n.resets, n.nulls, n.doorbells, n.completions),
        (1, 1, 1, 1)
    );
    assert_eq!(ch.version(), 0x33);
    assert_eq!(ch.max_xfer(), 1 << 20);
    assert!(ch.supports_fill());
}

#[test]
fn bring_up_refuses_old_versions_bad_xfercap_and_bad_rings() {
    let start = |mc: ModelConfig, ring: u32| {
        Channel::start(mapped(IoatModel::new(mc)), cfg(ring)).map(|_| ())
    };
    let e = start(
        ModelConfig {
            cbver: 0x22,
            ..ModelConfig::default()
        },
        64,
    )
    .unwrap_err();
    assert!(matches!(e, StartError::Version { cbver: 0x22, .. }), "{e}");
    assert!(e.to_string().contains("2.2"), "{e}");
    let e = start(
        ModelConfig {
            xfercap: 11,
            ..ModelConfig::default()
        },
        64,
    )
    .unwrap_err();
    assert_eq!(e, StartError::XferCap(11));
    for ring in [0, 8, 100, 1 << 17] {
        assert_eq!(
            start(ModelConfig::default(), ring).unwrap_err(),
            StartError::RingSize(ring)
        );
    }
    // XFERCAP 0 is 4 GiB (capped to what a descriptor's size holds).
    let ch = Channel::start(
        mapped(IoatModel::new(ModelConfig {
            xfercap: 0,
            ..ModelConfig::default()
        })),
        cfg(64),
    )
    .unwrap();
    assert_eq!(ch.max_xfer(), 1 << 31);
}

#[test]
fn a_device_that_never_resets_times_out_with_a_message() {
    // Registers that ignore every write: CHANCMD's reset bit never clears.
    struct Stuck;
    impl crate::env::vfio::Registers for Stuck {
        fn read8(&self, off: usize) -> u8 {
            match off {
                spec::CBVER => 0x33,
                spec::CHANCNT => 1,
                spec::XFERCAP => 20,
                o if o == spec::channel_base(0) + chan::CHANCMD => chancmd::RESET,
                _ => 0,
            }
        }
        fn read16(&self, _: usize) -> u16 {
            0
        }
        fn read32(&self, _: usize) -> u32 {
            0
        }
        fn read64(&self, _: usize) -> u64 {
            chansts::HALTED
        }
        unsafe fn write8(&self, _: usize, _: u8) {}
        unsafe fn write16(&self, _: usize, _: u16) {}
        unsafe fn write32(&self, _: usize, _: u32) {}
        unsafe fn write64(&self, _: usize, _: u64) {}
    }
    let m = IoatModel::new(ModelConfig::default());
    // The ring is allocated (and must be mapped) before the reset.
    let _mapping = register_mapper(m.mapper());
    let hw = {
        // SAFETY: registers that start nothing, and the model's
        // configuration space and memory (its own address space).
        unsafe {
            Hardware::new(
                "stuck".into(),
                Box::new(Stuck),
                Box::new(m.pci_config()),
                Arc::new(m.memory()),
                None,
            )
        }
    };
    let e = Channel::start(
        hw,
        DriverConfig {
            start_timeout: Duration::from_millis(20),
            ..cfg(64)
        },
    )
    .map(|_| ())
    .unwrap_err();
    assert!(
        matches!(
            e,
            StartError::Timeout {
                what: "the channel reset",
                ..
            }
        ),
        "{e}"
    );
    let ioat = Ioat::start(
        vec![{
            // SAFETY: as above.
            unsafe {
                Hardware::new(
                    "stuck".into(),
                    Box::new(Stuck),
                    Box::new(m.pci_config()),
                    Arc::new(m.memory()),
                    None,
                )
            }
        }],
        &DriverConfig {
            start_timeout: Duration::from_millis(20),
            ..cfg(64)
        },
        Vec::new(),
    );
    assert_eq!(ioat.channels(), 0);
    assert!(!ioat.supports(Opcode::Copy));
    let notes = ioat.notes().join("\n");
    assert!(
        notes.contains("ioat stuck: cannot start the channel"),
        "{notes}"
    );
    assert!(notes.contains("run on the software module"), "{notes}");
}

// ---------------------------------------------------------------------------
// The conformance suite
// ---------------------------------------------------------------------------

#[test]
fn one_model_channel_passes_the_conformance_suite() {
    let (ioat, h) = one(ModelConfig::default(), DriverConfig::default());
    let accel = accel_of(&ioat);
    assert_eq!(accel.assigned(Opcode::Copy), "ioat");
    assert_eq!(accel.assigned(Opcode::Fill), "ioat");
    assert_eq!(accel.assigned(Opcode::Crc32c), "software");
    conformance::run_all(&accel, 4 << 20);
    let (ops, _) = accel.stats();
    for op in [Opcode::Copy, Opcode::Fill] {
        let s = ops
            .iter()
            .find(|s| s.opcode == op && s.module == "ioat")
            .unwrap();
        assert!(s.executed > 0 && s.failed == 0, "{s:?}");
    }
    let t = ioat.totals();
    assert_eq!(t.failed + t.halts + t.timeouts, 0, "{t:?}");
    assert_eq!(
        h.counters().doorbells,
        t.doorbells,
        "driver and device agree"
    );
    assert_eq!(h.counters().descriptors, t.descriptors);
}

/// `n` threads on a module of `channels` model channels, each running the
/// suite on its own channel; returns how many ran copy on ioat.
fn threads_run_the_suite(channels: usize, threads: usize) -> (usize, Arc<Accel>) {
    let ioat = Arc::new(models(channels));
    assert_eq!(ioat.channels(), channels);
    let accel = accel_of(&ioat);
    // Every thread takes its channel before any finishes (a finished
    // thread's channel goes back to the pool).
    let barrier = Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (accel, barrier) = (accel.clone(), barrier.clone());
            std::thread::spawn(move || {
                let ch = accel.channel();
                barrier.wait();
                let on = ch.module_for(Opcode::Copy);
                conformance::run_all(&accel, 1 << 20);
                on
            })
        })
        .collect();
    let on_ioat = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|m| *m == "ioat")
        .count();
    assert_eq!(ioat.free_channels(), channels, "every channel came back");
    (on_ioat, accel)
}

#[test]
fn two_and_four_channels_pass_the_suite_on_threads_of_their_own() {
    for n in [2, 4] {
        let (on_ioat, accel) = threads_run_the_suite(n, n);
        assert_eq!(on_ioat, n);
        assert!(accel.notes().is_empty(), "{:?}", accel.notes());
    }
}

#[test]
fn threads_beyond_the_channels_run_on_software_and_say_so() {
    let (on_ioat, accel) = threads_run_the_suite(1, 3);
    assert_eq!(on_ioat, 1);
    let notes = accel.notes();
    assert_eq!(notes.len(), 2, "{notes:?}");
    for n in &notes {
        assert!(
            n.contains("copy (assigned to ioat), fill (assigned to ioat) run on software"),
            "{n}"
        );
    }
}

#[test]
fn four_channels_on_two_reactors() {
    use crate::env::cores::{CoreSet, allowed_cpus};
    use crate::reactor::{PollMode, Reactors};
    let cpus: Vec<u32> = allowed_cpus().unwrap().iter().take(2).collect();
    let reactors = Reactors::start(&CoreSet::from_cpus(cpus).unwrap(), PollMode::Busy).unwrap();
    let ioat = Arc::new(models(4));
    let accel = accel_of(&ioat);
    let replies: Vec<_> = (0..reactors.len())
        .map(|core| {
            let accel = accel.clone();
            reactors.run_on(core, move || {
                let ch = accel.channel();
                assert_eq!(ch.module_for(Opcode::Copy), "ioat");
                conformance::run_all(&accel, 1 << 20);
                // Held while the reactor lives: the channel stays taken.
                std::mem::forget(ch);
            })
        })
        .collect();
    for r in replies {
        r.wait().unwrap();
    }
    assert_eq!(ioat.free_channels(), 2, "two reactors hold two channels");
    assert!(accel.notes().is_empty());
    reactors.stop();
}

// ---------------------------------------------------------------------------
// Ring, splitting, doorbells
// ---------------------------------------------------------------------------

/// Copies `n` tasks of `len` bytes in batches of `batch`, polling between
/// batches only when `poll_between`; checks every result.
fn copy_batches(ch: &Rc<AccelChannel>, arena: &Arena, n: usize, batch: usize, len: usize) -> usize {
    let r = Recorder::new(ch);
    let mut pieces = Vec::new();
    let mut batches = 0;
    let mut i = 0;
    while i < n {
        let mut b = r.q.batch();
        for _ in 0..batch.min(n - i) {
            let src = arena.take(len, i % 61);
            let dst = arena.take(len, (i * 7) % 61);
            scribble(src, len, i as u64);
            // SAFETY: arena pieces, untouched until the wait.
            unsafe { b.copy(dst, src, len, i as u64) }.unwrap();
            pieces.push((src, dst));
            i += 1;
        }
        b.submit();
        batches += 1;
    }
    r.wait(n, "copies");
    for (tag, c) in r.seen.borrow().iter() {
        assert_eq!(*c, Completion::SUCCESS, "task {tag}");
        let (s, d) = pieces[*tag as usize];
        assert!(bytes(s, len) == bytes(d, len), "task {tag} data");
    }
    batches
}

#[test]
fn the_ring_wraps_around_many_times_and_dmacount_wraps_too() {
    let (ioat, h) = one(ModelConfig::default(), cfg(16));
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    assert_eq!(ch.max_batch(Opcode::Copy), 15);
    let arena = Arena::new(16 << 20);
    let mut tasks = 0;
    // 70 000 descriptors: DMACOUNT (16 bits) wraps, the ring 4 000 times.
    while tasks < 70_000 {
        arena.reset();
        copy_batches(&ch, &arena, 1000, 15, 64);
        tasks += 1000;
    }
    let c = h.counters();
    assert!(c.descriptors > 65_536, "{c:?}");
    assert_eq!(ioat.totals().failed, 0);
}

#[test]
fn a_full_ring_queues_requests_and_loses_none() {
    let (ioat, _h) = one(ModelConfig::default(), cfg(16));
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    let arena = Arena::new(16 << 20);
    let r = Recorder::new(&ch);
    let len = 4096;
    let mut pieces = Vec::new();
    // 8 batches of 15 with no poll between: 120 requests for 15 slots.
    for k in 0..8 {
        let mut b = r.q.batch();
        for j in 0..15 {
            let tag = k * 15 + j;
            let src = arena.take(len, 0);
            let dst = arena.take(len, 0);
            scribble(src, len, tag as u64);
            // SAFETY: arena pieces, untouched until the wait.
            unsafe { b.copy(dst, src, len, tag as u64) }.unwrap();
            pieces.push((src, dst));
        }
        b.submit();
    }
    assert_eq!(ch.in_flight(), 120);
    r.wait(120, "back-pressure");
    let seen = r.seen.borrow();
    let mut tags: Vec<u64> = seen.iter().map(|(t, _)| *t).collect();
    tags.sort();
    assert_eq!(tags, (0..120).collect::<Vec<_>>(), "each exactly once");
    for (tag, c) in seen.iter() {
        assert_eq!(*c, Completion::SUCCESS);
        let (s, d) = pieces[*tag as usize];
        assert!(bytes(s, len) == bytes(d, len));
    }
    assert!(ioat.totals().ring_full > 0, "{:?}", ioat.totals());
}

#[test]
fn one_doorbell_per_batch_however_many_descriptors() {
    let (ioat, h) = one(
        ModelConfig {
            xfercap: 12,
            ..ModelConfig::default()
        },
        cfg(4096),
    );
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    let arena = Arena::new(64 << 20);
    let before = h.counters();
    let mut batches = 0;
    for (n, len) in [(1, 64), (7, 4096), (64, 512), (3, 1 << 20), (1, 3 << 20)] {
        arena.reset();
        batches += copy_batches(&ch, &arena, n, n, len);
    }
    let after = h.counters();
    assert_eq!(after.doorbells - before.doorbells, batches as u64);
    // 1 MiB at 4 KiB per descriptor: at least 256 descriptors each.
    assert!(after.descriptors - before.descriptors > 3 * 256 + 768);
    let (_, mods) = accel.stats();
    let ioat_batches = mods.iter().find(|m| m.module == "ioat").unwrap().batches;
    assert_eq!(ioat_batches, batches as u64);
}

#[test]
fn a_one_mib_copy_splits_at_xfercap() {
    let (ioat, h) = one(
        ModelConfig {
            xfercap: 12,
            ..ModelConfig::default()
        },
        cfg(4096),
    );
    assert_eq!(ioat.max_transfer(Opcode::Copy), 1024 * 4096);
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    let arena = Arena::new(8 << 20);
    for (src_off, dst_off, want) in [(0, 0, 256), (0, 100, 257), (5, 5, 257)] {
        arena.reset();
        let before = h.counters().descriptors;
        let src = arena.take(1 << 20, src_off);
        let dst = arena.take(1 << 20, dst_off);
        scribble(src, 1 << 20, 9);
        let r = Recorder::new(&ch);
        // SAFETY: arena pieces, untouched until the wait.
        unsafe { r.q.copy(dst, src, 1 << 20, 0) }.unwrap();
        r.wait(1, "1 MiB copy");
        assert_eq!(r.only("1 MiB copy"), Completion::SUCCESS);
        assert!(bytes(src, 1 << 20) == bytes(dst, 1 << 20));
        // Only XFERCAP splits here: the arena is one region, so each
        // descriptor moves up to 4 KiB and never crosses a region.
        let used = h.counters().descriptors - before;
        assert!(
            used >= 256 && used <= want,
            "offsets {src_off}/{dst_off}: {used} descriptors"
        );
    }
}

/// Device-visible memory whose test buffers are mapped page by page at
/// IOVAs in reverse order, so every page boundary is an IOVA
/// discontinuity; the ring is mapped contiguously.
struct Scrambled {
    map: Arc<IovaMap>,
    next: AtomicU64,
}

impl Scrambled {
    fn new(map: Arc<IovaMap>) -> Scrambled {
        Scrambled {
            map,
            next: AtomicU64::new(1 << 44),
        }
    }

    /// Maps `region` page by page, IOVAs going down.
    fn scramble(&self, region: &DmaRegion) {
        let pages = region.len() / 4096;
        let base = self
            .next
            .fetch_add((pages as u64 + 16) * 4096, Ordering::Relaxed);
        for p in 0..pages {
            // SAFETY: a page of `region`, which the test keeps (reached
            // through raw pointers only) until it has dropped the model;
            // the model reaches it at this IOVA through this map only.
            unsafe {
                self.map.insert(Window {
                    va: region.as_ptr() as usize + p * 4096,
                    len: 4096,
                    iova: base + ((pages - 1 - p) as u64) * 4096,
                })
            };
        }
    }
}

// SAFETY: every window is inserted into the map the model resolves through,
// at the IOVA the model then uses, and stays while the memory lives (the
// test keeps its regions until the model is dropped).
unsafe impl DmaMemory for Scrambled {
    fn alloc(&self, len: usize) -> Result<DmaBuffer, String> {
        let region =
            DmaRegion::alloc_with(len, HugepagePolicy::Never).map_err(|e| e.to_string())?;
        let iova = self
            .next
            .fetch_add(region.len() as u64 + 4096, Ordering::Relaxed);
        // SAFETY: the DmaBuffer keeps the region alive as long as the
        // channel holding it, which the test drops before the model.
        unsafe {
            self.map.insert(Window {
                va: region.as_ptr() as usize,
                len: region.len(),
                iova,
            })
        };
        // SAFETY: just inserted at `iova`, for the region's whole length.
        Ok(unsafe { DmaBuffer::new(Arc::new(region), iova) })
    }
    fn window(&self, addr: usize) -> Option<Window> {
        self.map.by_va(addr)
    }
    fn generation(&self) -> u64 {
        self.map.generation()
    }
}

#[test]
fn requests_split_at_iova_discontinuities() {
    let map = Arc::new(IovaMap::new());
    let mem = Arc::new(Scrambled::new(map.clone()));
    let m = IoatModel::with_map(ModelConfig::default(), map.clone());
    let h = m.handle();
    let hw = {
        // SAFETY: the model's registers and configuration space; `mem` puts
        // every window it gives into the map the model resolves through.
        unsafe {
            Hardware::new(
                m.name(),
                Box::new(m.registers()),
                Box::new(m.pci_config()),
                mem.clone(),
                Some(Box::new(m)),
            )
        }
    };
    let ioat = Arc::new(Ioat::start(vec![hw], &cfg(4096), Vec::new()));
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    let a = DmaRegion::alloc_with(2 << 20, HugepagePolicy::Never).unwrap();
    let b = DmaRegion::alloc_with(2 << 20, HugepagePolicy::Never).unwrap();
    mem.scramble(&a);
    mem.scramble(&b);
    let len = 1 << 20;
    for (so, d_o, want) in [(0usize, 0usize, 256u64), (0, 100, 512), (3000, 7, 512)] {
        // SAFETY: inside the 2 MiB regions.
        let (src, dst) = unsafe { (a.as_ptr().add(so), b.as_ptr().add(d_o)) };
        scribble(src, len, so as u64);
        let before = h.counters().descriptors;
        let r = Recorder::new(&ch);
        // SAFETY: the regions outlive the wait.
        unsafe { r.q.copy(dst, src, len, 0) }.unwrap();
        r.wait(1, "scrambled copy");
        assert_eq!(r.only("scrambled copy"), Completion::SUCCESS);
        assert!(bytes(src, len) == bytes(dst, len), "{so}/{d_o}: data");
        let used = h.counters().descriptors - before;
        assert!(
            (256..=want + 1).contains(&used),
            "{so}/{d_o}: {used} descriptors"
        );
        // A fill splits at the destination's pages too.
        let before = h.counters().descriptors;
        let r = Recorder::new(&ch);
        // SAFETY: as above.
        unsafe { r.q.fill(dst, 0x5a, len, 0) }.unwrap();
        r.wait(1, "scrambled fill");
        assert_eq!(r.only("scrambled fill"), Completion::SUCCESS);
        assert!(bytes(dst, len).iter().all(|&x| x == 0x5a));
        assert!(h.counters().descriptors - before >= 256);
    }
    // The model goes before the regions its map names (`scramble`'s
    // contract).
    drop(ch);
    drop(accel);
    drop(ioat);
    assert!(!h.thread_running());
}

#[test]
fn memory_the_device_cannot_reach_is_an_invalid_argument() {
    let (ioat, _h) = one(ModelConfig::default(), DriverConfig::default());
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    let src = vec![1u8; 4096];
    let mut dst = vec![0u8; 4096];
    let r = Recorder::new(&ch);
    // SAFETY: the vectors outlive the wait.
    unsafe { r.q.copy(dst.as_mut_ptr(), src.as_ptr(), 4096, 0) }.unwrap();
    r.wait(1, "heap copy");
    assert_eq!(r.only("heap copy").status, Status::InvalidArgument);
    assert_eq!(dst[0], 0, "nothing written");
    assert_eq!(ioat.totals().invalid, 1);
}

// ---------------------------------------------------------------------------
// Errors and recovery
// ---------------------------------------------------------------------------

/// Submits `n` copies of `len` bytes in one batch; returns each task's
/// completion (by tag) and whether its data is right.
fn batch_results(
    ch: &Rc<AccelChannel>,
    arena: &Arena,
    n: usize,
    len: usize,
) -> Vec<(Completion, bool)> {
    arena.reset();
    let r = Recorder::new(ch);
    let mut pieces = Vec::new();
    let mut b = r.q.batch();
    for i in 0..n {
        let src = arena.take(len, 0);
        let dst = arena.take(len, 0);
        scribble(src, len, i as u64 + 1);
        // SAFETY: dst is written by the device or not at all.
        unsafe { std::ptr::write_bytes(dst, 0, len) };
        // SAFETY: arena pieces, untouched until the wait.
        unsafe { b.copy(dst, src, len, i as u64) }.unwrap();
        pieces.push((src, dst));
    }
    b.submit();
    r.wait(n, "batch");
    let mut out = vec![(Completion::SUCCESS, false); n];
    for (tag, c) in r.seen.borrow().iter() {
        let (s, d) = pieces[*tag as usize];
        out[*tag as usize] = (*c, bytes(s, len) == bytes(d, len));
    }
    out
}

#[test]
fn a_halt_fails_the_request_that_faulted_and_rebuilds_the_rest() {
    let (ioat, h) = one(
        ModelConfig {
            xfercap: 12,
            ..ModelConfig::default()
        },
        DriverConfig::default(),
    );
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    let arena = Arena::new(8 << 20);
    // One descriptor per request: the 4th request's descriptor fails.
    h.faults().fail_nth(4);
    let res = batch_results(&ch, &arena, 10, 1024);
    for (i, (c, ok)) in res.iter().enumerate() {
        if i == 3 {
            assert_eq!(c.status, Status::EngineError, "the faulting request");
        } else {
            assert_eq!(*c, Completion::SUCCESS, "request {i}");
            assert!(ok, "request {i} data");
        }
    }
    // Four descriptors per request: the 6th descriptor is the second
    // request's.
    h.faults().fail_nth(6);
    let res = batch_results(&ch, &arena, 5, 16384);
    for (i, (c, ok)) in res.iter().enumerate() {
        if i == 1 {
            assert_eq!(c.status, Status::EngineError);
        } else {
            assert_eq!(*c, Completion::SUCCESS, "request {i}");
            assert!(ok, "request {i} data");
        }
    }
    let t = ioat.totals();
    assert_eq!((t.halts, t.failed), (2, 2), "{t:?}");
    assert_eq!(t.resubmitted, 6 + 3, "{t:?}");
    assert_eq!(h.counters().halts, 2);
    assert_eq!(h.counters().resets, 3, "bring-up and one reset per halt");
    // And the channel serves on.
    conformance::copy(&ch, &arena, 65536);
}

#[test]
fn every_error_kind_halts_and_the_channel_recovers() {
    for bits in [
        chanerr::SRC_ADDR,
        chanerr::DEST_ADDR,
        chanerr::CONTROL,
        chanerr::LENGTH,
        chanerr::READ_DATA,
    ] {
        let (ioat, h) = one(ModelConfig::default(), DriverConfig::default());
        let accel = accel_of(&ioat);
        let ch = accel.channel();
        let arena = Arena::new(4 << 20);
        h.faults().fail_every(3, bits);
        let res = batch_results(&ch, &arena, 9, 512);
        h.faults().clear();
        let failed: Vec<usize> = res
            .iter()
            .enumerate()
            .filter(|(_, (c, _))| c.status != Status::Success)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(failed, vec![2, 5, 8], "{}", chanerr::describe(bits));
        for (i, (c, ok)) in res.iter().enumerate() {
            if !failed.contains(&i) {
                assert!(c.status == Status::Success && *ok, "request {i}");
            } else {
                assert_eq!(c.status, Status::EngineError);
            }
        }
        let res = batch_results(&ch, &arena, 9, 512);
        assert!(res.iter().all(|(c, ok)| c.status == Status::Success && *ok));
    }
}

#[test]
fn a_stall_within_the_timeout_fails_nothing_and_completes_when_the_device_moves() {
    // A timeout no test outlives: whatever the machine's load, the driver
    // must not give up on the stalled requests.
    let (ioat, h) = one(
        ModelConfig::default(),
        DriverConfig {
            timeout: Duration::from_secs(24 * 3600),
            ..DriverConfig::default()
        },
    );
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    let arena = Arena::new(4 << 20);
    h.faults().stall();
    let r = Recorder::new(&ch);
    let mut pieces = Vec::new();
    let mut b = r.q.batch();
    for i in 0..5 {
        let (src, dst) = (arena.take(4096, 0), arena.take(4096, 0));
        scribble(src, 4096, i + 1);
        // SAFETY: arena pieces, untouched until the wait.
        unsafe { b.copy(dst, src, 4096, i) }.unwrap();
        pieces.push((src, dst));
    }
    b.submit();
    // Poll until the driver has read CHANSTS itself (its stall check) a
    // few times: it saw the channel stand still and failed nothing.
    let reads = h.counters().reads;
    let mut seen = r.seen.borrow_mut();
    while h.counters().reads < reads + 3 {
        assert_eq!(r.q.reap(&mut seen), 0, "a stalled request completed");
        std::hint::spin_loop();
    }
    assert!(seen.is_empty(), "{seen:?}");
    drop(seen);
    let t = ioat.totals();
    assert_eq!((t.timeouts, t.failed, t.halts), (0, 0, 0), "{t:?}");
    // The device moves again: every request completes, with its data.
    h.faults().clear();
    r.wait(5, "resumed batch");
    for (tag, c) in r.seen.borrow().iter() {
        let (s, d) = pieces[*tag as usize];
        assert_eq!(*c, Completion::SUCCESS, "task {tag}");
        assert!(bytes(s, 4096) == bytes(d, 4096), "task {tag}: data");
    }
    assert_eq!(ioat.totals().timeouts, 0);
}

#[test]
fn a_stalled_channel_times_out_fails_its_requests_and_serves_again() {
    let (ioat, h) = one(
        ModelConfig::default(),
        DriverConfig {
            timeout: Duration::from_millis(50),
            ..DriverConfig::default()
        },
    );
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    let arena = Arena::new(4 << 20);
    h.faults().stall();
    // Waits (up to the suite's case timeout) for the driver to give up:
    // how long it takes on a loaded machine says nothing; that it gave up
    // once, on every request, does. That it waits for its timeout first is
    // the test above.
    let res = batch_results(&ch, &arena, 5, 4096);
    assert!(
        res.iter().all(|(c, _)| c.status == Status::EngineError),
        "{res:?}"
    );
    let t = ioat.totals();
    assert_eq!((t.timeouts, t.failed), (1, 5), "{t:?}");
    // The reset cleared the stall: the channel serves again.
    let res = batch_results(&ch, &arena, 5, 4096);
    assert!(res.iter().all(|(c, ok)| c.status == Status::Success && *ok));
}

#[test]
fn corrupt_completion_words_are_caught_and_nothing_is_lost() {
    for how in [Corruption::Stale, Corruption::Wild] {
        let (ioat, h) = one(ModelConfig::default(), DriverConfig::default());
        let accel = accel_of(&ioat);
        let ch = accel.channel();
        let arena = Arena::new(4 << 20);
        for round in 0..20 {
            h.faults().corrupt_completion(1 + round % 3, how);
            let res = batch_results(&ch, &arena, 1 + round as usize % 4, 2048);
            assert!(
                res.iter().all(|(c, ok)| c.status == Status::Success && *ok),
                "{how:?} round {round}: {res:?}"
            );
        }
        let t = ioat.totals();
        assert_eq!(t.failed, 0, "{t:?}");
        if how == Corruption::Wild {
            assert!(t.bad_completions > 0, "{t:?}");
        }
    }
}

#[test]
fn the_suite_passes_after_a_run_under_fault_injection() {
    let (ioat, h) = one(ModelConfig::default(), DriverConfig::default());
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    let arena = Arena::new(32 << 20);
    h.faults().fail_every(37, chanerr::DEST_ADDR);
    let mut failed = 0;
    let mut ok = 0;
    for round in 0..40 {
        let res = batch_results(&ch, &arena, 1 + (round * 7) % 40, 1 + (round * 997) % 9000);
        for (c, good) in res {
            match c.status {
                Status::Success => {
                    assert!(good, "a task reported done has its data");
                    ok += 1;
                }
                Status::EngineError => failed += 1,
                other => panic!("{other:?}"),
            }
        }
    }
    h.faults().clear();
    let t = ioat.totals();
    assert!(failed > 0 && ok > 0);
    assert_eq!(t.failed, failed, "{t:?}");
    assert_eq!(t.halts, failed, "one failed request per halt");
    assert_eq!(h.counters().halts, failed);
    // Recovered: the whole suite passes on the same channel.
    drop(ch);
    conformance::run_all(&accel, 1 << 20);
}

#[test]
fn a_module_without_fill_leaves_fill_on_software() {
    let (ioat, _h) = one(
        ModelConfig {
            dmacap: 0,
            ..ModelConfig::default()
        },
        DriverConfig::default(),
    );
    assert!(ioat.supports(Opcode::Copy));
    assert!(!ioat.supports(Opcode::Fill));
    assert!(
        ioat.notes()
            .iter()
            .any(|n| n.contains("fill runs on software"))
    );
    let accel = accel_of(&ioat);
    assert_eq!(accel.assigned(Opcode::Fill), "software");
    conformance::run_all(&accel, 1 << 16);
}

#[test]
fn module_notes_and_counters_describe_the_channels() {
    let ioat = Arc::new(models(2));
    let notes = ioat.notes().join("\n");
    assert!(notes.contains("ioat: 2 channels ready: model-"), "{notes}");
    assert!(
        notes.contains("CBVER 3.3, 1 MiB per descriptor, block fill"),
        "{notes}"
    );
    let accel = accel_of(&ioat);
    assert_eq!(accel.module_notes(), ioat.notes().to_vec());
    let ch = accel.channel();
    let arena = Arena::new(4 << 20);
    copy_batches(&ch, &arena, 10, 10, 100);
    let c: std::collections::HashMap<_, _> = accel.module_counters("ioat").into_iter().collect();
    assert_eq!(c["doorbell_writes"], 2 + 1, "two bring-ups, one batch");
    assert_eq!(c["descriptors"], 2 + 10);
    assert!(accel.module_counters("software").is_empty());
    let all = accel.engine_counters();
    assert_eq!(all.len(), 1, "only ioat has counters: {all:?}");
    assert_eq!(all[0].0, "ioat");
    assert_eq!(all[0].1, accel.module_counters("ioat"));
    let info = accel.modules();
    assert_eq!(info[0].name, "ioat");
    assert_eq!(info[0].opcodes, vec![Opcode::Copy, Opcode::Fill]);
    assert_eq!(info[0].max_batch, 4095);
}

// ---------------------------------------------------------------------------
// The model on its own
// ---------------------------------------------------------------------------

/// A hand-driven model: a region with descriptors at slot `i * 64` and a
/// completion word at 4096.
struct Bench {
    m: IoatModel,
    r: DmaRegion,
    _mapping: MapperRegistration,
}

impl Bench {
    fn new() -> Bench {
        let m = IoatModel::new(ModelConfig {
            xfercap: 16,
            ..ModelConfig::default()
        });
        let _mapping = register_mapper(m.mapper());
        let r = DmaRegion::alloc_with(2 << 20, HugepagePolicy::Never).unwrap();
        let b = Bench { m, r, _mapping };
        use crate::env::vfio::Registers;
        let c = spec::channel_base(0);
        b.write(8, c + chan::CHANCMD, chancmd::RESET.into());
        b.wait(|regs| regs.read8(c + chan::CHANCMD) == 0);
        b.write(16, c + chan::CHANCTRL, chanctrl::ANY_ERR_ABORT_EN.into());
        b.write(64, c + chan::CHANCMP, b.iova(4096));
        b.write(64, c + chan::CHAINADDR, b.iova(0));
        b
    }

    /// A `width`-bit register write to the bench's model.
    fn write(&self, width: u32, off: usize, v: u64) {
        use crate::env::vfio::Registers;
        let regs = self.m.registers();
        // SAFETY: the model reaches only the windows of its map, the live
        // DMA regions its mapper was told of: here `self.r`, which the
        // bench drops after the model (whose thread is joined first), and
        // the other tests' regions, whose owners unmap them before they
        // go. Wild addresses in descriptors halt the model.
        unsafe {
            match width {
                8 => regs.write8(off, v as u8),
                16 => regs.write16(off, v as u16),
                32 => regs.write32(off, v as u32),
                _ => regs.write64(off, v),
            }
        }
    }

    fn iova(&self, off: usize) -> u64 {
        self.r.as_ptr() as u64 + off as u64
    }

    fn put(&self, slot: usize, size: u32, ctl: u32, src: u64, dst: u64, next: u64) {
        let p = self.r.as_ptr();
        let o = slot * 64;
        // SAFETY: inside the region; the device has not been told of it yet.
        unsafe {
            p.add(o + desc::SIZE).cast::<u32>().write_volatile(size);
            p.add(o + desc::CONTROL).cast::<u32>().write_volatile(ctl);
            p.add(o + desc::SRC).cast::<u64>().write_volatile(src);
            p.add(o + desc::DST).cast::<u64>().write_volatile(dst);
            p.add(o + desc::NEXT).cast::<u64>().write_volatile(next);
        }
    }

    fn wait(&self, done: impl Fn(&super::model::ModelRegisters) -> bool) {
        let regs = self.m.registers();
        let start = Instant::now();
        while !done(&regs) {
            assert!(start.elapsed() < Duration::from_secs(5), "model stuck");
            std::thread::yield_now();
        }
    }

    fn ring(&self, count: u16) -> (u64, u32) {
        use crate::env::vfio::Registers;
        let c = spec::channel_base(0);
        let before = self.m.counters();
        self.write(16, c + chan::DMACOUNT, count.into());
        let start = Instant::now();
        loop {
            let now = self.m.counters();
            if now.halts > before.halts || now.descriptors >= before.descriptors + count as u64 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(5), "model stuck");
            std::thread::yield_now();
        }
        let r = self.m.registers();
        (r.read64(c + chan::CHANSTS), r.read32(c + chan::CHANERR))
    }
}

#[test]
fn the_model_executes_copy_fill_and_null_and_writes_completions() {
    let b = Bench::new();
    let data = 8192;
    let (src, dst, fdst) = (b.iova(data), b.iova(2 * data), b.iova(3 * data));
    // SAFETY: inside the region.
    unsafe { std::ptr::write_bytes(b.r.as_ptr().add(data), 0x77, 1000) };
    let cu = control::COMPLETION_UPDATE;
    b.put(
        0,
        8,
        control::with_op(op::COPY, control::NULL),
        0,
        0,
        b.iova(64),
    );
    b.put(
        1,
        1000,
        control::with_op(op::COPY, 0),
        src,
        dst,
        b.iova(128),
    );
    b.put(
        2,
        999,
        control::with_op(op::FILL, cu),
        spec::fill_pattern(0xab),
        fdst,
        b.iova(192),
    );
    let (st, err) = b.ring(3);
    assert_eq!(err, 0);
    assert_eq!(st, b.iova(128) | chansts::IDLE);
    // SAFETY: the device is idle; 8-aligned word inside the region.
    let word = unsafe { b.r.as_ptr().add(4096).cast::<u64>().read_volatile() };
    assert_eq!(word, b.iova(128) | chansts::IDLE);
    // SAFETY: inside the region, the device is idle.
    let (copied, filled) = unsafe {
        (
            std::slice::from_raw_parts(b.r.as_ptr().add(2 * data), 1001),
            std::slice::from_raw_parts(b.r.as_ptr().add(3 * data), 1000),
        )
    };
    assert!(copied[..1000].iter().all(|&x| x == 0x77) && copied[1000] == 0);
    assert!(filled[..999].iter().all(|&x| x == 0xab) && filled[999] == 0);
    let c = b.m.counters();
    assert_eq!((c.descriptors, c.nulls, c.completions), (3, 1, 1));
}

#[test]
fn the_model_halts_with_the_matching_chanerr_bits() {
    let ok = control::with_op(op::COPY, 0);
    type Case = (&'static str, u32, Box<dyn Fn(&Bench)>);
    let cases: Vec<Case> = vec![
        (
            "unknown opcode",
            chanerr::CONTROL,
            Box::new(move |b: &Bench| {
                b.put(
                    0,
                    64,
                    control::with_op(0x55, 0),
                    b.iova(8192),
                    b.iova(16384),
                    b.iova(64),
                )
            }),
        ),
        (
            "unaligned next pointer",
            chanerr::NEXT_DESC_ALIGN,
            Box::new(move |b: &Bench| {
                b.put(0, 64, ok, b.iova(8192), b.iova(16384), b.iova(64) + 8);
                b.put(1, 64, ok, b.iova(8192), b.iova(16384), b.iova(128));
            }),
        ),
        (
            "unmapped next pointer",
            chanerr::NEXT_DESC_ADDR,
            Box::new(move |b: &Bench| {
                b.put(0, 64, ok, b.iova(8192), b.iova(16384), 0x40);
                b.put(1, 64, ok, b.iova(8192), b.iova(16384), b.iova(128));
            }),
        ),
        (
            "null source",
            chanerr::SRC_ADDR,
            Box::new(move |b: &Bench| b.put(0, 64, ok, 0, b.iova(16384), b.iova(64))),
        ),
        (
            "destination past the mapping",
            chanerr::DEST_ADDR,
            Box::new(move |b: &Bench| {
                b.put(0, 64, ok, b.iova(8192), b.iova((2 << 20) - 32), b.iova(64))
            }),
        ),
        (
            "zero length",
            chanerr::LENGTH,
            Box::new(move |b: &Bench| b.put(0, 0, ok, b.iova(8192), b.iova(16384), b.iova(64))),
        ),
        (
            "length above XFERCAP",
            chanerr::LENGTH,
            Box::new(move |b: &Bench| {
                b.put(0, 65537, ok, b.iova(8192), b.iova(200_000), b.iova(64))
            }),
        ),
    ];
    for (what, bits, setup) in cases {
        let b = Bench::new();
        setup(&b);
        let (st, err) = b.ring(
            if bits == chanerr::NEXT_DESC_ALIGN || bits == chanerr::NEXT_DESC_ADDR {
                2
            } else {
                1
            },
        );
        assert_eq!(chansts::state(st), chansts::HALTED, "{what}");
        assert_eq!(err, bits, "{what}: {}", chanerr::describe(err));
        // Nothing completed but the first of a two-descriptor chain.
        let done = if bits == chanerr::NEXT_DESC_ALIGN || bits == chanerr::NEXT_DESC_ADDR {
            b.iova(0)
        } else {
            0
        };
        assert_eq!(chansts::addr(st), done, "{what}");
        assert_eq!(b.m.counters().halts, 1);
    }
    // A bad chain address, a bad completion address, a bad command.
    use crate::env::vfio::Registers;
    let c = spec::channel_base(0);
    let b = Bench::new();
    b.write(64, c + chan::CHAINADDR, b.iova(0) + 4);
    assert_eq!(b.ring(1).1, chanerr::CHAIN_ADDR_VALUE);
    let b = Bench::new();
    b.put(
        0,
        64,
        ok | control::COMPLETION_UPDATE,
        b.iova(8192),
        b.iova(16384),
        b.iova(64),
    );
    b.write(64, c + chan::CHANCMP, 0x1000);
    assert_eq!(b.ring(1).1, chanerr::COMPLETION_ADDR);
    let b = Bench::new();
    b.write(8, c + chan::CHANCMD, 0x03);
    b.wait(|r| r.read32(c + chan::CHANERR) != 0);
    assert_eq!(b.m.registers().read32(c + chan::CHANERR), chanerr::CHANCMD);
    // Write-1-to-clear, and reset recovers.
    let r = b.m.registers();
    b.write(32, c + chan::CHANERR, chanerr::CHANCMD.into());
    assert_eq!(r.read32(c + chan::CHANERR), 0);
    b.write(8, c + chan::CHANCMD, chancmd::RESET.into());
    b.wait(|r| chansts::state(r.read64(c + chan::CHANSTS)) == chansts::IDLE);
}

#[test]
fn the_model_suspends_resumes_and_reports_its_registers() {
    use crate::env::vfio::Registers;
    let b = Bench::new();
    let r = b.m.registers();
    let c = spec::channel_base(0);
    assert_eq!(r.read8(spec::CHANCNT), 1);
    assert_eq!(r.read8(spec::CBVER), 0x33);
    assert_eq!(r.read8(spec::XFERCAP), 16);
    assert_ne!(r.read32(spec::DMACAPABILITY) & spec::dmacap::BFILL, 0);
    // 64-bit registers read as 32-bit halves too.
    b.write(64, c + chan::CHAINADDR, 0x1234_5678_9abc_de00);
    assert_eq!(r.read32(c + chan::CHAINADDR), 0x9abc_de00);
    assert_eq!(r.read32(c + chan::CHAINADDR + 4), 0x1234_5678);
    b.write(64, c + chan::CHAINADDR, b.iova(0));
    b.write(8, c + chan::CHANCMD, chancmd::SUSPEND.into());
    b.wait(|r| chansts::state(r.read64(c + chan::CHANSTS)) == chansts::SUSPENDED);
    b.put(
        0,
        64,
        control::with_op(op::COPY, 0),
        b.iova(8192),
        b.iova(16384),
        b.iova(64),
    );
    b.write(16, c + chan::DMACOUNT, 1);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(b.m.counters().descriptors, 0, "suspended: nothing runs");
    b.write(8, c + chan::CHANCMD, chancmd::RESUME.into());
    b.wait(|r| chansts::addr(r.read64(c + chan::CHANSTS)) == b.iova(0));
    assert_eq!(b.m.counters().descriptors, 1);
    let n = b.m.counters();
    assert!(n.reads > 0 && n.writes > 0 && n.doorbells == 1, "{n:?}");
}

#[test]
fn model_threads_stop_when_dropped() {
    // A model on its own: dropping it ends its device thread.
    let m = IoatModel::new(ModelConfig::default());
    let h = m.handle();
    assert!(h.thread_running(), "{}", h.name());
    drop(m);
    assert!(
        !h.thread_running(),
        "{}: the device thread still runs",
        h.name()
    );
    // A module's channels stop their models when the module goes, the one
    // a thread took and gave back as well as the one never taken.
    let map = Arc::new(IovaMap::new());
    let ms: Vec<IoatModel> = (0..2)
        .map(|_| IoatModel::with_map(ModelConfig::default(), map.clone()))
        .collect();
    let handles: Vec<ModelHandle> = ms.iter().map(|m| m.handle()).collect();
    let ioat = Arc::new(started(IoatDevices::new(
        ms.into_iter().map(model_hardware).collect(),
        &DriverConfig::default(),
        Arc::new(IdentityMapper(map)),
        Vec::new(),
    )));
    assert_eq!(ioat.channels(), 2, "{:?}", ioat.notes());
    let accel = accel_of(&ioat);
    drop(accel.channel());
    drop(accel);
    assert_eq!(ioat.free_channels(), 2);
    assert!(handles.iter().all(ModelHandle::thread_running));
    drop(ioat);
    for h in &handles {
        assert!(
            !h.thread_running(),
            "{}: the device thread still runs",
            h.name()
        );
    }
}

// ---------------------------------------------------------------------------
// The seams' memory: the IOVA map, mapped memory, DMA buffers
// ---------------------------------------------------------------------------

#[test]
fn the_map_finds_windows_both_ways() {
    let m = IovaMap::new();
    assert!(m.is_empty());
    let g0 = m.generation();
    // SAFETY: no device translates through this map: the windows are only
    // looked up.
    unsafe {
        m.insert(Window {
            va: 0x10_0000,
            len: 0x1000,
            iova: 0x9000_0000,
        });
        m.insert(Window {
            va: 0x20_0000,
            len: 0x2000,
            iova: 0x20_0000,
        });
    }
    assert!(m.generation() > g0);
    assert_eq!(m.len(), 2);
    assert_eq!(m.by_va(0x10_0fff).map(|w| w.iova), Some(0x9000_0000));
    assert_eq!(m.by_va(0x10_1000), None);
    assert_eq!(m.by_va(0xf_ffff), None);
    assert_eq!(m.resolve(0x9000_0010, 0x10), Some(0x10_0010 as *mut u8));
    assert_eq!(m.resolve(0x9000_0ff0, 0x11), None, "crosses the end");
    assert_eq!(m.resolve(0x20_1000, 0x1000), Some(0x20_1000 as *mut u8));
    assert_eq!(m.resolve(0x1, 1), None);
    m.remove(0x10_0000, 0x1000);
    assert_eq!(m.by_va(0x10_0000), None);
    assert_eq!(m.resolve(0x9000_0000, 1), None);
    assert_eq!(m.len(), 1);
}

#[test]
fn mapped_memory_allocates_visible_buffers() {
    let map = Arc::new(IovaMap::new());
    let _h = register_mapper(Arc::new(IdentityMapper(map.clone())));
    let mem = MappedMemory::new(map.clone());
    let b = mem.alloc(4096).unwrap();
    assert_eq!(b.iova(), b.as_ptr() as u64);
    assert!(b.len() >= 4096);
    b.write_u64(8, 0x1122_3344_5566_7788);
    assert_eq!(b.read_u64(8), 0x1122_3344_5566_7788);
    assert_eq!(b.read_u32(8), 0x5566_7788);
    b.store_u64(16, 7);
    assert_eq!(b.load_u64(16), 7);
    let w = mem.window(b.as_ptr() as usize + 100).unwrap();
    assert!(w.contains(b.as_ptr() as usize));
    let g = mem.generation();
    let addr = b.as_ptr() as usize;
    drop(b);
    assert!(mem.generation() > g);
    assert_eq!(mem.window(addr), None, "a dropped region is unmapped");
    // Memory that is not a DMA region is not device-visible.
    let v = [0u8; 64];
    assert_eq!(mem.window(v.as_ptr() as usize), None);
}

#[test]
#[should_panic(expected = "DMA buffer access")]
fn out_of_bounds_access_panics() {
    let map = Arc::new(IovaMap::new());
    let _h = register_mapper(Arc::new(IdentityMapper(map.clone())));
    let b = MappedMemory::new(map).alloc(64).unwrap();
    b.read_u64(b.len());
}

#[test]
fn a_build_without_the_model_refuses_ioat_model_naming_the_feature() {
    use super::devices::MODEL_NOT_BUILT;
    use crate::accel::model_count;
    let model_channels = |s, built_in| model_count(s, built_in, MODEL_NOT_BUILT);
    assert_eq!(model_channels("2", true), Ok(2));
    assert_eq!(model_channels("0", false), Ok(0), "the default stays valid");
    let e = model_channels("2", false).unwrap_err();
    assert!(
        e.contains("--ioat-model") && e.contains("`ioat-model` cargo feature"),
        "{e}"
    );
    assert!(model_channels("x", true).is_err());
}
