//! Slowloris: sockets that connect and never finish their handshake must
//! not lock real clients out (issue 17 point 4). Against the release
//! daemon on 127.0.0.1: 500 sockets opened and left silent and 100 that
//! stall mid-handshake, while a real client (qemu-io over NBD; the test
//! library's NVMe/TCP host) connects, writes and reads back within 1 s,
//! several times; after the deadline every one of those sockets sees EOF
//! and the handshake gauges are back to 0, and the flood logged a few
//! lines, not hundreds.
//!
//! The test process raises its open-file limit (soft to hard); the daemon
//! raises its own at start.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use io_engine_tests::daemon::Daemon;
use io_engine_tests::http;
use io_engine_tests::nvmf::{Host, Sqe, nqn_of};
use io_engine_tests::output_with_timeout;

const SILENT: usize = 500;
const STALLED: usize = 100;
/// What a real client may take for each round of connect, write, read.
const CLIENT_BUDGET: Duration = Duration::from_secs(1);

/// Raises this process's soft open-file limit to the hard one: 600
/// sockets and the clients' own descriptors.
fn raise_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut l = getrlimit(Resource::Nofile);
    if l.current < l.maximum || l.maximum.is_none() {
        l.current = l.maximum.or(Some(1 << 16));
        let _ = setrlimit(Resource::Nofile, l);
    }
    let now = getrlimit(Resource::Nofile).current;
    assert!(
        now.is_none_or(|n| n >= 2048),
        "the test needs 2048 open files, has {now:?}"
    );
}

fn silent_sockets(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|i| {
            TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                .unwrap_or_else(|e| panic!("silent socket {i}: {e}"))
        })
        .collect()
}

/// Whether the server closed `s` (EOF or a reset) within `timeout`,
/// reading away what it sent before.
fn sees_eof(s: &mut TcpStream, timeout: Duration) -> bool {
    let end = Instant::now() + timeout;
    let mut b = [0u8; 4096];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false;
            }
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// Asserts that each of `socks` (`what` they are) sees EOF by `deadline`
/// after `t0`.
fn all_closed_by<'a>(
    what: &str,
    socks: impl IntoIterator<Item = &'a mut TcpStream>,
    t0: Instant,
    deadline: Duration,
) {
    for (i, s) in socks.into_iter().enumerate() {
        let left = deadline
            .saturating_sub(t0.elapsed())
            .max(Duration::from_millis(100));
        assert!(sees_eof(s, left), "{what} socket {i} still open");
    }
}

fn scrape(d: &Daemon) -> String {
    http::get(&d.metrics_url()).unwrap().text()
}

fn eventually(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < end, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Log lines that contain `text`.
fn lines_with(d: &Daemon, text: &str) -> usize {
    d.stderr().lines().filter(|l| l.contains(text)).count()
}

/// NBD: 4 MiB device, a 3 s handshake deadline, the default 128 handshakes.
#[test]
fn silent_and_stalled_nbd_sockets_lock_no_client_out_and_go_at_the_deadline() {
    raise_fd_limit();
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///m0?size_mb=4",
        "--share",
        "m0",
        "--nbd-handshake-timeout",
        "3",
    ]);
    let addr = d.nbd_addr();
    let t0 = Instant::now();
    let mut silent = silent_sockets(addr, SILENT);
    // Stalled: the greeting read, the client flags sent (fixed newstyle,
    // no zeroes) and half an option header (IHAVEOPT and the option, no
    // length), then nothing.
    let mut stalled: Vec<TcpStream> = (0..STALLED)
        .map(|i| {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut greeting = [0u8; 18];
            s.read_exact(&mut greeting)
                .unwrap_or_else(|e| panic!("stalled socket {i}'s greeting: {e}"));
            assert_eq!(&greeting[..8], b"NBDMAGIC");
            s.write_all(&3u32.to_be_bytes()).unwrap();
            s.write_all(&0x4948_4156_454F_5054u64.to_be_bytes())
                .unwrap();
            s.write_all(&7u32.to_be_bytes()).unwrap();
            s
        })
        .collect();
    let flooded = t0.elapsed();
    eprintln!("NBD flood of {} sockets in {flooded:?}", SILENT + STALLED);
    let handshakes = http::sample(&scrape(&d), "io_engine_nbd_handshakes");
    assert!(handshakes <= 128.0, "{handshakes} handshakes");

    // A real client, several times: each connect, write and verified read
    // within the budget.
    let uri = d.nbd_uri("m0");
    for round in 0..5u32 {
        let pattern = format!("{}", 0x10 + round);
        let offset = format!("{}k", 64 * round);
        let started = Instant::now();
        let mut cmd = Command::new("qemu-io");
        cmd.args(["-f", "raw"])
            .args(["-c", &format!("write -P {pattern} {offset} 64k")])
            .args(["-c", &format!("read -P {pattern} {offset} 64k")])
            .arg(&uri);
        let out = output_with_timeout(cmd, Duration::from_secs(10));
        let took = started.elapsed();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && !said.contains("Pattern verification failed"),
            "qemu-io round {round}: {out:?}"
        );
        assert!(took < CLIENT_BUDGET, "qemu-io round {round} took {took:?}");
    }

    // After the deadline every one of them is closed.
    let deadline = Duration::from_secs(3) + flooded + Duration::from_secs(3);
    all_closed_by("silent", &mut silent, t0, deadline);
    all_closed_by("stalled", &mut stalled, t0, deadline);
    eventually(
        "the handshake gauge back to 0",
        Duration::from_secs(2),
        || http::sample(&scrape(&d), "io_engine_nbd_handshakes") == 0.0,
    );
    let m = scrape(&d);
    assert_eq!(http::sample(&m, "io_engine_nbd_sessions"), 0.0);
    let made_room = http::sample(&m, "io_engine_nbd_refused_total{reason=\"handshakes\"}");
    let timed_out = http::sample(
        &m,
        "io_engine_nbd_refused_total{reason=\"handshake_timeout\"}",
    );
    assert!(made_room > 0.0 && timed_out > 0.0, "{m}");
    assert_eq!(
        made_room + timed_out,
        (SILENT + STALLED) as f64,
        "each flood socket closed once, no client among them"
    );
    assert_eq!(
        http::sample(&m, "io_engine_nbd_refused_total{reason=\"connections\"}"),
        0.0
    );
    // Hundreds closed, a few lines: one per reason per 10 s.
    let room_lines = lines_with(&d, "to make room");
    let deadline_lines = lines_with(&d, "not in transmission within");
    assert!(
        (1..=3).contains(&room_lines) && (1..=3).contains(&deadline_lines),
        "{room_lines} and {deadline_lines} lines for {made_room} and {timed_out} closes"
    );
    assert!(d.stderr().contains("unlogged"), "the lines carry the count");
}

/// The NVMe/TCP host's round: an admin queue and an I/O queue, a write
/// and a read back of 8 KiB at block `slba`.
fn nvmf_round(addr: SocketAddr, slba: u64, seed: u8) {
    let (_admin, mut io, _) = Host::pair(addr, &nqn_of("m0"), 31);
    let data: Vec<u8> = (0..8192)
        .map(|i| (i as u8).wrapping_mul(7) ^ seed)
        .collect();
    let (cqe, _) = io.exec(Sqe::rw(0x01, 1, slba, 2), &data, &[]).unwrap();
    assert_eq!(cqe.status(), 0, "write");
    let read = Sqe::rw(0x02, 1, slba, 2).with_bytes(32, &8192u32.to_le_bytes());
    let (cqe, got) = io.exec(read, &[], &[]).unwrap();
    assert_eq!(cqe.status(), 0, "read");
    assert!(got == data, "the data read back is the data written");
}

/// NVMe/TCP: the default 128 connecting per listener, its 10 s deadline.
#[test]
fn silent_and_stalled_nvmf_sockets_lock_no_host_out_and_go_at_the_deadline() {
    raise_fd_limit();
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///m0?size_mb=4&blk_size=4096",
        "--share",
        "m0:nvmf",
    ]);
    let addr = d.nvmf_addr();
    let t0 = Instant::now();
    let mut silent = silent_sockets(addr, SILENT);
    // Stalled: ICReq answered, then no Connect.
    let mut stalled: Vec<Host> = (0..STALLED)
        .map(|i| {
            let mut h = Host::tcp(addr).unwrap();
            let resp = h
                .ic(false, false)
                .unwrap_or_else(|e| panic!("stalled {i}: {e}"));
            assert_eq!(resp.kind, 0x01, "an ICResp");
            h
        })
        .collect();
    let flooded = t0.elapsed();
    for round in 0..5u8 {
        let started = Instant::now();
        nvmf_round(addr, 2 * round as u64, round);
        let took = started.elapsed();
        assert!(took < CLIENT_BUDGET, "NVMe/TCP round {round} took {took:?}");
    }
    let deadline = Duration::from_secs(10) + flooded + Duration::from_secs(3);
    all_closed_by("silent", &mut silent, t0, deadline);
    all_closed_by(
        "stalled",
        stalled.iter_mut().map(|h| &mut h.sock),
        t0,
        deadline,
    );
    let m = scrape(&d);
    let made_room = http::sample(&m, "io_engine_nvmf_refused_total{reason=\"connecting\"}");
    assert!(made_room > 0.0, "{m}");
    assert_eq!(
        http::sample(&m, "io_engine_nvmf_refused_total{reason=\"connections\"}"),
        0.0
    );
    // The hosts' queues were closed when they dropped: nothing is left.
    eventually(
        "the connections gauge back to 0",
        Duration::from_secs(2),
        || http::sample(&scrape(&d), "io_engine_nvmf_connections") == 0.0,
    );
    let room_lines = lines_with(&d, "closed to make room");
    let deadline_lines = lines_with(&d, "no Connect within");
    assert!(
        (1..=3).contains(&room_lines) && (1..=3).contains(&deadline_lines),
        "{room_lines} and {deadline_lines} lines for {made_room} evictions and the deadline closes"
    );
}
