//! DH-HMAC-CHAP on the NVMe/TCP target, PDU by PDU, with the NULL DH
//! group (the kernel initiator's run, `vm_nvmf_auth.rs`, takes ffdhe2048):
//! a share whose host must authenticate (`bdev share --dhchap-secret`),
//! commands refused until the queue has, every queue authenticating, a
//! wrong response answered with Failure1 and the connection closed, and no
//! secret in the daemon's log, the export list or the config dump.
//!
//! The host's responses are computed by a Python script (hashlib, hmac;
//! the tests' host, `io_engine_tests::nvmf::dhchap_response`), the secrets
//! by `nvme gen-dhchap-key`: never by the engine's code.

use std::path::Path;
use std::process::{Command, Output};

use io_engine_tests::daemon::Daemon;
use io_engine_tests::nvmf::{CC_ENABLE, HOST_NQN, Host, Sqe, nqn_of};
use io_engine_tests::tools::TempDir;
use io_engine_tests::u;

fn gen_key() -> String {
    let out = Command::new("nvme")
        .args(["gen-dhchap-key", "--hmac=1"])
        .output()
        .expect("nvme-cli runs");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `bdev share m0 --protocol nvmf` to HOST_NQN with the secret in `file`.
fn share_with_secret(d: &Daemon, file: &Path) -> Output {
    let flag = format!("{HOST_NQN}={}", file.display());
    let args = "bdev share m0 --protocol nvmf --allowed-host".split(' ');
    d.ctl(args.chain([HOST_NQN, "--dhchap-secret", &flag]))
}

const AUTH_REQUIRED: u16 = 0x191;
const ATR: u32 = 1 << 17;

#[test]
fn a_host_with_a_secret_authenticates_every_queue_before_anything_runs() {
    let d = Daemon::start_quiet(["--bdev", "malloc:///m0?size_mb=4&blk_size=4096"]);
    let addr = d.nvmf_addr();
    let (secret, other) = (gen_key(), gen_key());
    let dir = TempDir::new("dhchap");
    let file = dir.write("host.key", &format!("{secret}\n"));
    let out = share_with_secret(&d, &file);
    assert!(out.status.success(), "{out:?}");
    let subnqn = nqn_of("m0");
    let list = d.ctl_json(&["export", "list"]);
    assert_eq!(list["exports"][0]["dhchap_hosts"][0], HOST_NQN, "{list}");
    let dump = d.ctl_ok(&["config", "dump"]);
    assert!(
        dump.contains(&format!("host={HOST_NQN}:dhchap=REDACTED")),
        "{dump}"
    );
    let b64 = secret.split(':').nth(2).unwrap();
    assert!(!list.to_string().contains(b64) && !dump.contains(b64));

    // The admin queue: Connect asks for authentication (ATR); nothing
    // else runs before it.
    let (mut admin, cqe) = Host::admin(addr, &subnqn, 0).unwrap();
    assert_eq!(cqe.status(), 0);
    assert_ne!(cqe.dw0() & ATR, 0, "AUTHREQ.ATR");
    let cntlid = cqe.dw0() as u16;
    assert_eq!(admin.set_cc(CC_ENABLE).unwrap().status(), AUTH_REQUIRED);
    let identify = Sqe::new(0x06, 0).with_cdw(10, 1);
    assert_eq!(
        admin.read_admin(identify, 4096).unwrap().0.status(),
        AUTH_REQUIRED
    );
    let success1 = admin.authenticate(&secret, HOST_NQN, &subnqn, 7).unwrap();
    assert_eq!(
        (success1[0], success1[1], success1[8]),
        (1, 0x03, 0),
        "{success1:?}"
    );
    assert_eq!(admin.set_cc(CC_ENABLE).unwrap().status(), 0);

    // An I/O queue authenticates too.
    let mut io = Host::tcp(addr).unwrap();
    io.ic(false, false).unwrap();
    let cqe = io.connect(1, 31, cntlid, &subnqn, HOST_NQN, 0).unwrap();
    assert_eq!(cqe.status(), 0);
    assert_ne!(cqe.dw0() & ATR, 0);
    let write = Sqe::rw(0x01, 1, 0, 1);
    assert_eq!(
        io.exec(write, &[0xAB; 4096], &[]).unwrap().0.status(),
        AUTH_REQUIRED
    );
    let success1 = io.authenticate(&secret, HOST_NQN, &subnqn, 8).unwrap();
    assert_eq!(success1[1], 0x03);
    assert_eq!(io.exec(write, &[0xAB; 4096], &[]).unwrap().0.status(), 0);

    // Another secret: Failure1 (authentication failed), then the
    // connection closes; nothing it sent reached the device.
    let (mut bad, cqe) = Host::admin(addr, &subnqn, 0).unwrap();
    assert_ne!(cqe.dw0() & ATR, 0);
    let failure1 = bad.authenticate(&other, HOST_NQN, &subnqn, 9).unwrap();
    assert_eq!(&failure1[..8], &[0, 0xF1, 0, 0, 9, 0, 1, 1], "{failure1:?}");
    assert!(bad.closed(), "the refused connection closes");
    let stats = d.ctl_json(&["stats", "io", "m0"]);
    assert_eq!(u(&stats["stats"][0]["write"]["ops"]), 1, "{stats}");
    // The three commands refused before authentication, by status.
    let scrape = io_engine_tests::http::get(&d.metrics_url()).unwrap().body;
    let scrape = String::from_utf8(scrape).unwrap();
    let line = "io_engine_nvmf_errors_total{status=\"auth_required\"} 3";
    assert!(scrape.lines().any(|l| l == line), "{line} in\n{scrape}");
    let log = d.stderr();
    assert!(log.contains("NVMe/TCP authentication failed"), "{log}");
    assert!(!log.contains(b64), "a secret in the log");
}

#[test]
fn malformed_secrets_are_refused_by_name_never_by_value() {
    let d = Daemon::start_quiet(["--bdev", "malloc:///m0?size_mb=4&blk_size=4096"]);
    let dir = TempDir::new("dhchap-bad");
    let secret = gen_key();
    // One character of the key changed: the CRC no longer matches.
    let mut bad = secret.clone().into_bytes();
    bad[12] = if bad[12] == b'A' { b'B' } else { b'A' };
    let bad = String::from_utf8(bad).unwrap();
    let file = dir.write("bad.key", &bad);
    let out = share_with_secret(&d, &file);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CRC-32"), "{err}");
    assert!(!err.contains(&bad[10..30]), "the secret in {err}");
    // A host that is not allowed.
    let file = dir.write("good.key", &secret);
    let flag = format!("nqn.2024-12.io.example:other={}", file.display());
    let out = d.ctl([
        "bdev",
        "share",
        "m0",
        "--protocol",
        "nvmf",
        "--dhchap-secret",
        &flag,
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not one of allowed_hosts"), "{err}");

    // At start: the daemon refuses a redacted dump's value.
    let (out, _) = io_engine_tests::daemon::run_daemon_to_exit(
        [
            "--bdev",
            "malloc:///m0?size_mb=4&blk_size=4096",
            "--share",
            &format!("m0:nvmf:host={HOST_NQN}:dhchap=REDACTED"),
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("not a DH-HMAC-CHAP secret"), "{stderr}");
}
