//! NBD over TLS (`--nbd-tls`), with the real clients: `nbdinfo nbds://`
//! with libnbd's certificate directory, `qemu-img info` with
//! `tls-creds-x509`, fio's nbd engine writing and verifying over
//! `nbds://`; a plaintext client refused with TLS_REQD; client
//! certificates required with `--nbd-tls-client-ca`; `allow` serving both;
//! `export list` giving `nbds://` URIs; bad TLS flags exiting 2.
//!
//! The certificates come from [`TestPki`], in one directory per test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use io_engine_tests::certs::TestPki;
use io_engine_tests::daemon::{Daemon, quiet_args, run_daemon_to_exit};
use io_engine_tests::{assert_fio_verified, fio_nbd_verify_args, output_ok, output_with_timeout};

/// A fresh PKI in a directory of its own.
fn pki(test: &str) -> TestPki {
    let dir = std::env::temp_dir().join(format!("io-engine-nbd-tls-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    TestPki::create(&dir).expect("create the test PKI")
}

/// A directory with the CA certificate only: a client that trusts the
/// server but has no certificate of its own.
fn ca_only(pki: &TestPki) -> PathBuf {
    let dir = pki.dir.join("ca-only");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&pki.ca, dir.join("ca-cert.pem")).unwrap();
    dir
}

/// A daemon with TLS `mode`, one malloc device `v0` shared, and `extra` flags.
fn daemon(pki: &TestPki, mode: &str, extra: &[&str]) -> Daemon {
    let mut args: Vec<String> = [
        "--bdev",
        "malloc:///v0?size_mb=64&blk_size=4096",
        "--share",
        "v0",
        "--nbd-tls",
        mode,
        "--nbd-tls-cert",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(pki.server_cert.display().to_string());
    args.push("--nbd-tls-key".into());
    args.push(pki.server_key.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    Daemon::start_quiet(args)
}

/// `nbds://127.0.0.1:PORT/v0` with libnbd's certificate directory `dir`.
fn nbds_uri(d: &Daemon, dir: &Path) -> String {
    format!(
        "nbds://{}/v0?tls-certificates={}",
        d.nbd_addr(),
        dir.display()
    )
}

fn run(program: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args);
    output_with_timeout(cmd, Duration::from_secs(60))
}

/// The stdout of `cmd`, which must succeed within `timeout`.
fn succeeds(cmd: Command, timeout: Duration) -> String {
    String::from_utf8_lossy(&output_ok(cmd, timeout).stdout).into_owned()
}

fn ok(program: &str, args: &[&str]) -> String {
    let mut cmd = Command::new(program);
    cmd.args(args);
    succeeds(cmd, Duration::from_secs(60))
}

fn nbdinfo_json(uri: &str) -> serde_json::Value {
    serde_json::from_str(&ok("nbdinfo", &["--json", uri])).unwrap()
}

fn fails(program: &str, args: &[&str]) -> String {
    let out = run(program, args);
    assert!(
        !out.status.success(),
        "{program} {args:?} succeeded:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn require_serves_nbdinfo_and_qemu_img_over_tls_and_refuses_plaintext() {
    let pki = pki("require");
    let d = daemon(&pki, "require", &[]);
    let info = nbdinfo_json(&nbds_uri(&d, &pki.dir));
    assert_eq!(info["protocol"], "newstyle-fixed");
    assert_eq!(info["TLS"], true, "{info}");
    assert_eq!(info["exports"][0]["export-size"], 64u64 << 20);

    let object = format!(
        "tls-creds-x509,id=tls0,endpoint=client,dir={}",
        pki.dir.display()
    );
    let image = format!(
        "driver=nbd,host=127.0.0.1,port={},export=v0,tls-creds=tls0",
        d.nbd_addr().port()
    );
    let out = ok(
        "qemu-img",
        &[
            "info",
            "--output=json",
            "--object",
            &object,
            "--image-opts",
            &image,
        ],
    );
    let out: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["virtual-size"], 64u64 << 20, "{out}");

    // A plaintext client: every option but ABORT gets TLS_REQD. qemu names
    // the reply; libnbd logs the server's message (with LIBNBD_DEBUG).
    let err = fails("qemu-img", &["info", &d.nbd_uri("v0")]);
    assert!(err.contains("TLS negotiation required"), "{err}");
    assert!(
        err.contains("TLS is required: send STARTTLS first"),
        "{err}"
    );
    for args in [vec![d.nbd_uri("v0")], vec!["--list".into(), d.nbd_uri("")]] {
        let mut cmd = Command::new("nbdinfo");
        cmd.args(&args).env("LIBNBD_DEBUG", "1");
        let out = output_with_timeout(cmd, Duration::from_secs(60));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "plaintext nbdinfo {args:?} served");
        assert!(
            err.contains("server error message: TLS is required"),
            "{args:?}: {err}"
        );
    }
    // A client that does not trust the server's CA fails the handshake.
    let untrusting = pki.dir.join("other-ca");
    std::fs::create_dir_all(&untrusting).unwrap();
    std::fs::copy(&pki.other_ca, untrusting.join("ca-cert.pem")).unwrap();
    fails("nbdinfo", &[&nbds_uri(&d, &untrusting)]);
    // The daemon is still there for the next client.
    ok("nbdinfo", &["--size", &nbds_uri(&d, &ca_only(&pki))]);
}

/// fio with libnbd finding `pki`'s certificates in its default place,
/// `$HOME/.pki/libnbd`: libnbd refuses `tls-certificates` in a URI unless
/// the program allows local files, which fio's nbd engine does not. For
/// root libnbd looks in /etc/pki/libnbd instead, so as root fio runs in a
/// user namespace as an unprivileged user (the files stay readable: they
/// are still root's outside).
fn fio_with_certs(pki: &TestPki, args: &[String]) -> String {
    let home = pki.dir.join("home");
    let dir = home.join(".pki").join("libnbd");
    std::fs::create_dir_all(&dir).unwrap();
    for (from, to) in [
        (&pki.ca, "ca-cert.pem"),
        (&pki.client_cert, "client-cert.pem"),
        (&pki.client_key, "client-key.pem"),
    ] {
        std::fs::copy(from, dir.join(to)).unwrap();
    }
    let mut cmd = if rustix::process::geteuid().is_root() {
        let mut c = Command::new("unshare");
        c.args(["--user", "--map-user=65534", "--map-group=65534", "fio"]);
        c
    } else {
        Command::new("fio")
    };
    cmd.args(args).env("HOME", &home);
    succeeds(cmd, Duration::from_secs(120))
}

#[test]
fn fio_writes_and_verifies_over_nbds() {
    let pki = pki("fio");
    let d = daemon(&pki, "require", &[]);
    let uri = format!("nbds://{}/v0", d.nbd_addr());
    for bs in ["--bs=4k", "--bsrange=4k-1m"] {
        let out = fio_with_certs(&pki, &fio_nbd_verify_args(&uri, bs, 16));
        assert_fio_verified(&out, 16, bs);
    }
}

#[test]
fn client_ca_refuses_clients_without_a_certificate_of_that_ca() {
    let pki = pki("client-ca");
    let ca = pki.ca.display().to_string();
    let d = daemon(&pki, "require", &["--nbd-tls-client-ca", &ca]);
    // Its own client certificate (client-cert.pem in the directory).
    let out = ok("nbdinfo", &["--size", &nbds_uri(&d, &pki.dir)]);
    assert_eq!(out.trim(), (64u64 << 20).to_string());
    // No client certificate.
    fails("nbdinfo", &["--size", &nbds_uri(&d, &ca_only(&pki))]);
    // A certificate of another CA.
    let other = pki.dir.join("other-client");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(&pki.ca, other.join("ca-cert.pem")).unwrap();
    std::fs::copy(&pki.other_client_cert, other.join("client-cert.pem")).unwrap();
    std::fs::copy(&pki.other_client_key, other.join("client-key.pem")).unwrap();
    fails("nbdinfo", &["--size", &nbds_uri(&d, &other)]);
    let log = d.stderr();
    assert!(log.contains("NBD TLS failed"), "{log}");
    ok("nbdinfo", &["--size", &nbds_uri(&d, &pki.dir)]);
}

#[test]
fn allow_serves_tls_and_plaintext_clients() {
    let pki = pki("allow");
    let d = daemon(&pki, "allow", &[]);
    let tls = nbdinfo_json(&nbds_uri(&d, &pki.dir));
    assert_eq!(tls["TLS"], true);
    let plain = nbdinfo_json(&d.nbd_uri("v0"));
    assert_eq!(plain["TLS"], false);
    // Only `require` makes the URIs nbds://.
    let list = d.ctl_json(&["export", "list"]);
    assert_eq!(
        list["exports"][0]["uri"],
        format!("nbd://{}/v0", d.nbd_addr())
    );
}

#[test]
fn export_list_gives_nbds_uris_when_tls_is_required() {
    let pki = pki("list");
    let d = daemon(&pki, "require", &[]);
    let list = d.ctl_json(&["export", "list"]);
    let uri = format!("nbds://{}/v0", d.nbd_addr());
    assert_eq!(list["exports"][0]["uri"], uri, "{list}");
    // The URI works as it is given, with the client's certificates added.
    let with_certs = format!("{uri}?tls-certificates={}", pki.dir.display());
    ok("nbdinfo", &["--size", &with_certs]);
}

#[test]
fn bad_tls_flags_exit_2_with_one_line() {
    let pki = pki("flags");
    let cert = pki.server_cert.display().to_string();
    let key = pki.server_key.display().to_string();
    let missing = pki.dir.join("missing.pem").display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--nbd-tls", "require"], "--nbd-tls-cert"),
        (
            vec!["--nbd-tls", "allow", "--nbd-tls-cert", &cert],
            "--nbd-tls-key",
        ),
        (
            vec![
                "--nbd-tls",
                "require",
                "--nbd-tls-cert",
                &missing,
                "--nbd-tls-key",
                &key,
            ],
            "missing.pem",
        ),
        (
            vec![
                "--nbd-tls",
                "require",
                "--nbd-tls-cert",
                &cert,
                "--nbd-tls-key",
                &cert,
            ],
            "--nbd-tls-key",
        ),
        (
            vec![
                "--nbd-tls",
                "require",
                "--nbd-tls-cert",
                &cert,
                "--nbd-tls-key",
                &key,
                "--nbd-tls-client-ca",
                &missing,
            ],
            "--nbd-tls-client-ca",
        ),
        (vec!["--nbd-tls", "maybe"], "maybe"),
    ];
    for (flags, names) in cases {
        let mut args = quiet_args();
        args.extend(["--nbd-addr".into(), "127.0.0.1:0".into()]);
        args.extend(["--grpc-addr".into(), "127.0.0.1:0".into()]);
        args.extend(["--metrics-addr".into(), "127.0.0.1:0".into()]);
        args.extend(flags.iter().map(|s| s.to_string()));
        let (out, _) = run_daemon_to_exit(&args, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("io-engine:"))
            .collect();
        assert_eq!(lines.len(), 1, "{flags:?}: {stderr}");
        assert!(lines[0].contains(names), "{flags:?}: {stderr}");
    }
}
