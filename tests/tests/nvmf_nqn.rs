//! End-to-end tests of a share's own subsystem NQN: a device shared under
//! an NQN given at start (`--share NAME:nvmf:nqn=NQN`) or through the CLI
//! (`bdev share NAME --protocol nvmf --nqn NQN`) or in the config file
//! (`share = ["NAME:nvmf:nqn=NQN"]`) is reached by that NQN
//! only (Connect, discovery log, Identify, URI, export list), and NQNs
//! that break the spec's rules or are another share's are refused with
//! their messages.
//!
//! Every test starts its own daemon, killed when the test ends; every
//! socket has timeouts.

use io_engine_tests::daemon::Daemon;
use io_engine_tests::nvmf::{CC_ENABLE, DISCOVERY_NQN, HOST_NQN, Host, Sqe, nqn_of};

/// The NQN m0 is shared under.
const NQN: &str = "nqn.2019-05.io.example:pvc-0a1b";

/// `bdev share m1 --protocol nvmf --nqn NQN`.
fn share(nqn: &str) -> [&str; 7] {
    ["bdev", "share", "m1", "--protocol", "nvmf", "--nqn", nqn]
}

#[test]
fn a_share_given_an_nqn_is_reached_by_that_nqn_only() {
    let share = format!("m0:nvmf:nqn={NQN}");
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///m0?size_mb=64&blk_size=4096",
        "--share",
        &share,
    ]);
    let addr = d.nvmf_addr();

    // The device's default NQN names nothing now: Connect Invalid
    // Parameters, on the data's SUBNQN field.
    let (_, cqe) = Host::admin(addr, &nqn_of("m0"), 0).unwrap();
    assert_eq!((cqe.status(), cqe.dw0() >> 16), (0x182, 256));

    // The given one connects an admin and an I/O queue; Identify
    // Controller's SUBNQN is it.
    let (mut admin, cqe) = Host::admin(addr, NQN, 0).unwrap();
    assert_eq!(cqe.status(), 0, "admin Connect");
    let cntlid = cqe.dw0() as u16;
    assert_eq!(admin.set_cc(CC_ENABLE).unwrap().status(), 0);
    let (cqe, ctrl) = admin
        .read_admin(Sqe::new(0x06, 0).with_cdw(10, 1), 4096)
        .unwrap();
    assert_eq!(cqe.status(), 0);
    assert_eq!(&ctrl[768..768 + NQN.len()], NQN.as_bytes());
    assert_eq!(ctrl[768 + NQN.len()], 0, "SUBNQN is NUL-terminated");
    let mut io = Host::tcp(addr).unwrap();
    io.ic(false, false).unwrap();
    let cqe = io.connect(1, 31, cntlid, NQN, HOST_NQN, 0).unwrap();
    assert_eq!(cqe.status(), 0, "I/O queue Connect");

    // The discovery log lists it, not the default.
    let (mut disc, cqe) = Host::admin(addr, DISCOVERY_NQN, 0).unwrap();
    assert_eq!(cqe.status(), 0);
    let (cqe, log) = disc.discovery_log(3072).unwrap();
    assert_eq!(cqe.status(), 0);
    assert_eq!(u64::from_le_bytes(log[8..16].try_into().unwrap()), 2);
    let entry = &log[2048..3072];
    assert_eq!(entry[2], 2, "an NVM subsystem");
    assert_eq!(&entry[256..256 + NQN.len()], NQN.as_bytes());
    assert_eq!(entry[256 + NQN.len()], 0);

    // The URI and the export list name it.
    let list = d.ctl_json(&["export", "list"]);
    let e = &list["exports"][0];
    assert_eq!(e["nqn"], NQN, "{list}");
    assert_eq!(e["uri"], format!("nvmf://{addr}/{NQN}"), "{list}");
    let bdev = d.ctl_json(&["bdev", "get", "m0"]);
    assert_eq!(bdev["share_uri"], format!("nvmf://{addr}/{NQN}"), "{bdev}");
    let text = d.ctl_ok(&["export", "list"]);
    assert!(text.contains(&format!("nvmf://{addr}/{NQN}")), "{text}");
}

#[test]
fn the_cli_shares_under_an_nqn_and_refuses_bad_or_taken_ones() {
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///m0?size_mb=4&blk_size=4096",
        "--bdev",
        "malloc:///m1?size_mb=4&blk_size=4096",
        "--share",
        "m0:nvmf",
    ]);
    let addr = d.nvmf_addr();
    let refused = |args: &[&str], word: &str| {
        let out = d.ctl(args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(word), "{args:?}: {err}");
        assert!(err.len() < 400, "a bounded message: {err}");
    };

    // Another share's NQN (m0's default): ALREADY_EXISTS, naming m0.
    refused(
        &share(&nqn_of("m0")),
        "is already the NQN of device \"m0\"'s share",
    );
    // NQNs that break a rule, each with its own message; a long one is
    // quoted in part only.
    let long = format!("nqn.2019-05.io.example:{}", "x".repeat(300));
    for (nqn, why) in [
        ("vol-1", "does not start with nqn."),
        ("nqn.2019-13.io.example:v", "nqn.YYYY-MM."),
        ("nqn.2019-05.example:v", "reverse domain"),
        ("nqn.2014-08.org.nvmexpress:uuid:xyz", "UUID"),
        (DISCOVERY_NQN, "discovery subsystem"),
        (long.as_str(), "longer than 223 bytes"),
    ] {
        refused(&share(nqn), why);
    }
    // NBD has no NQNs.
    refused(
        &["bdev", "share", "m1", "--nqn", NQN],
        "for protocol nvmf only, not nbd",
    );

    // A good one: the URI names it and a host connects with it.
    let uri = d.ctl_ok(&share(NQN));
    assert_eq!(uri.trim(), format!("nvmf://{addr}/{NQN}"));
    let (_, cqe) = Host::admin(addr, NQN, 0).unwrap();
    assert_eq!(cqe.status(), 0);
    let (_, cqe) = Host::admin(addr, &nqn_of("m1"), 0).unwrap();
    assert_eq!(cqe.status(), 0x182);

    // A --share whose NQN the engine refuses stops the daemon at start.
    let (out, _) = io_engine_tests::daemon::run_daemon_to_exit(
        [
            "--bdev",
            "null:///n0?size_mb=4",
            "--share",
            "n0:nvmf:nqn=nqn.x",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--share n0:nvmf:nqn=nqn.x: NQN \"nqn.x\""),
        "{err}"
    );
}

#[test]
fn the_config_file_gives_a_share_its_nqn_with_the_share_key() {
    let dir = io_engine_tests::tools::TempDir::new("config-nqn");
    let file = dir.write(
        "engine.toml",
        &format!(
            "bdev = [\"null:///n0?size_mb=8\"]\n\
             share = [\"n0:nvmf:ro:nqn={NQN}\"]\n"
        ),
    );
    let d = Daemon::start_quiet(["--config", &file.display().to_string()]);
    let e = &d.ctl_json(&["export", "list"])["exports"][0];
    assert_eq!((&e["nqn"], &e["read_only"]), (&NQN.into(), &true.into()));
    let (_, cqe) = Host::admin(d.nvmf_addr(), NQN, 0).unwrap();
    assert_eq!(cqe.status(), 0);
}
