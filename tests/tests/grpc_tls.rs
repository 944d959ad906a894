//! gRPC over TLS with real clients: the daemon with a certificate, a key
//! and a client CA (mutual TLS), a Python grpcio client (stubs from
//! `proto/`) and `io-engine-ctl` over https; the refusals (no client
//! certificate, another CA's, the server checked against the wrong CA, a
//! plaintext client); and the start-up rules: plaintext gRPC only on
//! loopback, TLS files checked with errors naming the file, by the daemon
//! and by `io-engine-ctl` (with the option that named it); a renewed
//! certificate served without a restart.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use io_engine_tests::certs::TestPki;
use io_engine_tests::daemon::{
    CTL_TIMEOUT, Daemon, clean_command, ctl_bin, quiet_args, run_daemon_to_exit,
};
use io_engine_tests::grpcio::{PythonGrpc, scripts_dir};
use io_engine_tests::output_with_timeout;
use io_engine_tests::tools::TempDir;

/// Starts a daemon serving gRPC over TLS, requiring client certificates of
/// the PKI's CA.
fn mtls_daemon(pki: &TestPki) -> Daemon {
    let mut args = quiet_args();
    for (flag, path) in [
        ("--grpc-tls-cert", &pki.server_cert),
        ("--grpc-tls-key", &pki.server_key),
        ("--grpc-tls-client-ca", &pki.ca),
    ] {
        args.push(flag.into());
        args.push(path.display().to_string());
    }
    Daemon::start(args)
}

/// Runs the Python client against `addr` with `args` after the address;
/// returns its JSON line and exit status.
fn python(grpc: &PythonGrpc, addr: &str, args: &[&Path]) -> (serde_json::Value, Option<i32>) {
    let script = scripts_dir().join("grpc_tls_client.py");
    let mut all: Vec<&std::ffi::OsStr> = vec![addr.as_ref()];
    all.extend(args.iter().map(|p| p.as_os_str()));
    let out = grpc.run_file(script, all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let json = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "the Python client printed no JSON ({e}; {}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (json, out.status.code())
}

/// `io-engine-ctl --endpoint URL ARGS` without the test's IO_ENGINE_*
/// variables.
fn ctl(url: &str, args: &[&str]) -> Output {
    let mut cmd = clean_command(ctl_bin());
    cmd.arg("--endpoint").arg(url).args(args);
    output_with_timeout(cmd, CTL_TIMEOUT)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

#[test]
fn mutual_tls_serves_clients_of_the_ca_and_refuses_the_rest() {
    let dir = TempDir::new("grpc-tls");
    let pki = TestPki::create(dir.path()).expect("create the test PKI");
    let daemon = mtls_daemon(&pki);
    let addr = daemon.grpc_addr().to_string();
    let grpc = PythonGrpc::new();

    // Served: the engine's API, health and reflection on the one TLS port.
    let (served, code) = python(&grpc, &addr, &[&pki.ca, &pki.client_cert, &pki.client_key]);
    assert_eq!(code, Some(0), "{served}");
    assert!(
        served["version"].as_str().is_some_and(|v| !v.is_empty()),
        "{served}"
    );
    assert_eq!(served["health"], "SERVING", "{served}");
    let services: Vec<&str> = served["services"]
        .as_array()
        .unwrap_or_else(|| panic!("no services in {served}"))
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    for name in [
        "io_engine.v1.EngineService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    ] {
        assert!(services.contains(&name), "{name} not in {services:?}");
    }

    // Refused: no client certificate, another CA's, a server checked
    // against the wrong CA, no TLS at all.
    let refusals: [(&str, Vec<&Path>); 4] = [
        ("no client certificate", vec![&pki.ca]),
        (
            "the other CA's client certificate",
            vec![&pki.ca, &pki.other_client_cert, &pki.other_client_key],
        ),
        (
            "the server checked against the other CA",
            vec![&pki.other_ca, &pki.client_cert, &pki.client_key],
        ),
        ("plaintext", vec![Path::new("plaintext")]),
    ];
    for (case, args) in refusals {
        let (refused, code) = python(&grpc, &addr, &args);
        assert_eq!(code, Some(3), "{case}: {refused}");
        assert_eq!(refused["error"], "UNAVAILABLE", "{case}: {refused}");
        assert!(refused.get("version").is_none(), "{case}: {refused}");
    }
    // The plaintext client is told why, by the engine, in plaintext HTTP/2.
    let (plain, _) = python(&grpc, &addr, &[Path::new("plaintext")]);
    let details = plain["details"].as_str().unwrap_or_default();
    for words in [
        "this engine serves gRPC over TLS only",
        "https://",
        "--tls-ca",
        "--tls-cert",
    ] {
        assert!(details.contains(words), "{words}: {plain}");
    }

    // io-engine-ctl over mTLS.
    let url = format!("https://{addr}");
    let tls = [
        "--tls-ca",
        path(&pki.ca),
        "--tls-cert",
        path(&pki.client_cert),
        "--tls-key",
        path(&pki.client_key),
    ];
    let mut args = tls.to_vec();
    args.extend(["engine", "info", "--output", "json"]);
    let out = ctl(&url, &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ctl over mTLS: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(info["version"], served["version"]);

    // Without a client certificate, or with another CA's: exit 1, one line
    // that says what to fix.
    let other = [
        "--tls-cert",
        path(&pki.other_client_cert),
        "--tls-key",
        path(&pki.other_client_key),
    ];
    for (extra, fix) in [
        (&[][..], "give --tls-cert and --tls-key"),
        (&other[..], "it refused the client certificate"),
    ] {
        let mut args = vec!["--tls-ca", path(&pki.ca)];
        args.extend(extra);
        args.extend(["engine", "info"]);
        let out = ctl(&url, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!(
                "io-engine-ctl: error: cannot talk TLS to the engine at {url}: "
            )) && stderr.contains(fix),
            "{fix}: {stderr}"
        );
    }

    // The engine checked against the wrong CA.
    let out = ctl(&url, &["--tls-ca", path(&pki.other_ca), "engine", "info"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not signed by --tls-ca"), "{stderr}");

    // http:// to the TLS port: one line with the fix.
    let out = ctl(&format!("http://{addr}"), &["engine", "info"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "io-engine-ctl: error: the engine at http://{addr} serves gRPC over TLS only: \
             use --endpoint https://{addr} with --tls-ca FILE"
        )),
        "{stderr}"
    );

    // TLS clients are still served after all that.
    let out = ctl(&url, &[&tls[..], &["engine", "info"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reads `s` until EOF or an error (a reset): whether that came within
/// `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        let _ = s.set_read_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ));
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false;
            }
            Err(_) => return true,
        }
    }
    false
}

/// What is not a TLS client on the TLS port is closed, in bounded time,
/// without hurting the engine: bytes that are neither TLS nor HTTP/2, an
/// HTTP/2 preface followed by garbage, a plaintext peer that sends the
/// preface and then nothing (closed after the plaintext timeout, 2 s, not
/// the TLS handshake's 10 s); more plaintext peers at once than the engine
/// answers are closed at once.
#[test]
fn what_is_not_tls_is_closed_in_bounded_time() {
    let dir = TempDir::new("grpc-tls-hostile");
    let pki = TestPki::create(dir.path()).expect("create the test PKI");
    let mut args = quiet_args();
    for (flag, value) in [
        ("--grpc-tls-cert", path(&pki.server_cert)),
        ("--grpc-tls-key", path(&pki.server_key)),
        ("--grpc-max-concurrent-requests", "2"),
    ] {
        args.push(flag.into());
        args.push(value.into());
    }
    let daemon = Daemon::start(args);
    let addr = daemon.grpc_addr();
    let connect = || TcpStream::connect(addr).expect("connect");
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    let mut http1 = connect();
    http1
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    assert!(
        closed_within(&mut http1, Duration::from_secs(1)),
        "HTTP/1.1"
    );

    let mut garbage = connect();
    garbage.write_all(PREFACE).expect("write");
    // A frame header claiming 16 MiB of an unknown type, then noise.
    garbage
        .write_all(&[0xff, 0xff, 0xff, 0x42, 0xff, 0x7f, 0xff, 0xff, 0xff])
        .expect("write");
    garbage.write_all(&[0xa5; 512]).expect("write");
    assert!(
        closed_within(&mut garbage, Duration::from_secs(3)),
        "preface and garbage"
    );

    // Two silent plaintext peers take both places; a third is closed at
    // once; the two go at the plaintext timeout.
    let started = Instant::now();
    let mut silent: Vec<TcpStream> = (0..2).map(|_| connect()).collect();
    for s in &mut silent {
        s.write_all(PREFACE).expect("write");
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut third = connect();
    third.write_all(PREFACE).expect("write");
    assert!(
        closed_within(&mut third, Duration::from_millis(500)),
        "over the bound"
    );
    for s in &mut silent {
        assert!(
            closed_within(s, Duration::from_secs(4)),
            "a silent plaintext peer"
        );
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(5),
        "{took:?}"
    );

    // The engine still serves TLS clients.
    let out = ctl(
        &format!("https://{addr}"),
        &["--tls-ca", path(&pki.ca), "engine", "info"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The engine's bound on TLS handshakes in progress
/// (`control::tls_incoming::MAX_HANDSHAKES`).
const MAX_HANDSHAKES: usize = 256;

#[test]
fn a_flood_of_silent_connections_is_bounded_and_keeps_no_client_out() {
    let dir = TempDir::new("grpc-tls-flood");
    let pki = TestPki::create(dir.path()).expect("create the test PKI");
    let mut args = quiet_args();
    for (flag, value) in [
        ("--grpc-tls-cert", path(&pki.server_cert)),
        ("--grpc-tls-key", path(&pki.server_key)),
    ] {
        args.push(flag.into());
        args.push(value.into());
    }
    let daemon = Daemon::start(args);
    let addr = daemon.grpc_addr();
    let connect = || TcpStream::connect(addr).expect("connect");

    // The first silent connection (a ClientHello's first byte, then
    // nothing), then as many more as the bound: the first is closed long
    // before the 10 s handshake timeout, as the newcomers take its place.
    let mut first = connect();
    first.write_all(&[0x16]).expect("write");
    std::thread::sleep(Duration::from_millis(200));
    let mut flood: Vec<TcpStream> = (0..MAX_HANDSHAKES)
        .map(|_| {
            let mut s = connect();
            s.write_all(&[0x16]).expect("write");
            s
        })
        .collect();
    assert!(
        closed_within(&mut first, Duration::from_secs(3)),
        "the oldest handshake gives way to newcomers"
    );
    // The newest of the flood is still waiting for its handshake.
    let newest = flood.last_mut().expect("the flood");
    newest
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    assert!(
        matches!(newest.read(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock
            || e.kind() == ErrorKind::TimedOut),
        "a handshake within the bound stays open"
    );

    // A real client, with the flood still open, is heard.
    let out = ctl(
        &format!("https://{addr}"),
        &["--tls-ca", path(&pki.ca), "engine", "info"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(flood);
}

#[test]
fn plaintext_grpc_needs_loopback_or_grpc_insecure() {
    let cpu = quiet_args()[3].clone();
    let (out, _) = run_daemon_to_exit(
        [
            "-l",
            &cpu,
            "--grpc-addr",
            "0.0.0.0:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for word in [
        "0.0.0.0:0",
        "not a loopback address",
        "--grpc-tls-cert",
        "--grpc-insecure",
    ] {
        assert!(stderr.contains(word), "{word}: {stderr}");
    }
    // --grpc-insecure and a certificate contradict each other.
    let (out, _) = run_daemon_to_exit(
        [
            "-l",
            &cpu,
            "--grpc-insecure",
            "--grpc-tls-cert",
            "a",
            "--grpc-tls-key",
            "b",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bad_tls_files_are_named_at_start() {
    let dir = TempDir::new("grpc-tls-files");
    let pki = TestPki::create(dir.path()).expect("create the test PKI");
    let not_pem = dir.write("not-pem.crt", "not a certificate\n");
    let missing = dir.path().join("missing.crt");
    let cpu = quiet_args()[3].clone();
    let cases: [(&Path, &Path, &str); 4] = [
        (&missing, &pki.server_key, "missing.crt: cannot read"),
        (&not_pem, &pki.server_key, "not-pem.crt: no PEM certificate"),
        (
            &pki.server_cert,
            &not_pem,
            "not-pem.crt: no PEM private key",
        ),
        (
            &pki.server_cert,
            &pki.client_key,
            "client.key: this key does not match the certificate in",
        ),
    ];
    for (cert, key, expected) in cases {
        let (out, _) = run_daemon_to_exit(
            [
                "-l",
                &cpu,
                "--grpc-addr",
                "127.0.0.1:0",
                "--grpc-tls-cert",
                path(cert),
                "--grpc-tls-key",
                path(key),
            ],
            &[],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{expected}: {stderr}");
        assert!(
            stderr.starts_with("io-engine: error: gRPC TLS: ") && stderr.contains(expected),
            "{expected}: {stderr}"
        );
    }
    // A certificate without its key is a usage error.
    let (out, _) = run_daemon_to_exit(["-l", &cpu, "--grpc-tls-cert", path(&pki.server_cert)], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--grpc-tls-key"));
}

#[test]
fn ctl_names_a_bad_tls_file_before_connecting() {
    let dir = TempDir::new("grpc-tls-ctl-files");
    let pki = TestPki::create(dir.path()).expect("create the test PKI");
    let missing = dir.path().join("missing.crt");
    // Nothing listens there: the files are checked before connecting.
    let url = "https://127.0.0.1:1";
    let cases: [(Vec<&str>, String); 2] = [
        (
            vec!["--tls-ca", path(&missing)],
            format!("--tls-ca {}: cannot read: ", missing.display()),
        ),
        (
            vec![
                "--tls-ca",
                path(&pki.ca),
                "--tls-cert",
                path(&pki.client_cert),
                "--tls-key",
                path(&pki.other_client_key),
            ],
            format!(
                "--tls-key {}: this key does not match the certificate in {}",
                pki.other_client_key.display(),
                pki.client_cert.display()
            ),
        ),
    ];
    for (mut args, expected) in cases {
        args.extend(["engine", "info"]);
        let out = ctl(url, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("io-engine-ctl: error: {expected}")),
            "{expected}: {stderr}"
        );
    }
}

/// A renewed certificate and key (rewritten in place, as cert-manager
/// renews a mounted Secret) are served to new connections without a
/// restart; a half-written pair is not: the last good one stays.
#[test]
fn a_renewed_certificate_is_served_without_a_restart() {
    let dir = TempDir::new("grpc-tls-renew");
    let old = TestPki::create(&dir.path().join("old")).expect("the first PKI");
    let new = TestPki::create(&dir.path().join("new")).expect("the renewed PKI");
    let live = dir.path().join("live");
    std::fs::create_dir_all(&live).unwrap();
    let (cert, key) = (live.join("tls.crt"), live.join("tls.key"));
    // A new file renamed over the old, as a Secret volume's update is.
    let put = |from: &Path, to: &Path| {
        let tmp = to.with_extension("tmp");
        std::fs::copy(from, &tmp).unwrap();
        std::fs::rename(&tmp, to).unwrap();
    };
    put(&old.server_cert, &cert);
    put(&old.server_key, &key);
    let mut args = quiet_args();
    for (flag, p) in [("--grpc-tls-cert", &cert), ("--grpc-tls-key", &key)] {
        args.push(flag.into());
        args.push(p.display().to_string());
    }
    let daemon = Daemon::start(args);
    let url = format!("https://{}", daemon.grpc_addr());
    let served_for = |ca: &Path| ctl(&url, &["--tls-ca", path(ca), "engine", "info"]);
    assert!(
        served_for(&old.ca).status.success(),
        "the first certificate"
    );
    assert!(!served_for(&new.ca).status.success());

    put(&new.server_cert, &cert);
    put(&new.server_key, &key);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !served_for(&new.ca).status.success() {
        assert!(
            Instant::now() < deadline,
            "the renewed certificate is not served"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = served_for(&old.ca);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not signed by --tls-ca"), "{stderr}");

    // A key that is not the certificate's: still the renewed pair.
    put(&old.server_key, &key);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(served_for(&new.ca).status.success(), "the last good pair");
}
