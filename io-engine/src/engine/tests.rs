//! Tests of the engine's control-plane rules over a real engine on one
//! reactor: what may be destroyed, and what one snapshot holds.
//!
//! Thread: the test threads; the engine's reactor runs its own loop.

use super::testing::start_engine;
use super::*;
use crate::bdev::BdevError;
use crate::export::{ExportError, Protocol};

#[test]
fn a_shared_device_is_not_destroyed_until_unshared() {
    let engine = start_engine();
    engine
        .registry()
        .create("null:///n0?size_mb=1&blk_size=512")
        .unwrap();
    engine
        .share(
            "n0",
            Protocol::Nbd,
            false,
            Vec::new(),
            crate::export::nvmf::auth::HostSecrets::default(),
            None,
        )
        .unwrap();
    let e = engine.destroy_bdev("n0").unwrap_err();
    assert!(
        matches!(e, DestroyError::Shared(ExportError::Shared { ref name, .. }) if name == "n0"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "device \"n0\" is shared over NBD; unshare it before destroying it"
    );
    assert!(engine.registry().get("n0").is_some(), "still there");
    // No connection holds it: the release is immediate.
    assert!(
        engine
            .exports()
            .unshare("n0")
            .unwrap()
            .wait(std::time::Duration::ZERO)
    );
    engine.destroy_bdev("n0").unwrap();
    assert!(engine.registry().get("n0").is_none());
    assert!(matches!(
        engine.destroy_bdev("n0"),
        Err(DestroyError::Bdev(BdevError::NotFound(_)))
    ));
    engine.stop();
}

#[test]
fn a_snapshot_holds_every_part() {
    let engine = start_engine();
    for uri in [
        "null:///b?size_mb=1&blk_size=512",
        "null:///a?size_mb=2&blk_size=4096",
    ] {
        engine.registry().create(uri).unwrap();
    }
    engine
        .share(
            "a",
            Protocol::Nbd,
            true,
            Vec::new(),
            crate::export::nvmf::auth::HostSecrets::default(),
            None,
        )
        .unwrap();
    let s = engine.snapshot();
    assert_eq!(s.build, BUILD);
    assert!(s.uptime.is_some());
    let devices = s.devices.as_ref().unwrap();
    let names: Vec<&str> = devices.iter().map(|d| d.info.name.as_str()).collect();
    assert_eq!(names, ["a", "b"], "by name");
    assert_eq!(devices[0].info.open, 1, "the share holds a open");
    assert_eq!(devices[0].stats.in_flight, 0);
    let reactors = s.reactors.as_ref().unwrap();
    assert_eq!(reactors.len(), 1);
    assert_eq!(reactors[0].index, 0);
    let pools = s.pools.as_ref().unwrap();
    assert_eq!(pools.len(), 1);
    assert_eq!(pools[0].capacity, 4096);
    let exports = s.exports.as_ref().unwrap();
    assert_eq!(exports.len(), 1);
    assert_eq!(
        (exports[0].export.as_str(), exports[0].connections),
        ("a", 0)
    );
    let (ops, modules) = s.accel.as_ref().unwrap();
    assert!(ops.iter().all(|o| o.executed == 0));
    assert!(modules.iter().any(|m| m.module == "software"));
    assert!(s.accel_engine.is_some());
    // Every slot the snapshot maps is a reactor's, the one that holds it.
    for &(slot, core) in &s.slot_cores {
        assert_eq!(engine.reactors().index_of_slot(slot), Some(core));
        assert_eq!(s.core_of_slot(slot), Some(core));
    }
    engine.exports().unshare("a").unwrap();
    engine.stop();
}

#[test]
fn without_an_engine_only_the_build_is_known() {
    let s = Snapshot::without_engine();
    assert_eq!(s.build, BUILD);
    assert!(s.uptime.is_none() && s.devices.is_none() && s.reactors.is_none());
    assert!(s.pools.is_none() && s.exports.is_none() && s.accel.is_none());
    assert_eq!(s.core_of_slot(0), None);
}
