//! One daemon per Unix socket (issue 17, point 5), with the real daemon:
//! a second daemon on the `--nbd-socket` of a live one exits 2 naming the
//! socket and leaves the first serving; a stale socket file is replaced;
//! at shutdown the daemon removes the socket file only if it is still the
//! one it bound.
//!
//! Everything listens on 127.0.0.1 or in a temporary directory; every
//! daemon is killed when the test ends.

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use io_engine_tests::daemon::{Daemon, quiet_args, run_daemon_to_exit};
use io_engine_tests::tools::TempDir;

/// The first bytes an NBD server sends on a new connection.
const NBD_MAGIC: &[u8; 8] = b"NBDMAGIC";

/// Reads the NBD server's greeting on the Unix socket `path`.
fn greets(path: &Path) -> bool {
    let Ok(mut s) = UnixStream::connect(path) else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    let mut magic = [0u8; 8];
    s.read_exact(&mut magic).is_ok() && &magic == NBD_MAGIC
}

/// A daemon's full command line on `--nbd-socket sock` with ports of its own.
fn second_daemon_args(sock: &str) -> Vec<String> {
    let mut args = quiet_args();
    for a in [
        "--grpc-addr",
        "127.0.0.1:0",
        "--metrics-addr",
        "127.0.0.1:0",
        "--nbd-addr",
        "127.0.0.1:0",
        "--nvmf-addr",
        "127.0.0.1:0",
        "--nbd-socket",
        sock,
    ] {
        args.push(a.into());
    }
    args
}

#[test]
fn a_live_daemons_socket_is_refused_and_left_serving() {
    let dir = TempDir::new("socket-live");
    let sock = dir.path().join("nbd.sock");
    let sock_s = sock.to_str().expect("a UTF-8 path");
    let mut first = Daemon::start_quiet(["--nbd-socket", sock_s]);
    assert!(greets(&sock), "the first daemon serves NBD on its socket");

    let args = second_daemon_args(sock_s);
    let (out, _) = run_daemon_to_exit(&args, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(sock_s) && stderr.contains("another process is listening"),
        "the refusal names the socket: {stderr}"
    );
    assert!(greets(&sock), "the first daemon's socket is untouched");
    assert!(first.is_running());

    let (status, _) = first.terminate();
    assert_eq!(status.code(), Some(0), "{}", first.stderr());
    assert!(!sock.exists(), "removed by the daemon that bound it");
}

#[test]
fn a_stale_socket_is_replaced_and_anothers_socket_is_not_removed() {
    let dir = TempDir::new("socket-stale");
    let sock = dir.path().join("nbd.sock");
    let sock_s = sock.to_str().expect("a UTF-8 path");
    // What a killed daemon leaves: a socket file nothing listens on.
    drop(UnixListener::bind(&sock).expect("a socket"));
    assert!(sock.exists() && !greets(&sock));
    let mut d = Daemon::start_quiet(["--nbd-socket", sock_s]);
    assert!(greets(&sock), "the stale file was replaced");

    // Someone else's socket at the path by the time the daemon stops.
    std::fs::remove_file(&sock).expect("remove");
    let other = UnixListener::bind(&sock).expect("another socket");
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0), "{}", d.stderr());
    assert!(sock.exists(), "the other socket is left in place");
    drop(other);

    // Anything but a socket is refused, not removed.
    std::fs::remove_file(&sock).expect("remove");
    std::fs::write(&sock, b"notes").expect("a file");
    let args = second_daemon_args(sock_s);
    let (out, _) = run_daemon_to_exit(&args, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not a socket"), "{stderr}");
    assert_eq!(std::fs::read(&sock).expect("the file"), b"notes");
}
