//! Offloaded IO outlives whoever drops it: a bdev channel that goes away
//! with copies in flight on the I/OAT model (its poller removed after a
//! completion handler panicked) gives none of their buffers back before
//! the device has finished with them.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::task::Waker;
use std::time::{Duration, Instant};

use super::{DriverConfig, ModelConfig, accel_of, one};
use crate::accel::AccelChannel;
use crate::bdev::{BdevRegistry, IoCompletion, IoDone, IoPoolConfig, IoRequest, IoType};
use crate::env::cores::{CoreSet, allowed_cpus};
use crate::pool::{BufPool, IoBuf, PoolConfig};
use crate::reactor::{PollMode, Reactors};

/// Reads in flight when the channel goes.
const READS: usize = 8;
const BLOCK: usize = 4096;
/// What the device holds at the blocks read.
const DATA: u8 = 0x5a;
/// What the buffers hold once handed out again.
const CANARY: u8 = 0xc3;
/// Bound on every wait (a hung test fails instead of hanging).
const PATIENCE: Duration = Duration::from_secs(60);

thread_local! {
    /// The reactor's accel channel, held as the reactor's other users (an
    /// export, other devices) hold it, so that it outlives the bdev channel.
    static KEEP: RefCell<Option<Rc<AccelChannel>>> = const { RefCell::new(None) };
}

/// Counts completions and wakes whoever waits for them.
#[derive(Default)]
struct Count {
    n: Cell<usize>,
    waker: RefCell<Option<Waker>>,
}

impl IoCompletion for Count {
    fn complete(self: Rc<Self>, io: IoDone) {
        drop(io);
        self.n.set(self.n.get() + 1);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }
}

impl Count {
    async fn reach(&self, n: usize) {
        std::future::poll_fn(|cx| {
            if self.n.get() >= n {
                std::task::Poll::Ready(())
            } else {
                *self.waker.borrow_mut() = Some(cx.waker().clone());
                std::task::Poll::Pending
            }
        })
        .await
    }
}

/// A handler that says it ran, then panics.
struct Panics(Arc<AtomicBool>);

impl IoCompletion for Panics {
    fn complete(self: Rc<Self>, _io: IoDone) {
        self.0.store(true, Ordering::Release);
        panic!("a completion handler panics (on purpose, in a test)");
    }
}

/// A handler that counts its calls (the drain calls none).
struct Calls(Arc<AtomicUsize>);

impl IoCompletion for Calls {
    fn complete(self: Rc<Self>, _io: IoDone) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_panicking_handler_drops_the_channel_but_no_buffer_is_reused_before_the_device_is_done() {
    // The driver never gives up on the stalled copies: only the device
    // (released below) finishes them.
    let patient = DriverConfig {
        timeout: PATIENCE * 1000,
        ..DriverConfig::default()
    };
    let (ioat, h) = one(ModelConfig::default(), patient);
    let accel = accel_of(&ioat);
    // One IO object per read and one for the flush; no per-core cache, so
    // whoever takes them next gets exactly these.
    let pool = IoPoolConfig {
        size: READS + 1,
        cache: 0,
        cores: 1,
    };
    let registry = Arc::new(BdevRegistry::with_accel(pool, accel.clone()).unwrap());
    let name = registry
        .create("malloc:///lifetimes?size_mb=1&blk_size=4096")
        .unwrap()
        .name;
    let bufs = Arc::new(
        BufPool::new(PoolConfig::new("lifetimes", READS, 1).cache_size(0), BLOCK).unwrap(),
    );
    let cpu = allowed_cpus().unwrap().iter().next().unwrap();
    let reactors =
        Reactors::start(&CoreSet::from_cpus([cpu]).unwrap(), PollMode::ADAPTIVE).unwrap();

    // The device's blocks hold DATA.
    let desc = registry.open(&name).unwrap();
    let b = bufs.clone();
    reactors
        .spawn_on(0, move || async move {
            KEEP.with(|k| *k.borrow_mut() = Some(accel.channel()));
            let ch = desc.open_channel().unwrap();
            for i in 0..READS {
                let mut buf = b.get().unwrap();
                buf.as_mut_slice().fill(DATA);
                let w = IoRequest::write(buf, (i * BLOCK) as u64, BLOCK as u64);
                assert_eq!(ch.io(w).await.unwrap().status(), Ok(()));
            }
        })
        .wait()
        .unwrap();

    // The device holds its descriptors: the reads stay in flight.
    h.faults().stall();
    let before = h.counters().descriptors;
    let panicked = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let desc = registry.open(&name).unwrap();
    let (b, p, c) = (bufs.clone(), panicked.clone(), calls.clone());
    reactors
        .run_on(0, move || {
            let ch = desc.open_channel().unwrap();
            for i in 0..READS {
                let mut buf = b.get().unwrap();
                buf.as_mut_slice().fill(0);
                let r = IoRequest::read(buf, (i * BLOCK) as u64, BLOCK as u64);
                ch.submit(r, Rc::new(Calls(c.clone()))).unwrap();
            }
            // Completes without the device, in the same poll that hands
            // the reads over; its handler panics, and the reactor removes
            // the channel's poller.
            let flush = IoRequest::no_data(IoType::Flush, 0, 0);
            ch.submit(flush, Rc::new(Panics(p))).unwrap();
            // Closed: the poller was all that kept the channel.
        })
        .wait()
        .unwrap();
    wait_for("the handler's panic", || panicked.load(Ordering::Acquire));

    // Take every IO object and every buffer again and mark the buffers.
    // Where the IOs are still held, nothing can be had before the device
    // is released; where they were let go, it all comes back at once, and
    // the canary goes in while the device still holds the copies.
    let (tx, rx) = mpsc::channel();
    let desc = registry.open(&name).unwrap();
    let b = bufs.clone();
    let marked = reactors.spawn_on(0, move || async move {
        let ch = desc.open_channel().unwrap();
        let count = Rc::new(Count::default());
        for _ in 0..READS + 1 {
            let flush = IoRequest::no_data(IoType::Flush, 0, 0);
            ch.submit(flush, count.clone()).unwrap();
        }
        tx.send(ch.waiting()).unwrap();
        // A flush drops the buffer its IO object still held; IOs finished
        // by a drain give theirs back themselves.
        count.reach(READS + 1).await;
        let end = Instant::now() + PATIENCE;
        while b.pool().in_use() > 0 {
            assert!(Instant::now() < end, "the read buffers never came back");
            crate::reactor::yield_now().await;
        }
        let mut got: Vec<IoBuf> = (0..READS).map(|_| b.get().unwrap()).collect();
        for buf in &mut got {
            buf.as_mut_slice().fill(CANARY);
        }
        got
    });
    let waiting = rx.recv_timeout(PATIENCE).unwrap();
    let marked = if waiting > 0 {
        h.faults().clear();
        marked.wait().unwrap()
    } else {
        let m = marked.wait().unwrap();
        h.faults().clear();
        m
    };
    wait_for("the device to finish the reads", || {
        h.counters().descriptors >= before + READS as u64
    });
    for (k, buf) in marked.iter().enumerate() {
        let bad = buf.as_slice().iter().filter(|&&x| x != CANARY).count();
        assert_eq!(
            bad, 0,
            "buffer {k}: the device wrote {bad} bytes of it after it was handed out again"
        );
    }
    assert_eq!(
        calls.load(Ordering::Relaxed),
        0,
        "a drained IO's handler ran"
    );
    drop(marked);
    reactors
        .run_on(0, || KEEP.with(|k| k.borrow_mut().take()).is_some())
        .wait()
        .unwrap();
    reactors.stop();
    assert_eq!(registry.io_stats(&name).unwrap().in_flight, 0);
    assert_eq!(registry.io_pool_stats().in_use, 0, "IO objects leaked");
    assert_eq!(ioat.free_channels(), 1, "the drained channel went back");
}
