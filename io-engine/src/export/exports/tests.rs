use std::thread;
use std::time::Instant;

use super::*;
use crate::bdev::{BdevError, IoPoolConfig};

fn registry() -> BdevRegistry {
    let r = BdevRegistry::new(IoPoolConfig {
        size: 64,
        cache: 0,
        cores: 1,
    })
    .unwrap();
    r.create("null:///n0?size_mb=1").unwrap();
    r.create("null:///n1?size_mb=1").unwrap();
    r
}

/// Shares `name` over NBD.
fn share_nbd(
    ex: &Exports,
    reg: &BdevRegistry,
    name: &str,
    read_only: bool,
) -> Result<ShareInfo, ExportError> {
    ex.share(reg, name, Protocol::Nbd, read_only)
}

#[test]
fn a_shared_device_is_held_open_and_may_not_be_destroyed() {
    let reg = registry();
    let ex = Exports::new(0);
    share_nbd(&ex, &reg, "n0", true).unwrap();
    assert!(matches!(
        share_nbd(&ex, &reg, "n0", false),
        Err(ExportError::AlreadyShared(_))
    ));
    let e = ex.ensure_unshared("n0").unwrap_err();
    assert_eq!(
        e.to_string(),
        "device \"n0\" is shared over NBD; unshare it before destroying it"
    );
    assert!(ex.ensure_unshared("n1").is_ok());
    assert!(matches!(reg.destroy("n0"), Err(BdevError::Busy { .. })));
    assert_eq!(
        ex.list(),
        vec![ShareInfo {
            name: "n0".into(),
            protocol: Protocol::Nbd,
            read_only: true,
            connections: 0,
        }]
    );
    assert!(ex.unshare("n0").unwrap().wait(Duration::ZERO));
    assert!(matches!(ex.unshare("n0"), Err(ExportError::NotShared(_))));
    assert!(ex.ensure_unshared("n0").is_ok());
    reg.destroy("n0").unwrap();
}

#[test]
fn connections_are_counted_and_limited() {
    let reg = registry();
    let ex = Exports::new(2);
    share_nbd(&ex, &reg, "n0", false).unwrap();
    let a = ex.attach(Protocol::Nbd, "n0").unwrap();
    assert!(ex.refusal(Protocol::Nbd, "n0").is_none());
    let b = ex.attach(Protocol::Nbd, "n0").unwrap();
    assert_eq!(ex.get("n0").unwrap().connections, 2);
    assert!(ex.attach(Protocol::Nbd, "n0").is_none(), "past the limit");
    let why = ex.refusal(Protocol::Nbd, "").unwrap();
    assert!(why.contains("limit of 2"), "{why}");
    drop(a);
    assert_eq!(ex.get("n0").unwrap().connections, 1);
    assert!(!b.closing());
    drop(b);
    assert!(ex.attach(Protocol::Nbd, "nope").is_none());
}

#[test]
fn an_empty_name_picks_the_only_share() {
    let reg = registry();
    let ex = Exports::new(0);
    assert!(ex.find(Protocol::Nbd, "").is_none());
    share_nbd(&ex, &reg, "n0", false).unwrap();
    assert_eq!(ex.find(Protocol::Nbd, "").unwrap().name, "n0");
    share_nbd(&ex, &reg, "n1", false).unwrap();
    assert!(ex.find(Protocol::Nbd, "").is_none(), "two: no default");
    assert_eq!(ex.find(Protocol::Nbd, "n1").unwrap().name, "n1");
    assert_eq!(ex.shares(Protocol::Nbd).len(), 2);
}

#[test]
fn an_unshare_refuses_new_connections_and_waits_for_attached_ones_to_let_go() {
    let reg = registry();
    let ex = Exports::new(0);
    share_nbd(&ex, &reg, "n0", false).unwrap();
    let a = ex.attach(Protocol::Nbd, "n0").unwrap();
    let release = ex.unshare("n0").unwrap();
    assert!(a.closing());
    assert!(ex.attach(Protocol::Nbd, "n0").is_none());
    assert!(ex.get("n0").is_none());
    // Still attached: the wait ends at its bound.
    assert!(!release.wait(Duration::from_millis(10)));
    assert!(matches!(reg.destroy("n0"), Err(BdevError::Busy { .. })));
    // The connection lets go a little later: the wait ends then, and the
    // device is closed by the time it does.
    let t = Instant::now();
    let letting_go = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        drop(a);
    });
    assert!(release.wait(Duration::from_secs(10)));
    assert!(t.elapsed() < Duration::from_secs(5));
    reg.destroy("n0").unwrap();
    letting_go.join().unwrap();
}
