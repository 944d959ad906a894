//! The block-device conformance suite: written once, run over every device
//! type and block size, on real reactors.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use super::*;
use crate::env::cores::CoreSet;
use crate::pool::{BufPool, IoBuf, PoolConfig};
use crate::reactor::{PollMode, Reactors};

/// Every device type and block size, a malloc device larger than the
/// last-level cache (whose writes are placed in memory, streamed), and
/// `uring` and `aio` devices on new files.
fn devices() -> Vec<String> {
    let past_llc = crate::env::cache::last_level_bytes().div_ceil(1 << 20) + 1;
    let mut d: Vec<String> = [
        "null:///d?size_mb=4&blk_size=512",
        "null:///d?size_mb=4&blk_size=4096",
        "malloc:///d?size_mb=4&blk_size=512",
        "malloc:///d?size_mb=4&blk_size=4096",
    ]
    .map(String::from)
    .into();
    d.push(format!("malloc:///d?size_mb={past_llc}&blk_size=512"));
    for kind in ["uring", "aio"] {
        for bs in [512, 4096] {
            d.push(format!(
                "{kind}://{}?size_mb=4&blk_size={bs}&name=d",
                scratch_file().display()
            ));
        }
    }
    d
}

/// A path for a new backing file, on the disk the temporary directory is
/// on (a file system with O_DIRECT; not tmpfs).
pub(super) fn scratch_file() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!("io-engine-bdev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("backing-{}", N.fetch_add(1, Ordering::Relaxed)))
}

struct Fixture {
    reactors: Reactors,
    registry: Arc<BdevRegistry>,
}

fn fixture(pool: IoPoolConfig) -> Fixture {
    let cores = crate::env::cores::allowed_cpus().unwrap();
    let cores = CoreSet::from_cpus(cores.iter().take(2)).unwrap();
    let reactors = Reactors::start(&cores, PollMode::ADAPTIVE).unwrap();
    let registry = Arc::new(BdevRegistry::new(pool).unwrap());
    Fixture { reactors, registry }
}

fn default_fixture() -> Fixture {
    fixture(IoPoolConfig {
        size: 4096,
        cache: 64,
        cores: 2,
    })
}

fn bufs(n: usize, size: usize) -> BufPool {
    BufPool::new(PoolConfig::new("test-bufs", n, 2).cache_size(0), size).unwrap()
}

/// Runs `f(channel, buffers)` as a task on reactor `core` and returns its output.
fn on_core<R, F, Fut>(fx: &Fixture, core: usize, name: &str, f: F) -> R
where
    R: Send + 'static,
    F: FnOnce(IoChannel, Arc<BufPool>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = R> + 'static,
{
    let desc = fx.registry.open(name).unwrap();
    let pool = Arc::new(bufs(64, 65536));
    fx.reactors
        .spawn_on(core, move || {
            let ch = desc.open_channel().unwrap();
            f(ch, pool)
        })
        .wait()
        .unwrap()
}

fn filled(pool: &BufPool, byte: u8) -> IoBuf {
    let mut b = pool.get().unwrap();
    b.as_mut_slice().fill(byte);
    b
}

fn for_each_device(test: impl Fn(&Fixture, &str, bool, u64)) {
    for uri in devices() {
        let fx = default_fixture();
        let info = fx.registry.create(&uri).unwrap();
        let stores = fx.registry.open(&info.name).unwrap().bdev().stores_data();
        test(&fx, &info.name, stores, info.block_size as u64);
        assert_eq!(
            fx.registry.io_stats(&info.name).unwrap().in_flight,
            0,
            "{uri}"
        );
        assert_eq!(
            fx.registry.io_pool_stats().in_use,
            0,
            "{uri}: IO objects leaked"
        );
        if let Some(path) = fx
            .registry
            .open(&info.name)
            .unwrap()
            .bdev()
            .backing()
            .map(|b| b.0.to_path_buf())
        {
            std::fs::remove_file(path).unwrap();
        }
    }
}

#[test]
fn read_after_write() {
    for_each_device(|fx, name, stores, bs| {
        on_core(fx, 0, name, move |ch, bufs| async move {
            let len = 4 * bs;
            let w = ch
                .io(IoRequest::write(filled(&bufs, 0xa5), bs, len))
                .await
                .unwrap();
            assert_eq!(w.status(), Ok(()));
            let mut r = ch
                .io(IoRequest::read(filled(&bufs, 0x11), bs, len))
                .await
                .unwrap();
            assert_eq!(r.status(), Ok(()));
            let data = r.take_buf().unwrap();
            let expect = if stores { 0xa5 } else { 0x11 }; // null leaves the buffer as it was
            assert!(data.as_slice()[..len as usize].iter().all(|&b| b == expect));
            // The blocks around the write are untouched (zero on malloc).
            let mut before = ch
                .io(IoRequest::read(filled(&bufs, 0x22), 0, bs))
                .await
                .unwrap();
            let expect = if stores { 0 } else { 0x22 };
            assert!(
                before.take_buf().unwrap().as_slice()[..bs as usize]
                    .iter()
                    .all(|&b| b == expect)
            );
        });
    });
}

#[test]
fn write_zeroes_and_unmap_zero_the_range() {
    for_each_device(|fx, name, stores, bs| {
        on_core(fx, 0, name, move |ch, bufs| async move {
            for op in [IoType::WriteZeroes, IoType::Unmap] {
                ch.io(IoRequest::write(filled(&bufs, 0xff), 0, 8 * bs))
                    .await
                    .unwrap();
                let z = ch.io(IoRequest::no_data(op, 2 * bs, 3 * bs)).await.unwrap();
                assert_eq!(z.status(), Ok(()));
                let mut r = ch
                    .io(IoRequest::read(filled(&bufs, 0x33), 0, 8 * bs))
                    .await
                    .unwrap();
                let data = r.take_buf().unwrap();
                let data = &data.as_slice()[..8 * bs as usize];
                if stores {
                    let b = bs as usize;
                    assert!(data[..2 * b].iter().all(|&x| x == 0xff), "{op}: before");
                    assert!(
                        data[2 * b..5 * b].iter().all(|&x| x == 0),
                        "{op}: range not zeroed"
                    );
                    assert!(data[5 * b..].iter().all(|&x| x == 0xff), "{op}: after");
                } else {
                    assert!(data.iter().all(|&x| x == 0x33));
                }
            }
            let f = ch
                .io(IoRequest::no_data(IoType::Flush, 0, 0))
                .await
                .unwrap();
            assert_eq!(f.status(), Ok(()));
        });
    });
}

#[test]
fn bounds_and_alignment_are_refused_with_the_buffer_handed_back() {
    for_each_device(|fx, name, _, bs| {
        let size = fx.registry.get(name).unwrap().size_bytes;
        on_core(fx, 1, name, move |ch, bufs| async move {
            let check = |req: IoRequest, want: fn(&IoError) -> bool| {
                let had_buf = req.buf.is_some();
                let err = ch.io(req);
                async move {
                    let e = err.await.unwrap_err();
                    assert!(want(&e.error), "unexpected {:?}", e.error);
                    assert_eq!(e.request.buf.is_some(), had_buf, "buffer not handed back");
                }
            };
            check(IoRequest::read(filled(&bufs, 0), 1, bs), |e| {
                matches!(e, IoError::Unaligned { .. })
            })
            .await;
            check(IoRequest::write(filled(&bufs, 0), bs, bs + 1), |e| {
                matches!(e, IoError::Unaligned { .. })
            })
            .await;
            check(IoRequest::read(filled(&bufs, 0), size, bs), |e| {
                matches!(e, IoError::OutOfRange { .. })
            })
            .await;
            check(IoRequest::write(filled(&bufs, 0), size - bs, 2 * bs), |e| {
                matches!(e, IoError::OutOfRange { .. })
            })
            .await;
            check(
                IoRequest::no_data(IoType::Unmap, u64::MAX - bs + 1, bs),
                |e| matches!(e, IoError::OutOfRange { .. }),
            )
            .await;
            check(IoRequest::read(filled(&bufs, 0), 0, 0), |e| {
                matches!(e, IoError::Empty(IoType::Read))
            })
            .await;
            check(IoRequest::no_data(IoType::WriteZeroes, 0, 0), |e| {
                matches!(e, IoError::Empty(_))
            })
            .await;
            check(IoRequest::no_data(IoType::Read, 0, bs), |e| {
                matches!(e, IoError::Buffer { have: 0, .. })
            })
            .await;
            check(IoRequest::read(filled(&bufs, 0), 0, 2 * 65536), |e| {
                matches!(e, IoError::Buffer { have: 65536, .. })
            })
            .await;
            assert_eq!(ch.in_flight(), 0);
        });
        // Refused requests are not counted as IO.
        let st = fx.registry.io_stats(name).unwrap();
        assert!(
            IoType::ALL
                .iter()
                .all(|&op| st.op(op).ops == 0 && st.op(op).errors == 0)
        );
    });
}

/// Submits `n` reads or writes at once from one handler and counts completions.
struct Burst {
    done: RefCell<Vec<(u64, Result<(), IoError>)>>,
}

impl IoCompletion for Burst {
    fn complete(self: Rc<Self>, mut io: IoDone) {
        let _ = io.take_buf();
        self.done.borrow_mut().push((io.tag(), io.status()));
    }
}

async fn burst(ch: &IoChannel, n: u64, bs: u64) -> Vec<(u64, Result<(), IoError>)> {
    let b = Rc::new(Burst {
        done: RefCell::new(Vec::new()),
    });
    let blocks = 4 * 1024 * 1024 / bs;
    for i in 0..n {
        let req = if i % 2 == 0 {
            IoRequest::no_data(IoType::WriteZeroes, (i % blocks) * bs, bs)
        } else {
            IoRequest::no_data(IoType::Unmap, (i % blocks) * bs, bs)
        };
        ch.submit(req.tag(i), b.clone()).unwrap();
    }
    while b.done.borrow().len() < n as usize {
        crate::reactor::yield_now().await;
    }
    let mut done = b.done.take();
    done.sort_by_key(|d| d.0);
    assert_eq!(done.len() as u64, n);
    done
}

#[test]
fn many_concurrent_ios_all_complete_once() {
    for_each_device(|fx, name, _, bs| {
        let done = on_core(fx, 0, name, move |ch, _| async move {
            burst(&ch, 2000, bs).await
        });
        for (i, (tag, status)) in done.iter().enumerate() {
            assert_eq!(*tag, i as u64);
            assert_eq!(*status, Ok(()));
        }
        let st = fx.registry.io_stats(name).unwrap();
        assert_eq!(
            st.op(IoType::WriteZeroes).ops + st.op(IoType::Unmap).ops,
            2000
        );
        assert_eq!(st.op(IoType::Unmap).bytes, 1000 * bs);
        let lat = st.op(IoType::Unmap);
        assert!(lat.latency_min_ns.unwrap() <= lat.latency_max_ns);
    });
}

#[test]
fn ios_on_several_cores_at_once() {
    for_each_device(|fx, name, stores, bs| {
        let results: Vec<_> = (0..2usize)
            .map(|core| {
                let desc = fx.registry.open(name).unwrap();
                fx.reactors.spawn_on(core, move || async move {
                    let ch = desc.open_channel().unwrap();
                    let bufs = bufs(4, 65536);
                    // Each core writes and checks its own half of the device.
                    let base = core as u64 * 2 * 1024 * 1024;
                    let mut ok = 0;
                    for i in 0..64u64 {
                        let off = base + i * 8 * bs;
                        let byte = (core as u8 + 1) ^ i as u8;
                        ch.io(IoRequest::write(filled(&bufs, byte), off, 8 * bs))
                            .await
                            .unwrap();
                        let mut r = ch
                            .io(IoRequest::read(filled(&bufs, 0), off, 8 * bs))
                            .await
                            .unwrap();
                        let data = r.take_buf().unwrap();
                        let want = if stores { byte } else { 0 };
                        if data.as_slice()[..8 * bs as usize]
                            .iter()
                            .all(|&x| x == want)
                        {
                            ok += 1;
                        }
                    }
                    (crate::reactor::current_core().unwrap(), ok)
                })
            })
            .collect();
        for (core, r) in results.into_iter().enumerate() {
            assert_eq!(r.wait().unwrap(), (core, 64));
        }
        let st = fx.registry.io_stats(name).unwrap();
        assert_eq!(st.op(IoType::Write).ops, 128);
        assert_eq!(st.op(IoType::Read).bytes, 128 * 8 * bs);
    });
}

#[test]
fn exhausted_io_pool_queues_requests_and_loses_none() {
    let fx = fixture(IoPoolConfig {
        size: 8,
        cache: 0,
        cores: 2,
    });
    fx.registry
        .create("malloc:///small?size_mb=4&blk_size=4096")
        .unwrap();
    let done = on_core(&fx, 0, "small", |ch, _| async move {
        let b = Rc::new(Burst {
            done: RefCell::new(Vec::new()),
        });
        for i in 0..100u64 {
            ch.submit(
                IoRequest::no_data(IoType::WriteZeroes, i * 4096, 4096).tag(i),
                b.clone(),
            )
            .unwrap();
        }
        // 8 started, the rest wait for objects.
        assert_eq!(ch.in_flight(), 8);
        assert_eq!(ch.waiting(), 92);
        while b.done.borrow().len() < 100 {
            crate::reactor::yield_now().await;
        }
        assert_eq!(ch.waiting(), 0);
        let done = b.done.take();
        done.iter().map(|d| d.0).collect::<Vec<_>>()
    });
    // All 100 completed, in submission order (the wait queue is FIFO).
    assert_eq!(done, (0..100).collect::<Vec<_>>());
    let pool = fx.registry.io_pool_stats();
    assert!(pool.total().exhausted > 0);
    assert_eq!(pool.in_use, 0);
}

#[test]
fn dropping_a_channel_mid_io_still_completes_its_ios() {
    let fx = default_fixture();
    fx.registry.create("null:///n?num_blocks=1024").unwrap();
    let count = on_core(&fx, 1, "n", |ch, _| async move {
        let b = Rc::new(Burst {
            done: RefCell::new(Vec::new()),
        });
        for i in 0..50u64 {
            ch.submit(
                IoRequest::no_data(IoType::Unmap, i * 512, 512).tag(i),
                b.clone(),
            )
            .unwrap();
        }
        drop(ch);
        while b.done.borrow().len() < 50 {
            crate::reactor::yield_now().await;
        }
        b.done.borrow().len()
    });
    assert_eq!(count, 50);
    assert_eq!(fx.registry.io_pool_stats().in_use, 0);
    // The closed channel let go of its descriptor with its last IO: the
    // device can go at once.
    fx.registry.destroy("n").unwrap();
}

#[test]
fn registry_creates_lists_and_refuses_what_it_must() {
    let fx = default_fixture();
    let r = &fx.registry;
    let m = r.create("malloc:///m0?size_mb=2&blk_size=4096").unwrap();
    assert_eq!(
        (m.product.as_str(), m.block_size, m.num_blocks),
        ("malloc", 4096, 512)
    );
    assert_eq!(m.size_bytes, 2 << 20);
    r.create("null:///a0?num_blocks=100").unwrap();
    assert!(matches!(r.create("null:///m0?size_mb=1"), Err(BdevError::Exists(n)) if n == "m0"));
    assert!(matches!(
        r.create("nvme:///x?size_mb=1"),
        Err(BdevError::Uri(_))
    ));
    assert!(matches!(
        r.create("null:///x?size_mb=1&bogus=1"),
        Err(BdevError::Uri(_))
    ));
    let names: Vec<_> = r.list().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["a0", "m0"]);

    let desc = r.open("m0").unwrap();
    let again = desc.clone();
    drop(desc);
    let err = r.destroy("m0").unwrap_err();
    assert!(matches!(err, BdevError::Busy { open: 1, .. }), "{err}");
    assert!(r.get("m0").is_some(), "a busy device must be kept");
    drop(again);
    r.destroy("m0").unwrap();
    assert!(r.get("m0").is_none());
    assert!(matches!(r.destroy("m0"), Err(BdevError::NotFound(_))));
    assert!(matches!(r.open("m0"), Err(BdevError::NotFound(_))));
    // Off a reactor there is no channel.
    assert!(matches!(
        r.open("a0").unwrap().open_channel(),
        Err(BdevError::NotOnReactor)
    ));
}

#[test]
fn io_errors_are_counted_per_op() {
    // A refused IO never reaches the device; an accepted one is counted
    // once with its bytes and latency.
    let fx = default_fixture();
    fx.registry
        .create("malloc:///s?size_mb=1&blk_size=512")
        .unwrap();
    on_core(&fx, 0, "s", |ch, bufs| async move {
        for _ in 0..3 {
            ch.io(IoRequest::write(filled(&bufs, 1), 0, 4096))
                .await
                .unwrap();
        }
        assert!(
            ch.io(IoRequest::write(filled(&bufs, 1), 1, 4096))
                .await
                .is_err()
        );
    });
    let st = fx.registry.io_stats("s").unwrap();
    assert_eq!(st.op(IoType::Write).ops, 3);
    assert_eq!(st.op(IoType::Write).bytes, 3 * 4096);
    assert_eq!(st.op(IoType::Write).errors, 0);
    assert!(st.op(IoType::Write).latency_total_ns >= st.op(IoType::Write).latency_max_ns);
}

/// Adds to `fx` the device `uri` (named `d`) with its copy hidden and its
/// reads failing from `fail_reads_from` on.
fn no_copy_device(fx: &Fixture, uri: &str, fail_reads_from: u64) {
    let built = BdevRegistry::new(IoPoolConfig {
        size: 1,
        cache: 0,
        cores: 1,
    })
    .unwrap();
    built.create(uri).unwrap();
    let inner = built.open("d").unwrap().bdev().clone();
    fx.registry.insert(Arc::new(no_copy::NoCopy {
        inner,
        fail_reads_from,
    }));
}

/// A byte of the pattern the copy tests write, by device offset.
fn pattern_byte(off: u64) -> u8 {
    (off / 512) as u8 ^ (off as u8).wrapping_mul(7)
}

#[test]
fn copy_is_emulated_on_a_device_without_one() {
    for (uri, stores) in [
        ("malloc:///d?size_mb=4&blk_size=512", true),
        ("malloc:///d?size_mb=4&blk_size=4096", true),
        ("null:///d?size_mb=4&blk_size=4096", false),
    ] {
        let fx = default_fixture();
        no_copy_device(&fx, uri, u64::MAX);

        // 320 KiB (several emulation chunks) at 0, copied to 1 MiB.
        const PIECE: u64 = 64 << 10;
        const LEN: u64 = 5 * PIECE;
        const DST: u64 = 1 << 20;
        let errors = on_core(&fx, 0, "d", move |ch, bufs| async move {
            for i in 0..LEN / PIECE {
                let mut b = bufs.get().unwrap();
                for (j, x) in b.as_mut_slice().iter_mut().enumerate() {
                    *x = pattern_byte(i * PIECE + j as u64);
                }
                let w = ch.io(IoRequest::write(b, i * PIECE, PIECE)).await.unwrap();
                assert_eq!(w.status(), Ok(()));
            }
            let c = ch.io(IoRequest::copy(0, DST, LEN)).await.unwrap();
            assert_eq!(c.status(), Ok(()), "{uri}");
            assert_eq!(
                (c.op(), c.src(), c.offset(), c.len()),
                (IoType::Copy, 0, DST, LEN)
            );
            assert!(c.buf().is_none() && !c.reads_zeroes());
            drop(c);
            for i in 0..LEN / PIECE {
                let mut r = ch
                    .io(IoRequest::read(filled(&bufs, 0xEE), DST + i * PIECE, PIECE))
                    .await
                    .unwrap();
                assert_eq!(r.status(), Ok(()));
                if stores {
                    let data = r.take_buf().unwrap();
                    for (j, &x) in data.as_slice().iter().enumerate() {
                        assert_eq!(x, pattern_byte(i * PIECE + j as u64), "{uri} at {j}");
                    }
                }
            }
            // More copies at once than the emulation has buffers: they
            // wait for one and all complete.
            let b = Rc::new(Burst {
                done: RefCell::new(Vec::new()),
            });
            for i in 0..10u64 {
                ch.submit(IoRequest::copy(0, DST + i * PIECE, PIECE).tag(i), b.clone())
                    .unwrap();
            }
            while b.done.borrow().len() < 10 {
                crate::reactor::yield_now().await;
            }
            assert!(b.done.borrow().iter().all(|d| d.1.is_ok()));
            // Refused as a native copy's are: out of range, overlapping,
            // empty.
            let size = 4 << 20;
            [
                IoRequest::copy(size - PIECE, 0, 2 * PIECE),
                IoRequest::copy(0, PIECE / 2, PIECE),
                IoRequest::copy(0, DST, 0),
            ]
            .map(|r| ch.submit(r, b.clone()).unwrap_err().error)
        });
        assert!(
            matches!(errors[0], IoError::OutOfRange { .. }),
            "{errors:?}"
        );
        assert_eq!(errors[1], IoError::Unsupported(IoType::Copy));
        assert_eq!(errors[2], IoError::Empty(IoType::Copy));

        // Counted as 11 copies, none of their reads and writes.
        let st = fx.registry.io_stats("d").unwrap();
        let copy = st.op(IoType::Copy);
        assert_eq!(
            (copy.ops, copy.bytes, copy.errors),
            (11, LEN + 10 * PIECE, 0)
        );
        assert_eq!(copy.latency_buckets.iter().sum::<u64>(), 11);
        assert_eq!(st.op(IoType::Read).ops, LEN / PIECE);
        assert_eq!(st.op(IoType::Write).ops, LEN / PIECE);
        assert_eq!(st.in_flight, 0);
        assert_eq!(fx.registry.io_pool_stats().in_use, 0, "{uri}");
    }
}

#[test]
fn an_emulated_copy_fails_once_with_the_first_error_and_keeps_nothing() {
    let fx = default_fixture();
    // Reads fail from 2 MiB on: a copy from 1.5 MiB fails in its middle.
    no_copy_device(&fx, "malloc:///d?size_mb=4&blk_size=4096", 2 << 20);
    let done = on_core(&fx, 1, "d", |ch, _| async move {
        let b = Rc::new(Burst {
            done: RefCell::new(Vec::new()),
        });
        // More than the emulation's buffers: each failed copy gives its
        // buffer back, or the later ones would wait for ever.
        for i in 0..12u64 {
            ch.submit(IoRequest::copy(3 << 19, 0, 1 << 20).tag(i), b.clone())
                .unwrap();
        }
        while b.done.borrow().len() < 12 {
            crate::reactor::yield_now().await;
        }
        // Copies that read only before 2 MiB still succeed.
        let ok = ch.io(IoRequest::copy(1 << 20, 0, 1 << 20)).await.unwrap();
        assert_eq!(ok.status(), Ok(()));
        b.done.take()
    });
    assert_eq!(
        done,
        (0..12)
            .map(|i| (i, Err(IoError::Device(no_copy::EIO))))
            .collect::<Vec<_>>()
    );
    let copy = *fx.registry.io_stats("d").unwrap().op(IoType::Copy);
    // Successes are ops, failures errors (as for any IO).
    assert_eq!((copy.ops, copy.bytes, copy.errors), (1, 1 << 20, 12));
    assert_eq!(fx.registry.io_stats("d").unwrap().op(IoType::Read).ops, 0);
    assert_eq!(fx.registry.io_pool_stats().in_use, 0);
}
