//! Tests of the engine's control-plane rules over a real engine on one
//! reactor: what may be destroyed, how shares over NVMe-oF get their
//! subsystems, and what one snapshot holds.
//!
//! Thread: the test threads; the engine's reactor runs its own loop.

use std::time::Duration;

use super::testing::start_engine;
use super::*;
use crate::bdev::BdevError;
use crate::export::nvmf::{ShareOptions, SubsystemError};
use crate::export::{ExportError, Protocol};

#[test]
fn a_shared_device_is_not_destroyed_until_unshared() {
    let engine = start_engine();
    engine
        .registry()
        .create("null:///n0?size_mb=1&blk_size=512")
        .unwrap();
    engine.share("n0", Protocol::Nbd, false, None).unwrap();
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
    assert!(engine.exports().unshare("n0").unwrap().wait(Duration::ZERO));
    engine.destroy_bdev("n0").unwrap();
    assert!(engine.registry().get("n0").is_none());
    assert!(matches!(
        engine.destroy_bdev("n0"),
        Err(DestroyError::Bdev(BdevError::NotFound(_)))
    ));
    engine.stop();
}

#[test]
fn nvmf_shares_have_a_subsystem_of_their_own() {
    let engine = start_engine();
    for n in ["n0", "n1", "n2"] {
        engine
            .registry()
            .create(&format!("null:///{n}?size_mb=1"))
            .unwrap();
    }
    let nqn = |nqn: &str| {
        Some(ShareOptions {
            nqn: Some(nqn.into()),
            ..ShareOptions::default()
        })
    };
    let share = |name: &str, protocol, options| engine.share(name, protocol, false, options);
    let n0 = share("n0", Protocol::Nvmf, None).unwrap();
    assert_eq!(n0.nqn.as_deref(), Some("nqn.2024-12.io.io-engine:n0"));
    assert_eq!(n0.uri, "", "no listener yet");
    // An NQN of another share's, default or given: refused, naming it.
    let e = share("n1", Protocol::Nvmf, nqn("nqn.2024-12.io.io-engine:n0")).unwrap_err();
    assert!(
        matches!(e, ShareError::Nvmf(SubsystemError::NqnInUse { .. })),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "NQN \"nqn.2024-12.io.io-engine:n0\" is already the NQN of device \"n0\"'s share"
    );
    // Sharing n0 again is the registry's refusal, whatever its NQN.
    let e = share("n0", Protocol::Nvmf, None).unwrap_err();
    assert!(
        matches!(e, ShareError::Export(ExportError::AlreadyShared(_))),
        "{e}"
    );
    // A bad NQN, or NVMe-oF options for NBD: refused, saying why.
    let e = share("n1", Protocol::Nvmf, nqn("nqn.2024-1.x")).unwrap_err();
    assert!(e.to_string().contains("nqn.YYYY-MM."), "{e}");
    let e = share("n1", Protocol::Nbd, nqn("nqn.2019-05.io.example:v")).unwrap_err();
    assert!(
        e.to_string().contains("for protocol nvmf only, not nbd"),
        "{e}"
    );
    let hosts = ShareOptions {
        allowed_hosts: vec!["nqn.2019-05.io.example:h".into()],
        ..ShareOptions::default()
    };
    let e = share("n1", Protocol::Nbd, Some(hosts.clone())).unwrap_err();
    assert!(
        e.to_string().contains("for protocol nvmf only, not nbd"),
        "{e}"
    );
    // Nothing was kept open or added by the refusals; options that set
    // nothing are no NVMe-oF options.
    assert!(engine.ensure_unshared("n1").is_ok());
    assert_eq!(engine.nvmf().subsystems.all().len(), 1);
    share("n1", Protocol::Nbd, Some(ShareOptions::default())).unwrap();
    assert!(engine.exports().unshare("n1").unwrap().wait(Duration::ZERO));

    let n1 = share(
        "n1",
        Protocol::Nvmf,
        Some(ShareOptions {
            nqn: Some("nqn.2019-05.io.example:v".into()),
            ..hosts
        }),
    )
    .unwrap();
    assert_eq!(engine.share_view("n1"), Some(n1.clone()));
    assert_eq!(n1.allowed_hosts, ["nqn.2019-05.io.example:h"]);
    assert!(n1.dhchap_hosts.is_empty());
    let sub = engine.nvmf().subsystems.find("nqn.2019-05.io.example:v");
    assert_eq!(sub.map(|s| s.export), Some("n1".into()));
    let listed: Vec<_> = engine.shares().into_iter().map(|s| s.nqn).collect();
    assert_eq!(
        listed,
        [
            Some("nqn.2024-12.io.io-engine:n0".to_string()),
            Some("nqn.2019-05.io.example:v".to_string())
        ]
    );
    // Once n0 goes, its NQN is free.
    engine.unshare_all();
    assert!(engine.shares().is_empty());
    assert!(engine.nvmf().subsystems.all().is_empty());
    share("n2", Protocol::Nvmf, nqn("nqn.2024-12.io.io-engine:n0")).unwrap();
    engine.unshare_all();
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
    engine.share("a", Protocol::Nbd, true, None).unwrap();
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
