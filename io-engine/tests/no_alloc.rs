//! The data path does not allocate: once a workload runs, millions of IOs
//! through the channel, the IO pool, the reactor and the null and malloc
//! devices cause no heap allocation. A counting global allocator sees every
//! allocation of the process; the measuring thread only sleeps.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use io_engine::bdev::{
    BdevRegistry, IoChannel, IoCompletion, IoDone, IoPoolConfig, IoRequest, IoType,
};
use io_engine::env::cores::allowed_cpus;
use io_engine::pool::{BufPool, IoBuf, PoolConfig};
use io_engine::reactor::{PollMode, Reactors};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Keeps `qd` IOs in flight, resubmitting from the completion, until told to stop.
struct Loop {
    ch: IoChannel,
    op: IoType,
    blocks: u64,
    n: Cell<u64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    done: Arc<AtomicU64>,
}

impl Loop {
    fn next(self: Rc<Self>, buf: IoBuf) {
        let n = self.n.get() + 1;
        self.n.set(n);
        let off = (n.wrapping_mul(0x9e37_79b9) % self.blocks) * 4096;
        let req = IoRequest {
            op: self.op,
            offset: off,
            len: 4096,
            buf: Some(buf),
            src: 0,
            tag: 0,
            fua: false,
        };
        self.ch.submit(req, self.clone()).unwrap();
    }
}

impl IoCompletion for Loop {
    fn complete(self: Rc<Self>, mut io: IoDone) {
        assert!(io.status().is_ok());
        let buf = io.take_buf().unwrap();
        drop(io);
        self.done.fetch_add(1, Ordering::Relaxed);
        if !self.stop.load(Ordering::Relaxed) {
            self.next(buf);
        }
    }
}

#[test]
fn steady_state_io_allocates_nothing() {
    let cores = allowed_cpus().unwrap();
    let reactors = Reactors::start(&cores, PollMode::Busy).unwrap();
    let registry = BdevRegistry::new(IoPoolConfig::new(reactors.len())).unwrap();
    registry
        .create("null:///n0?size_mb=64&blk_size=4096")
        .unwrap();
    registry
        .create("malloc:///m0?size_mb=64&blk_size=4096")
        .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut keep = Vec::new();
    for core in 0..reactors.len() {
        for (dev, op) in [
            ("n0", IoType::Read),
            ("m0", IoType::Read),
            ("m0", IoType::Write),
        ] {
            let desc = registry.open(dev).unwrap();
            let bufs =
                Arc::new(BufPool::new(PoolConfig::new("bufs", 32, 1).cache_size(0), 4096).unwrap());
            let (stop, done, b) = (stop.clone(), done.clone(), bufs.clone());
            reactors
                .run_on(core, move || {
                    let l = Rc::new(Loop {
                        ch: desc.open_channel().unwrap(),
                        op,
                        blocks: 64 * 256,
                        n: Cell::new(core as u64 * 1_000_003),
                        stop,
                        done,
                    });
                    for _ in 0..32 {
                        l.clone().next(b.get().unwrap());
                    }
                })
                .wait()
                .unwrap();
            keep.push(bufs);
        }
    }
    std::thread::sleep(Duration::from_millis(300)); // warm up: first-use allocations
    let (a0, d0) = (ALLOCS.load(Ordering::SeqCst), done.load(Ordering::SeqCst));
    std::thread::sleep(Duration::from_millis(1000));
    let (a1, d1) = (ALLOCS.load(Ordering::SeqCst), done.load(Ordering::SeqCst));
    stop.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(50));
    let ios = d1 - d0;
    assert!(ios > 100_000, "only {ios} IOs completed in the window");
    assert_eq!(a1 - a0, 0, "{} allocations during {ios} IOs", a1 - a0);
    assert_eq!(registry.io_pool_stats().in_use, 0);
    reactors.stop();
}
