//! Tests of bring-up and restart against the model's configuration space,
//! power-on states and bring-up quirks: CHANERR_INT, relaxed ordering,
//! 32-bit halves for CHAINADDR and CHANCMP, CHANCNT, a channel that ignores
//! SUSPEND or does not report the null descriptor's address, and no request
//! reported while the device may still write its buffers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::driver::{Channel, DriverConfig, StartError};
use super::super::model::{IoatModel, ModelConfig, ModelHandle, PowerOn};
use super::super::model_hardware;
use super::super::spec::{self, chan, chancmd, chanerr};
use super::{accel_of, batch_results, cfg, mapped, one};
use crate::accel::conformance::Arena;
use crate::accel::{Completion, HardwarePool, Opcode, Status, Task, TaskId};
use crate::env::dma::{DmaRegion, HugepagePolicy, register_mapper};
use crate::env::vfio::{PciConfig, Registers, find_capability};

/// Driver settings that give up on a bring-up step soon (the old code's
/// failures end quickly) but not before a loaded machine's model thread
/// gets a CPU.
fn quick() -> DriverConfig {
    DriverConfig {
        start_timeout: Duration::from_millis(300),
        ..cfg(64)
    }
}

/// A channel on a model with `mc`, and a handle on the model.
fn start(mc: ModelConfig) -> (Result<Channel, StartError>, ModelHandle) {
    let m = IoatModel::new(mc);
    let h = m.handle();
    h.record(true);
    (Channel::start(mapped(m), quick()), h)
}

/// One channel in a module on a model with `mc`: five copies succeed with
/// their data.
fn serves(mc: ModelConfig) {
    let (ioat, _h) = one(mc, cfg(64));
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    let arena = Arena::new(1 << 20);
    let res = batch_results(&ch, &arena, 5, 4096);
    assert!(
        res.iter().all(|(c, ok)| c.status == Status::Success && *ok),
        "{res:?}"
    );
}

/// A channel comes up on a model with `mc` (`check` looks at the model
/// while it is up), and a module on such a model serves copies.
fn comes_up_and_serves(mc: ModelConfig, check: impl FnOnce(&ModelHandle)) {
    let (ch, h) = start(mc.clone());
    let _ch = ch.unwrap_or_else(|e| panic!("{mc:?}: {e}"));
    check(&h);
    serves(mc);
}

// ---------------------------------------------------------------------------
// Point 2: CHANERR_INT
// ---------------------------------------------------------------------------

#[test]
fn chanerr_int_is_cleared_before_reset_below_3_3_and_on_skx() {
    let halted = PowerOn::Halted(chanerr::SRC_ADDR | chanerr::LENGTH);
    for (cbver, device_id) in [(0x30, 0x0e20), (0x32, 0x6f20), (0x33, spec::DEVICE_ID_SKX)] {
        let (ch, h) = start(ModelConfig {
            cbver,
            device_id,
            power_on: halted,
            ..ModelConfig::default()
        });
        let what = format!("CBVER {cbver:#x}, device {device_id:#06x}");
        let ch = ch.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(h.chanerr_int(), 0, "{what}");
        assert_eq!(ch.chanerr_int(), Some(0), "{what}");
        // Read, written back (write 1 to clear), then the RESET.
        let log = h.log();
        let at = |config: bool, write: bool, off: usize| {
            log.iter()
                .position(|a| a.config == config && a.write == write && a.off == off)
                .unwrap_or_else(|| panic!("{what}: no access at {off:#x} in {log:#?}"))
        };
        let int = spec::CHANERR_INT as usize;
        let reset = spec::channel_base(0) + chan::CHANCMD;
        assert!(at(true, false, int) < at(true, true, int), "{what}");
        assert!(at(true, true, int) < at(false, true, reset), "{what}");
        let w = log.iter().find(|a| a.config && a.write && a.off == int);
        assert_eq!(
            w.unwrap().value,
            (chanerr::SRC_ADDR | chanerr::LENGTH) as u64
        );
    }
    // 3.3 and later (not SKX): no CHANERR_INT, never touched.
    let (ch, h) = start(ModelConfig {
        power_on: halted,
        ..ModelConfig::default()
    });
    assert_eq!(ch.unwrap().chanerr_int(), None);
    assert!(
        !h.log()
            .iter()
            .any(|a| a.config && a.off == spec::CHANERR_INT as usize)
    );
}

#[test]
fn a_halt_on_a_function_with_chanerr_int_recovers() {
    let (ioat, h) = one(
        ModelConfig {
            cbver: 0x32,
            ..ModelConfig::default()
        },
        quick(),
    );
    let accel = accel_of(&ioat);
    let ch = accel.channel();
    let arena = Arena::new(1 << 20);
    for round in 0..3 {
        h.faults().fail_nth(2);
        let res = batch_results(&ch, &arena, 4, 4096);
        let failed = res
            .iter()
            .filter(|(c, _)| c.status == Status::EngineError)
            .count();
        assert_eq!(failed, 1, "round {round}: {res:?}");
        assert!(
            res.iter()
                .all(|(c, ok)| c.status == Status::EngineError || *ok),
            "round {round}: {res:?}"
        );
    }
    assert_eq!(ioat.totals().halts, 3);
    assert_eq!(h.chanerr_int(), 0, "cleared by each restart");
    let res = batch_results(&ch, &arena, 4, 4096);
    assert!(res.iter().all(|(c, ok)| c.status == Status::Success && *ok));
}

#[test]
fn the_model_latches_chanerr_int_and_stays_halted_until_it_is_cleared() {
    let m = IoatModel::new(ModelConfig {
        cbver: 0x32,
        power_on: PowerOn::Halted(chanerr::DEST_ADDR),
        ..ModelConfig::default()
    });
    let (regs, pci) = (m.registers(), m.pci_config());
    let c = spec::channel_base(0);
    let state = || spec::chansts::state(regs.read64(c + chan::CHANSTS));
    let reset = || {
        // SAFETY: RESET starts no DMA (no chain is set).
        unsafe { regs.write8(c + chan::CHANCMD, chancmd::RESET) };
        let t = Instant::now();
        while regs.read8(c + chan::CHANCMD) != 0 {
            assert!(t.elapsed() < Duration::from_secs(5), "reset stuck");
            std::thread::yield_now();
        }
    };
    assert_eq!(pci.read32(spec::CHANERR_INT), chanerr::DEST_ADDR);
    reset();
    assert_eq!(state(), spec::chansts::HALTED, "put back: CHANERR_INT set");
    pci.write32(spec::CHANERR_INT, chanerr::DEST_ADDR);
    assert_eq!(pci.read32(spec::CHANERR_INT), 0, "write 1 to clear");
    reset();
    assert_eq!(state(), spec::chansts::IDLE);
}

// ---------------------------------------------------------------------------
// Point 5: tolerant bring-up
// ---------------------------------------------------------------------------

#[test]
fn a_channel_that_ignores_suspend_is_reset_anyway() {
    let mc = ModelConfig {
        ignore_suspend: true,
        ..ModelConfig::default()
    };
    comes_up_and_serves(mc, |h| assert_eq!(h.counters().resets, 1));
}

#[test]
fn bring_up_takes_the_tail_from_whatever_address_is_reported() {
    let mc = ModelConfig {
        hide_null_address: true,
        ..ModelConfig::default()
    };
    comes_up_and_serves(mc, |h| assert_eq!(h.counters().nulls, 1));
}

#[test]
fn power_on_states_halted_with_chanerr_and_armed_are_handled() {
    for power_on in [
        PowerOn::Halted(chanerr::NEXT_DESC_ADDR),
        PowerOn::Armed,
        PowerOn::Idle,
    ] {
        let (ch, h) = start(ModelConfig {
            power_on,
            ..ModelConfig::default()
        });
        let _ch = ch.unwrap_or_else(|e| panic!("{power_on:?}: {e}"));
        // SUSPEND only for a channel that is ACTIVE or IDLE (SPDK, Linux).
        let suspended = h.log().iter().any(|a| {
            a.write
                && a.off == spec::channel_base(0) + chan::CHANCMD
                && a.value == chancmd::SUSPEND as u64
        });
        assert_eq!(suspended, power_on == PowerOn::Idle, "{power_on:?}");
        serves(ModelConfig {
            power_on,
            cbver: 0x32,
            ..ModelConfig::default()
        });
    }
}

// ---------------------------------------------------------------------------
// Point 6: relaxed ordering, 32-bit halves
// ---------------------------------------------------------------------------

#[test]
fn relaxed_ordering_is_cleared_in_device_control() {
    let m = IoatModel::new(ModelConfig::default());
    let pci = m.pci_config();
    let devctl = find_capability(&pci, spec::PCI_CAP_ID_EXP).unwrap() + spec::PCI_EXP_DEVCTL;
    let before = pci.read16(devctl);
    assert_ne!(before & spec::PCI_EXP_DEVCTL_RELAX_EN, 0, "on at power-on");
    let _ch = Channel::start(mapped(m), quick()).unwrap();
    assert_eq!(
        pci.read16(devctl),
        before & !spec::PCI_EXP_DEVCTL_RELAX_EN,
        "only relaxed ordering cleared"
    );
}

#[test]
fn a_device_whose_relaxed_ordering_will_not_clear_is_refused() {
    let (ch, h) = start(ModelConfig {
        sticky_relaxed_ordering: true,
        ..ModelConfig::default()
    });
    let e = ch.map(|_| ()).unwrap_err();
    let name = h.name();
    match &e {
        StartError::RelaxedOrdering { device, devctl } => {
            assert_eq!(device, &name);
            assert_ne!(devctl & spec::PCI_EXP_DEVCTL_RELAX_EN, 0);
        }
        other => panic!("expected RelaxedOrdering, got {other}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains(&name) && msg.contains("relaxed ordering") && msg.contains("refused"),
        "{msg}"
    );
    // Refused before anything runs: no ring was handed to the device.
    assert!(
        !h.log()
            .iter()
            .any(|a| !a.config && a.write && a.off == spec::channel_base(0) + chan::CHAINADDR),
        "the channel was programmed"
    );
    // A module leaves it out, with the reason in its notes.
    let m = IoatModel::new(ModelConfig {
        sticky_relaxed_ordering: true,
        ..ModelConfig::default()
    });
    let ioat = super::super::Ioat::start(vec![mapped(m)], &quick(), Vec::new());
    assert_eq!(ioat.channels(), 0);
    assert!(
        ioat.notes().iter().any(|n| n.contains("relaxed ordering")),
        "{:?}",
        ioat.notes()
    );
}

#[test]
fn chanerr_int_is_read_back_and_a_value_that_stays_fails_bring_up() {
    let bits = chanerr::SRC_ADDR | chanerr::LENGTH;
    let (ch, h) = start(ModelConfig {
        cbver: 0x32,
        power_on: PowerOn::Halted(bits),
        sticky_chanerr_int: true,
        ..ModelConfig::default()
    });
    let e = ch.map(|_| ()).unwrap_err();
    assert_eq!(
        e,
        StartError::ChanErrIntStuck {
            device: h.name(),
            before: bits,
            after: bits,
        }
    );
    assert!(e.to_string().contains("CHANERR_INT"), "{e}");
    // Read back after the write, and no RESET issued after that.
    let log = h.log();
    let int = spec::CHANERR_INT as usize;
    let write = log
        .iter()
        .position(|a| a.config && a.write && a.off == int)
        .expect("CHANERR_INT written");
    assert!(
        log[write..]
            .iter()
            .any(|a| a.config && !a.write && a.off == int),
        "not read back: {log:#?}"
    );
    let reset = spec::channel_base(0) + chan::CHANCMD;
    assert!(
        !log[write..]
            .iter()
            .any(|a| !a.config && a.write && a.off == reset && a.value == chancmd::RESET as u64),
        "reset anyway"
    );
}

#[test]
fn chainaddr_and_chancmp_are_written_as_32_bit_halves() {
    let mc = ModelConfig {
        split_chain_writes: true,
        ..ModelConfig::default()
    };
    comes_up_and_serves(mc, |h| assert_eq!(h.counters().rejected_writes, 0));
    // The model's side: a 64-bit write there is counted and ignored.
    let m = IoatModel::new(ModelConfig {
        split_chain_writes: true,
        ..ModelConfig::default()
    });
    let r = m.registers();
    let c = spec::channel_base(0);
    // SAFETY: no DMACOUNT write follows: the addresses are never used.
    unsafe {
        r.write64(c + chan::CHAINADDR, 0x1234_5000);
        r.write64(c + chan::CHANCMP, 0x1234_6000);
    }
    assert_eq!(m.counters().rejected_writes, 2);
    assert_eq!(r.read64(c + chan::CHAINADDR), 0);
    // SAFETY: as above.
    unsafe {
        r.write32(c + chan::CHAINADDR, 0x1234_5000);
        r.write32(c + chan::CHAINADDR + 4, 0x7f);
    }
    assert_eq!(r.read64(c + chan::CHAINADDR), 0x7f_1234_5000);
}

// ---------------------------------------------------------------------------
// Point 8: CHANCNT
// ---------------------------------------------------------------------------

#[test]
fn a_function_with_chancnt_0_is_refused() {
    let (ch, _h) = start(ModelConfig {
        chancnt: 0xe0,
        ..ModelConfig::default()
    });
    let e = ch.map(|_| ()).unwrap_err();
    assert_eq!(e, StartError::NoChannel);
    assert!(e.to_string().contains("CHANCNT is 0"), "{e}");
}

// ---------------------------------------------------------------------------
// Point 7 (and 6's restart): nothing reported before DMA is stopped
// ---------------------------------------------------------------------------

/// A channel on a model with `mc` whose mapper the caller's registration
/// keeps, `n` 4 KiB copies stalled in its ring, and the model told that a
/// RESET never completes; then `config_stuck` decides whether its DMA can
/// be stopped through configuration space.
struct Stuck {
    ch: Option<Channel>,
    h: ModelHandle,
    ring: u64,
    _bufs: DmaRegion,
    map: Arc<crate::env::dma::IovaMap>,
    _mapping: crate::env::dma::MapperRegistration,
}

impl Stuck {
    fn new(mc: ModelConfig, n: usize, config_stuck: bool) -> Stuck {
        let m = IoatModel::new(mc);
        let h = m.handle();
        let map = m.map().clone();
        let regs = m.registers();
        let _mapping = register_mapper(m.mapper());
        let mut ch = Channel::start(
            model_hardware(m),
            DriverConfig {
                timeout: Duration::from_millis(30),
                stall_check: Duration::from_micros(10),
                ..quick()
            },
        )
        .unwrap();
        let ring = regs.read64(spec::channel_base(0) + chan::CHAINADDR);
        let bufs = DmaRegion::alloc_with(2 << 20, HugepagePolicy::Never).unwrap();
        h.faults().stall();
        h.faults().never_reset();
        if config_stuck {
            h.faults().config_stuck();
        }
        let tasks: Vec<Task> = (0..n)
            .map(|i| {
                let mut t = Task::empty();
                t.op = Opcode::Copy;
                t.len = 4096;
                // SAFETY: inside the 2 MiB region, which outlives the
                // channel (declared after it in `Stuck`).
                unsafe {
                    t.src = bufs.as_ptr().add(i * 8192);
                    t.dst = bufs.as_ptr().add(i * 8192 + 4096);
                }
                t
            })
            .collect();
        let mut done = Vec::new();
        ch.submit(&tasks, 0, &mut done);
        assert!(done.is_empty(), "{done:?}");
        Stuck {
            ch: Some(ch),
            h,
            ring,
            _bufs: bufs,
            map,
            _mapping,
        }
    }

    fn ch(&mut self) -> &mut Channel {
        self.ch.as_mut().unwrap()
    }

    /// Polls until the channel is broken (its restart failed).
    fn poll_until_broken(&mut self) -> Vec<(TaskId, Completion, bool)> {
        let t = Instant::now();
        let mut seen = Vec::new();
        while self.ch().broken().is_none() {
            assert!(t.elapsed() < Duration::from_secs(10), "never gave up");
            let mut done = Vec::new();
            self.ch().poll(&mut done);
            // What the device could do at the moment each was reported.
            let dma = self.h.bus_master() && self.h.counters().function_resets == 0;
            seen.extend(done.into_iter().map(|(id, c)| (id, c, dma)));
        }
        seen
    }
}

#[test]
fn requests_are_reported_only_once_dma_is_stopped_when_the_reset_never_completes() {
    // Without a function-level reset, bus mastering goes off instead.
    let mut s = Stuck::new(
        ModelConfig {
            function_reset: false,
            ..ModelConfig::default()
        },
        3,
        false,
    );
    let seen = s.poll_until_broken();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for (id, c, dma) in &seen {
        assert_eq!(c.status, Status::EngineError, "task {id}");
        assert!(!dma, "task {id} reported with bus mastering on");
    }
    assert!(!s.h.bus_master());
    assert_eq!(s.h.counters().function_resets, 0);
    // With one, the function is reset.
    let mut s = Stuck::new(ModelConfig::default(), 4, false);
    let seen = s.poll_until_broken();
    assert_eq!(seen.len(), 4, "{seen:?}");
    for (id, c, dma) in &seen {
        assert_eq!(c.status, Status::EngineError, "task {id}");
        assert!(
            !dma,
            "task {id} reported while the device could still write"
        );
    }
    assert_eq!(s.h.counters().function_resets, 1);
    assert_eq!(s.ch().in_flight(), 0);
    // Later requests fail at once; the ring memory is freed at drop (the
    // device is stopped).
    let mut done = Vec::new();
    let mut t = Task::empty();
    t.op = Opcode::Copy;
    s.ch().submit(&[t], 9, &mut done);
    assert_eq!(done, vec![(9, Completion::with(Status::EngineError))]);
    s.ch = None;
    assert!(s.map.by_va(s.ring as usize).is_none(), "ring freed");
}

#[test]
fn with_config_space_stuck_too_nothing_is_reported_and_nothing_freed() {
    let mut s = Stuck::new(ModelConfig::default(), 4, true);
    let seen = s.poll_until_broken();
    assert!(seen.is_empty(), "{seen:?}");
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(50) {
        let mut done = Vec::new();
        assert_eq!(s.ch().poll(&mut done), 0, "{done:?}");
    }
    assert_eq!(s.ch().in_flight(), 4, "kept, never reported");
    assert!(s.h.bus_master());
    assert!(s.ch().broken().unwrap().contains("never reported"));
    // As a module channel it is stuck: a drain, even with an hour to go,
    // gives up at once and leaves the 4 requests held. Dropped, the device
    // could not be stopped, so the ring stays allocated (still mapped).
    let pool = HardwarePool::new(vec![s.ch.take().unwrap()], &mut Vec::new());
    let mut ch = pool.take().unwrap();
    assert!(ch.stuck());
    let mut done = Vec::new();
    let hour = Instant::now() + Duration::from_secs(3600);
    assert_eq!(ch.drain(&mut done, hour), 4, "{done:?}");
    assert!(done.is_empty(), "{done:?}");
    drop(ch);
    assert_eq!(pool.free(), 0, "not reused");
    assert!(s.map.by_va(s.ring as usize).is_some(), "ring leaked");
}
