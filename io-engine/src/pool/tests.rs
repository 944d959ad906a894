//! Pool tests; they also run under Miri (`scripts/test`), so loops shrink there.

use super::*;
use crate::env::core_slot;
use crate::env::xorshift::XorShift;
use std::collections::HashSet;
use std::sync::{Arc, mpsc};

fn scale(n: usize) -> usize {
    if cfg!(miri) { n / 100 + 1 } else { n }
}

fn pool(capacity: usize, cache: usize) -> ObjectPool<u64> {
    ObjectPool::new(
        PoolConfig::new("test", capacity, 1).cache_size(cache),
        |i| i as u64,
    )
    .unwrap()
}

#[test]
fn objects_keep_their_values_between_uses() {
    let p = pool(4, 0);
    let mut a = p.get().unwrap();
    let i = a.index();
    *a = 1000;
    drop(a);
    // Cache off, one object back in a FIFO store of 4: take all, find ours.
    let all: Vec<_> = (0..4).map(|_| p.get().unwrap()).collect();
    let ours = all.iter().find(|o| o.index() == i).unwrap();
    assert_eq!(**ours, 1000);
}

#[test]
fn exhaustion_is_reported_and_counted() {
    let p = pool(3, 0);
    let held: Vec<_> = (0..3).map(|_| p.get().unwrap()).collect();
    assert!(p.get().is_none());
    assert!(p.get().is_none());
    assert!(p.retry_get().is_none()); // a retry is not another event
    assert_eq!(p.stats().total().exhausted, 2);
    assert_eq!(p.in_use(), 3);
    drop(held);
    assert_eq!(p.in_use(), 0);
    assert!(p.get().is_some());
}

#[test]
fn cache_is_lifo_and_counts_hits_and_misses() {
    let _slot = core_slot::claim().unwrap();
    let p = pool(64, 8);
    let a = p.get().unwrap(); // miss: refills 4 (one returned, 3 cached)
    let ia = a.index();
    drop(a);
    let b = p.get().unwrap(); // hit: the object just put back
    assert_eq!(b.index(), ia);
    let s = p.stats().total();
    assert_eq!((s.gets, s.puts, s.cache_hits, s.cache_misses), (2, 1, 1, 1));
    // Three more hits from the refill, then a miss.
    let more: Vec<_> = (0..3).map(|_| p.get().unwrap()).collect();
    assert_eq!(p.stats().total().cache_hits, 4);
    let _c = p.get().unwrap();
    assert_eq!(p.stats().total().cache_misses, 2);
    drop(more);
}

#[test]
fn cache_size_zero_disables_the_cache() {
    let _slot = core_slot::claim().unwrap();
    let p = pool(16, 0);
    for _ in 0..10 {
        drop(p.get().unwrap());
    }
    let s = p.stats().total();
    assert_eq!((s.cache_hits, s.cache_misses), (0, 10));
}

#[test]
fn full_cache_flushes_half_to_the_global_store() {
    let _slot = core_slot::claim().unwrap();
    let p = pool(64, 8);
    let held: Vec<_> = (0..20).map(|_| p.get().unwrap()).collect();
    drop(held); // 20 puts into a cache of 8: flushes keep it at most 8
    // Another thread (no slot) can see at least 64 - 8 objects globally.
    let p = Arc::new(p);
    let p2 = p.clone();
    let taken = std::thread::spawn(move || {
        let mut v = Vec::new();
        while let Some(o) = p2.get() {
            v.push(o);
        }
        v.len()
    })
    .join()
    .unwrap();
    assert!(taken >= 56, "only {taken} objects reached the global store");
}

#[test]
fn object_put_on_another_core_goes_to_that_cores_cache() {
    let p = Arc::new(pool(64, 8));
    let (tx, rx) = mpsc::channel::<Pooled<u64>>();
    let p2 = p.clone();
    let other = std::thread::spawn(move || {
        let slot = core_slot::claim().unwrap();
        let o = rx.recv().unwrap();
        let index = o.index();
        drop(o); // a put on this core
        let again = p2.get().unwrap(); // so this get is a hit returning it
        (slot.slot(), index, again.index())
    });
    let me = core_slot::claim().unwrap();
    let o = p.get().unwrap();
    tx.send(o).unwrap();
    let (other_slot, index, again) = other.join().unwrap();
    assert_eq!(index, again);
    let stats = p.stats();
    let of = |s: u32| {
        stats
            .per_core
            .iter()
            .find(|c| c.slot == Some(s))
            .copied()
            .unwrap()
    };
    assert_eq!(of(other_slot).puts, 2); // the object received, then `again`
    assert_eq!(of(other_slot).cache_hits, 1);
    assert_eq!(of(me.slot()).puts, 0);
}

#[test]
fn creation_rejects_bad_shapes() {
    assert_eq!(
        ObjectPool::new(PoolConfig::new("z", 0, 1), |_| 0u8).err(),
        Some(PoolError::ZeroCapacity("z".into()))
    );
    let err = ObjectPool::new(PoolConfig::new("c", 100, 2).cache_size(64), |_| 0u8)
        .err()
        .unwrap();
    assert!(
        matches!(err, PoolError::CacheTooLarge { needed: 192, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("raise the pool size"));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "leaks the pool on purpose, which Miri reports as a leak"
)]
fn dropping_a_pool_with_objects_out_is_reported_and_safe() {
    let p = pool(4, 0);
    let mut held = p.get().unwrap();
    let before = leaked_pools();
    // Debug builds assert; release builds only count and log.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(p)));
    assert_eq!(r.is_err(), cfg!(debug_assertions));
    assert_eq!(leaked_pools(), before + 1);
    // The handle still points at live memory.
    *held = 7;
    assert_eq!(*held, 7);
    drop(held);
}

#[test]
fn starving_core_receives_objects_freed_on_other_cores() {
    // Two cores, a cache of 4, 12 objects: core B takes them all, then frees
    // them while core A is starving. They must reach A rather than B's cache.
    let p = Arc::new(
        ObjectPool::new(PoolConfig::new("starve", 12, 2).cache_size(4), |i| i as u64).unwrap(),
    );
    let (tx_taken, rx_taken) = mpsc::channel();
    let (tx_free, rx_free) = mpsc::channel::<()>();
    let pb = p.clone();
    let b = std::thread::spawn(move || {
        let _slot = core_slot::claim().unwrap();
        let held: Vec<_> = std::iter::from_fn(|| pb.get()).collect();
        tx_taken.send(held.len()).unwrap();
        rx_free.recv().unwrap();
        drop(held);
    });
    let _slot = core_slot::claim().unwrap();
    assert_eq!(rx_taken.recv().unwrap(), 12);
    assert!(p.get().is_none()); // A starves
    tx_free.send(()).unwrap();
    b.join().unwrap();
    let got: Vec<_> = std::iter::from_fn(|| p.get()).collect();
    assert_eq!(got.len(), 12, "objects stayed in the other core's cache");
}

#[test]
fn stress_many_threads_pass_objects_around() {
    const THREADS: usize = 4;
    let capacity = if cfg!(miri) { 512 } else { 4096 };
    let p = Arc::new(
        ObjectPool::new(
            PoolConfig::new("stress", capacity, THREADS).cache_size(64),
            |i| i as u64,
        )
        .unwrap(),
    );
    let rounds = scale(20_000);
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS).map(|_| mpsc::channel::<Pooled<u64>>()).unzip();
    let handles: Vec<_> = rxs
        .into_iter()
        .enumerate()
        .map(|(t, rx)| {
            let p = p.clone();
            let next = txs[(t + 1) % THREADS].clone();
            std::thread::spawn(move || {
                let _slot = core_slot::claim().unwrap();
                let mut rng = XorShift::new(0x9e37_79b9_7f4a_7c15 ^ t as u64);
                let mut held = Vec::new();
                for _ in 0..rounds {
                    match rng.below(4) {
                        0 | 1 => {
                            if let Some(mut o) = p.get() {
                                // The object holds its own index: a handed-out
                                // object is never handed out twice.
                                assert_eq!(*o % capacity as u64, o.index() as u64);
                                *o += capacity as u64;
                                held.push(o);
                            }
                        }
                        2 => drop(held.pop()),
                        _ => {
                            if let Some(o) = held.pop() {
                                let _ = next.send(o);
                            }
                        }
                    }
                    while let Ok(o) = rx.try_recv() {
                        held.push(o);
                    }
                }
                drop(next);
                drop(held);
                // Drain what the previous thread still sends, until it is
                // done and has dropped its sender: an object left in the
                // channel would be freed after this thread's flush.
                while let Ok(o) = rx.recv() {
                    drop(o);
                }
                p.flush_local();
            })
        })
        .collect();
    drop(txs);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(p.in_use(), 0);
    let s = p.stats();
    let t = s.total();
    assert_eq!(t.gets, t.puts);
    assert_eq!(s.available, capacity as u64);
    // Every object is still there, once.
    let mut seen = HashSet::new();
    let all: Vec<_> = std::iter::from_fn(|| p.get()).collect();
    for o in &all {
        assert!(seen.insert(o.index()));
    }
    assert_eq!(seen.len(), capacity);
}

#[cfg(not(miri))]
mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Get,
        Put(usize),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            prop_oneof![Just(Op::Get), any::<usize>().prop_map(Op::Put)],
            1..400,
        )
    }

    proptest! {
        /// The counters always agree with what the caller holds, a get fails
        /// only when every object is out, and a get right after a put is a
        /// cache hit returning that object.
        #[test]
        fn cache_bookkeeping(capacity in 1usize..64, cache in 0usize..16, ops in ops()) {
            let _slot = core_slot::claim().unwrap();
            let cache = cache.min(capacity / 2);
            let p = ObjectPool::new(PoolConfig::new("prop", capacity, 1).cache_size(cache), |i| i as u64)
                .unwrap();
            let mut held: Vec<Pooled<u64>> = Vec::new();
            let mut attempts = 0u64;
            let mut last_put = None;
            // After a failed get, puts bypass the cache until a get succeeds
            // from the global store.
            let mut starving = false;
            for op in ops {
                match op {
                    Op::Get => {
                        attempts += 1;
                        let hits = p.stats().total().cache_hits;
                        match p.get() {
                            Some(o) => {
                                prop_assert!(held.iter().all(|h| h.index() != o.index()));
                                let hit = p.stats().total().cache_hits == hits + 1;
                                if let (Some(i), true) = (last_put, cache > 0) {
                                    prop_assert_eq!(o.index(), i);
                                    prop_assert!(hit);
                                }
                                if !hit {
                                    starving = false;
                                }
                                held.push(o);
                            }
                            None => {
                                prop_assert_eq!(held.len(), capacity);
                                starving = true;
                            }
                        }
                        last_put = None;
                    }
                    Op::Put(k) if !held.is_empty() => {
                        let o = held.swap_remove(k % held.len());
                        last_put = (!starving).then_some(o.index());
                        drop(o);
                    }
                    Op::Put(_) => {}
                }
                let t = p.stats().total();
                prop_assert_eq!(t.gets - t.puts, held.len() as u64);
                prop_assert_eq!(t.cache_hits + t.cache_misses, attempts);
                prop_assert_eq!(p.in_use(), held.len() as u64);
            }
        }
    }
}
