//! End-to-end tests of the daemon's NBD server: the release `io-engine`
//! sharing devices on 127.0.0.1 (kernel-chosen port) and on a Unix socket
//! in a temporary directory, driven by real clients (`nbdinfo`, `nbdcopy`
//! from libnbd, `qemu-img`, `fio`'s nbd engine) and by a tiny hand-written
//! client that speaks the protocol byte by byte to send what real clients
//! never do.
//!
//! Every test starts its own daemon (adaptive polling on one core unless it
//! needs two) and [`Daemon`] kills it when the test ends, passed or failed;
//! every child process is killed on drop too. Every wait is bounded: tool
//! runs by a timeout, sockets by read and write timeouts, polled conditions
//! by a deadline.

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use io_engine_api::v1 as pb;
use io_engine_tests::backing::random_bytes;
use io_engine_tests::daemon::Daemon;
use io_engine_tests::{available_cpus, http, output_with_timeout, u};
use pb::export_service_client::ExportServiceClient;
use pb::stats_service_client::StatsServiceClient;
use serde_json::Value;
use tonic::transport::Channel;

/// Longest one run of a client tool may take.
const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// Read and write timeout of the hand-written client's socket: an answer
/// that does not come within this is a hang.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest wait for a condition polled over gRPC or the log.
const POLL_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest READ or WRITE payload the server advertises and accepts.
const MAX_PAYLOAD: u32 = 32 << 20;

// Wire constants (doc/proto.md of the NBD project).
const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
const REQUEST_MAGIC: u32 = 0x2560_9513;
const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

const FLAG_FIXED_NEWSTYLE: u16 = 1;
const FLAG_NO_ZEROES: u16 = 2;
const FLAG_C_FIXED_NEWSTYLE: u32 = 1;
const FLAG_C_NO_ZEROES: u32 = 2;

const TFLAG_HAS_FLAGS: u16 = 1 << 0;
const TFLAG_READ_ONLY: u16 = 1 << 1;
const TFLAG_CAN_MULTI_CONN: u16 = 1 << 8;

const OPT_EXPORT_NAME: u32 = 1;
const OPT_ABORT: u32 = 2;
const OPT_LIST: u32 = 3;
const OPT_STARTTLS: u32 = 5;
const OPT_INFO: u32 = 6;
const OPT_GO: u32 = 7;
const OPT_STRUCTURED_REPLY: u32 = 8;
const OPT_SET_META_CONTEXT: u32 = 10;

const REP_ACK: u32 = 1;
const REP_SERVER: u32 = 2;
const REP_INFO: u32 = 3;
const REP_META_CONTEXT: u32 = 4;
const REP_ERR_UNSUP: u32 = (1 << 31) | 1;
const REP_ERR_POLICY: u32 = (1 << 31) | 2;
const REP_ERR_UNKNOWN: u32 = (1 << 31) | 6;

const INFO_EXPORT: u16 = 0;
const INFO_BLOCK_SIZE: u16 = 3;

const CMD_READ: u16 = 0;
const CMD_WRITE: u16 = 1;
const CMD_DISC: u16 = 2;
const CMD_FLUSH: u16 = 3;
const CMD_TRIM: u16 = 4;
const CMD_BLOCK_STATUS: u16 = 7;
const CMD_FLAG_FUA: u16 = 1 << 0;

const REPLY_TYPE_OFFSET_DATA: u16 = 1;
const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
const REPLY_FLAG_DONE: u16 = 1;

const EPERM: u32 = 1;
const EINVAL: u32 = 22;
const ENOSPC: u32 = 28;
const ESHUTDOWN: u32 = 108;

// ---------------------------------------------------------------------------
// Helpers: files, data, tools, gRPC
// ---------------------------------------------------------------------------

/// A directory removed, with its contents, when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!(
            "io-engine-nbd-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir(path)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process killed (and reaped) when dropped.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn read_file(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn write_file(path: &Path, data: &[u8]) {
    std::fs::write(path, data).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// Asserts two large buffers are equal without printing them.
fn assert_same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "{what}: first difference at byte {i} ({:#04x}, want {:#04x})",
            got[i], want[i]
        );
    }
}

/// Runs `program args` (at most [`TOOL_TIMEOUT`]) and returns its output.
fn tool(program: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args);
    output_with_timeout(cmd, TOOL_TIMEOUT)
}

/// [`tool`] that must succeed; returns its stdout.
fn tool_ok(program: &str, args: &[&str]) -> String {
    let out = tool(program, args);
    assert!(
        out.status.success(),
        "`{program} {}` failed ({})\n--- stdout ---\n{}\n--- stderr ---\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The JSON document in `text`, which may start with other lines (fio
/// prints "fio: connected to NBD server" first).
fn json_in(text: &str) -> Value {
    let start = text
        .find(['{', '['])
        .unwrap_or_else(|| panic!("no JSON in:\n{text}"));
    serde_json::from_str(&text[start..]).unwrap_or_else(|e| panic!("bad JSON ({e}):\n{text}"))
}

/// Polls `cond` every 10 ms until it holds; panics with `what` after
/// [`POLL_TIMEOUT`].
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + POLL_TIMEOUT;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "{what}: not true within {POLL_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The daemon's flags: `--bdev` for each of `bdevs`, then `--share` for each
/// of `shares`, then `extra`.
fn engine_args(bdevs: &[&str], shares: &[&str], extra: &[&str]) -> Vec<String> {
    let mut args = Vec::new();
    for b in bdevs {
        args.extend(["--bdev".to_string(), (*b).to_string()]);
    }
    for s in shares {
        args.extend(["--share".to_string(), (*s).to_string()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// A daemon on one core (adaptive polling) with these devices and shares.
fn start(bdevs: &[&str], shares: &[&str], extra: &[&str]) -> Daemon {
    Daemon::start_quiet(engine_args(bdevs, shares, extra))
}

/// Blocking gRPC calls to a daemon, on a runtime of their own (the tests
/// themselves are plain threads that block on sockets and processes).
struct Grpc {
    rt: tokio::runtime::Runtime,
    stats: StatsServiceClient<Channel>,
    exports: ExportServiceClient<Channel>,
}

impl Grpc {
    fn new(d: &Daemon) -> Grpc {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let ch = rt.block_on(d.channel());
        Grpc {
            rt,
            stats: StatsServiceClient::new(ch.clone()),
            exports: ExportServiceClient::new(ch),
        }
    }

    /// The IO counters of device `name`.
    fn io_stats(&self, name: &str) -> pb::BdevIoStats {
        let mut c = self.stats.clone();
        let req = pb::GetIoStatsRequest {
            name: Some(name.into()),
        };
        let resp = self
            .rt
            .block_on(c.get_io_stats(req))
            .unwrap_or_else(|s| panic!("GetIoStats {name}: {s:?}"))
            .into_inner();
        resp.stats
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no IO stats for {name}"))
    }

    /// The IO object pool.
    fn io_pool(&self) -> pb::PoolStats {
        let mut c = self.stats.clone();
        let resp = self
            .rt
            .block_on(c.get_pool_stats(pb::GetPoolStatsRequest {}))
            .unwrap_or_else(|s| panic!("GetPoolStats: {s:?}"))
            .into_inner();
        resp.pools
            .into_iter()
            .find(|p| p.name == "bdev_io")
            .expect("the bdev_io pool")
    }

    /// Busy time of each reactor, by core.
    fn reactor_busy_ns(&self) -> Vec<u64> {
        let mut c = self.stats.clone();
        let resp = self
            .rt
            .block_on(c.get_reactor_stats(pb::GetReactorStatsRequest {}))
            .unwrap_or_else(|s| panic!("GetReactorStats: {s:?}"))
            .into_inner();
        let mut r = resp.reactors;
        r.sort_by_key(|r| r.core);
        r.iter().map(|r| r.busy_ns).collect()
    }

    /// Every export, by name.
    fn exports(&self) -> Vec<pb::Export> {
        let mut c = self.exports.clone();
        self.rt
            .block_on(c.list(pb::ListExportsRequest {}))
            .unwrap_or_else(|s| panic!("ExportService.List: {s:?}"))
            .into_inner()
            .exports
    }

    /// Connections attached to export `name` now.
    fn connections(&self, name: &str) -> u32 {
        self.exports()
            .into_iter()
            .find(|e| e.bdev == name)
            .unwrap_or_else(|| panic!("{name} is not shared"))
            .connections
    }

    /// Waits until nothing is in flight on `name` and no IO object is in use.
    fn wait_idle(&self, name: &str) {
        eventually(
            &format!("{name} idle: in_flight 0, IO pool in_use 0"),
            || self.io_stats(name).in_flight == 0 && self.io_pool().in_use == 0,
        );
    }
}

/// The value of the metric line that starts with `name{` and has every one
/// of `labels` (`key="value"`), or 0 when there is none.
fn metric(d: &Daemon, name: &str, labels: &[&str]) -> f64 {
    let text = http::get(&d.metrics_url())
        .unwrap_or_else(|e| panic!("GET /metrics: {e}"))
        .text();
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| labels.iter().all(|lab| l.contains(lab)))
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0.0, |v| v.parse().unwrap_or(0.0))
}

// ---------------------------------------------------------------------------
// A hand-written NBD client
// ---------------------------------------------------------------------------

/// A request that must fail: what it is, flags, type, offset, length,
/// payload, the errno it must get.
type BadRequest<'a> = (&'a str, u16, u16, u64, u32, &'a [u8], u32);

/// One option reply: option, reply type, data.
type OptionReply = (u32, u32, Vec<u8>);

/// A blocking NBD client over TCP that sends exactly what it is told.
struct Raw {
    s: TcpStream,
    cookie: u64,
}

impl Raw {
    /// Connects (no handshake yet).
    fn connect(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("cannot connect to NBD at {addr}: {e}"));
        s.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
        s.set_write_timeout(Some(IO_TIMEOUT))
            .expect("write timeout");
        let _ = s.set_nodelay(true);
        Raw { s, cookie: 0 }
    }

    /// Reads the server greeting; returns the handshake flags.
    fn try_greeting(&mut self) -> io::Result<u16> {
        let mut g = [0u8; 18];
        self.s.read_exact(&mut g)?;
        assert_eq!(be64(&g[0..8]), NBDMAGIC, "greeting: {g:02x?}");
        assert_eq!(be64(&g[8..16]), IHAVEOPT, "greeting: {g:02x?}");
        Ok(u16::from_be_bytes([g[16], g[17]]))
    }

    /// Reads the greeting and sends the client flags FIXED_NEWSTYLE and
    /// NO_ZEROES.
    fn handshake(addr: SocketAddr) -> Raw {
        let mut c = Raw::connect(addr);
        let flags = c
            .try_greeting()
            .unwrap_or_else(|e| panic!("no NBD greeting from {addr}: {e}"));
        assert_eq!(
            flags,
            FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES,
            "handshake flags"
        );
        c.send(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes());
        c
    }

    /// Handshake and GO to `export`: a connection in transmission, with
    /// simple replies only. Returns it with the export's size and flags.
    fn open(addr: SocketAddr, export: &str) -> (Raw, u64, u16) {
        let mut c = Raw::handshake(addr);
        let (size, flags) = c
            .go(export)
            .unwrap_or_else(|e| panic!("GO {export}: error reply {e:#x}"));
        (c, size, flags)
    }

    fn send(&mut self, bytes: &[u8]) {
        self.s
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("NBD send ({} bytes): {e}", bytes.len()));
    }

    fn recv(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        self.s
            .read_exact(&mut buf)
            .unwrap_or_else(|e| panic!("NBD receive ({n} bytes): {e}"));
        buf
    }

    fn option(&mut self, option: u32, data: &[u8]) {
        let mut m = IHAVEOPT.to_be_bytes().to_vec();
        m.extend_from_slice(&option.to_be_bytes());
        m.extend_from_slice(&(data.len() as u32).to_be_bytes());
        m.extend_from_slice(data);
        self.send(&m);
    }

    fn option_reply(&mut self) -> OptionReply {
        let h = self.recv(20);
        assert_eq!(be64(&h[0..8]), OPTION_REPLY_MAGIC, "option reply {h:02x?}");
        let len = be32(&h[16..20]) as usize;
        (be32(&h[8..12]), be32(&h[12..16]), self.recv(len))
    }

    /// Option replies up to and including the final one (ACK or an error).
    fn option_replies(&mut self, option: u32) -> Vec<OptionReply> {
        let mut all = Vec::new();
        loop {
            let r = self.option_reply();
            assert_eq!(r.0, option, "a reply to option {option}: {r:?}");
            let last = r.1 == REP_ACK || r.1 & (1 << 31) != 0;
            all.push(r);
            if last {
                return all;
            }
        }
    }

    /// Sends INFO or GO for `export` (no information requests) and returns
    /// (size, transmission flags, block sizes), or the error reply type.
    fn info_go(&mut self, option: u32, export: &str) -> Result<(u64, u16, [u32; 3]), u32> {
        let mut d = (export.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(export.as_bytes());
        d.extend_from_slice(&0u16.to_be_bytes());
        self.option(option, &d);
        let (mut export_info, mut sizes) = (None, None);
        for (_, ty, data) in self.option_replies(option) {
            match ty {
                REP_ACK => {}
                REP_INFO if be16(&data) == INFO_EXPORT => {
                    assert_eq!(data.len(), 12, "INFO_EXPORT {data:02x?}");
                    export_info = Some((be64(&data[2..10]), be16(&data[10..12])));
                }
                REP_INFO if be16(&data) == INFO_BLOCK_SIZE => {
                    assert_eq!(data.len(), 14, "INFO_BLOCK_SIZE {data:02x?}");
                    sizes = Some([be32(&data[2..]), be32(&data[6..]), be32(&data[10..])]);
                }
                REP_INFO => {}
                err => return Err(err),
            }
        }
        let (size, flags) = export_info.expect("INFO_EXPORT before ACK");
        Ok((size, flags, sizes.expect("INFO_BLOCK_SIZE before ACK")))
    }

    fn go(&mut self, export: &str) -> Result<(u64, u16), u32> {
        self.info_go(OPT_GO, export).map(|(s, f, _)| (s, f))
    }

    /// Sends one request header (and `payload`); returns its cookie.
    fn request(&mut self, flags: u16, ty: u16, offset: u64, len: u32, payload: &[u8]) -> u64 {
        self.cookie += 1;
        let mut m = Vec::with_capacity(28 + payload.len());
        m.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        m.extend_from_slice(&flags.to_be_bytes());
        m.extend_from_slice(&ty.to_be_bytes());
        m.extend_from_slice(&self.cookie.to_be_bytes());
        m.extend_from_slice(&offset.to_be_bytes());
        m.extend_from_slice(&len.to_be_bytes());
        m.extend_from_slice(payload);
        self.send(&m);
        self.cookie
    }

    /// Appends a READ request to `out` without sending it (for bursts);
    /// returns its cookie.
    fn push_read(&mut self, out: &mut Vec<u8>, offset: u64, len: u32) -> u64 {
        self.cookie += 1;
        out.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&CMD_READ.to_be_bytes());
        out.extend_from_slice(&self.cookie.to_be_bytes());
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        self.cookie
    }

    /// Reads one simple reply: (error, cookie).
    fn simple_reply(&mut self) -> (u32, u64) {
        let h = self.recv(16);
        assert_eq!(be32(&h[0..4]), SIMPLE_REPLY_MAGIC, "simple reply {h:02x?}");
        (be32(&h[4..8]), be64(&h[8..16]))
    }

    /// Sends one request and returns the error of its (simple) reply; the
    /// data of a successful READ is read and dropped.
    fn errno(&mut self, flags: u16, ty: u16, offset: u64, len: u32, payload: &[u8]) -> u32 {
        let cookie = self.request(flags, ty, offset, len, payload);
        let (err, got) = self.simple_reply();
        assert_eq!(got, cookie, "the reply carries the request's cookie");
        if err == 0 && ty == CMD_READ {
            self.recv(len as usize);
        }
        err
    }

    fn read_at(&mut self, offset: u64, len: u32) -> Vec<u8> {
        let cookie = self.request(0, CMD_READ, offset, len, &[]);
        let (err, got) = self.simple_reply();
        assert_eq!((err, got), (0, cookie), "READ {offset}+{len}");
        self.recv(len as usize)
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) {
        let err = self.errno(0, CMD_WRITE, offset, data.len() as u32, data);
        assert_eq!(err, 0, "WRITE {offset}+{}", data.len());
    }

    /// Asserts the server ends the connection with a FIN (end of file, not a
    /// reset) within [`IO_TIMEOUT`], with nothing more sent.
    fn expect_fin(&mut self, what: &str) {
        let mut buf = [0u8; 4096];
        match self.s.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!(
                "{what}: {n} more bytes instead of EOF: {:02x?}",
                &buf[..n.min(64)]
            ),
            Err(e) => panic!("{what}: {e} instead of EOF"),
        }
    }

    /// Asserts the server closes the connection (end of file or a reset,
    /// with nothing more sent) within [`IO_TIMEOUT`].
    fn expect_closed(&mut self, what: &str) {
        let mut buf = [0u8; 4096];
        match self.s.read(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
            Ok(n) => panic!(
                "{what}: the server sent {n} more bytes instead of closing: {:02x?}",
                &buf[..n.min(64)]
            ),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                panic!("{what}: the connection is still open after {IO_TIMEOUT:?}")
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

// ---------------------------------------------------------------------------
// 1. nbdinfo
// ---------------------------------------------------------------------------

#[test]
fn nbdinfo_describes_every_share_over_tcp_and_unix() {
    let dir = TempDir::new("info");
    let sock = dir.join("nbd.sock");
    let sock_s = sock.to_str().expect("a UTF-8 path");
    let d = start(
        &[
            "malloc:///m0?size_mb=64",
            "null:///n0?size_mb=128&blk_size=4096",
            "malloc:///r0?size_mb=8&blk_size=4096",
        ],
        &["m0", "n0", "r0:ro"],
        &["--nbd-socket", sock_s],
    );
    // name, size, minimum block size, read-only
    let shares = [
        ("m0", 64u64 << 20, 512u64, false),
        ("n0", 128 << 20, 4096, false),
        ("r0", 8 << 20, 4096, true),
    ];
    for (name, size, min, ro) in shares {
        let info = json_in(&tool_ok("nbdinfo", &["--json", &d.nbd_uri(name)]));
        let e = &info["exports"][0];
        assert_eq!(e["export-name"], name, "{info}");
        assert_eq!(u(&e["export-size"]), size, "{name}: {info}");
        assert_eq!(e["can_multi_conn"], true, "{name}: {info}");
        assert_eq!(u(&e["block_size_minimum"]), min, "{name}: {info}");
        assert_eq!(
            u(&e["block_size_maximum"]),
            u64::from(MAX_PAYLOAD),
            "{name}: {info}"
        );
        let preferred = u(&e["block_size_preferred"]);
        assert!(
            preferred >= min && preferred.is_power_of_two(),
            "{name}: {info}"
        );
        assert_eq!(e["is_read_only"], ro, "{name}: {info}");
        assert_eq!(e["can_trim"], !ro, "{name}: {info}");
        assert_eq!(e["can_zero"], !ro, "{name}: {info}");
        assert_eq!(e["can_flush"], true, "{name}: {info}");
        assert_eq!(info["structured"], true, "{info}");
    }

    let list = json_in(&tool_ok(
        "nbdinfo",
        &["--list", "--json", &format!("nbd://{}", d.nbd_addr())],
    ));
    let names: BTreeSet<&str> = list["exports"]
        .as_array()
        .expect("exports")
        .iter()
        .map(|e| e["export-name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, BTreeSet::from(["m0", "n0", "r0"]), "{list}");

    // base:allocation: a malloc device is all data, a null one all holes
    // that read as zeroes.
    for (name, size, ty, desc) in [
        ("m0", 64u64 << 20, 0, "data"),
        ("n0", 128 << 20, 3, "hole,zero"),
    ] {
        let map = json_in(&tool_ok("nbdinfo", &["--map", "--json", &d.nbd_uri(name)]));
        let extents = map.as_array().expect("extents");
        assert_eq!(extents.len(), 1, "{name}: {map}");
        assert_eq!(
            (u(&extents[0]["offset"]), u(&extents[0]["length"])),
            (0, size),
            "{name}: {map}"
        );
        assert_eq!(u(&extents[0]["type"]), ty, "{name}: {map}");
        assert_eq!(extents[0]["description"], desc, "{name}: {map}");
        let text = tool_ok("nbdinfo", &["--map", &d.nbd_uri(name)]);
        assert!(text.contains(desc), "{name}: {text}");
    }

    // The same exports on the Unix socket.
    let unix = |name: &str| format!("nbd+unix:///{name}?socket={sock_s}");
    let info = json_in(&tool_ok("nbdinfo", &["--json", &unix("m0")]));
    assert_eq!(u(&info["exports"][0]["export-size"]), 64 << 20, "{info}");
    let info = json_in(&tool_ok("nbdinfo", &["--json", &unix("r0")]));
    assert_eq!(info["exports"][0]["is_read_only"], true, "{info}");
    let list = json_in(&tool_ok(
        "nbdinfo",
        &["--list", "--json", &format!("nbd+unix://?socket={sock_s}")],
    ));
    assert_eq!(
        list["exports"].as_array().expect("exports").len(),
        3,
        "{list}"
    );

    // An export that does not exist is an error, not an empty answer.
    let out = tool("nbdinfo", &[&d.nbd_uri("nope")]);
    assert!(
        !out.status.success(),
        "nbdinfo on an unknown export: {out:?}"
    );
}

// ---------------------------------------------------------------------------
// 2. nbdcopy
// ---------------------------------------------------------------------------

#[test]
fn nbdcopy_round_trips_64_mib_over_tcp_and_unix() {
    const SIZE: usize = 64 << 20;
    let dir = TempDir::new("copy");
    let sock = dir.join("nbd.sock");
    let sock_s = sock.to_str().expect("a UTF-8 path");
    let d = start(
        &["malloc:///m0?size_mb=64"],
        &["m0"],
        &["--nbd-socket", sock_s],
    );
    let unix = format!("nbd+unix:///m0?socket={sock_s}");
    let (input, output) = (dir.join("in.bin"), dir.join("out.bin"));
    let in_s = input.to_str().expect("a UTF-8 path");
    let out_s = output.to_str().expect("a UTF-8 path");

    // TCP in, TCP out.
    let data = random_bytes(SIZE, 1);
    write_file(&input, &data);
    tool_ok("nbdcopy", &[in_s, &d.nbd_uri("m0")]);
    tool_ok("nbdcopy", &[&d.nbd_uri("m0"), out_s]);
    assert_same(&read_file(&output), &data, "nbdcopy over TCP");

    // Unix in, read back over both listeners: one device behind both.
    let data = random_bytes(SIZE, 2);
    write_file(&input, &data);
    tool_ok("nbdcopy", &[in_s, &unix]);
    std::fs::remove_file(&output).expect("remove the old copy");
    tool_ok("nbdcopy", &[&unix, out_s]);
    assert_same(&read_file(&output), &data, "nbdcopy over the Unix socket");
    std::fs::remove_file(&output).expect("remove the old copy");
    tool_ok("nbdcopy", &[&d.nbd_uri("m0"), out_s]);
    assert_same(
        &read_file(&output),
        &data,
        "written over Unix, read over TCP",
    );

    let stats = Grpc::new(&d).io_stats("m0");
    let (r, w) = (
        stats.read.unwrap_or_default(),
        stats.write.unwrap_or_default(),
    );
    assert!(
        w.bytes >= 2 * SIZE as u64,
        "the device saw the writes: {stats:?}"
    );
    assert!(
        r.bytes >= 3 * SIZE as u64,
        "the device saw the reads: {stats:?}"
    );
    assert_eq!((r.errors, w.errors), (0, 0), "{stats:?}");
}

// ---------------------------------------------------------------------------
// 3. qemu-img
// ---------------------------------------------------------------------------

#[test]
fn qemu_img_converts_from_and_to_the_export() {
    const SIZE: usize = 16 << 20;
    let dir = TempDir::new("qemu");
    let d = start(
        &["malloc:///m0?size_mb=16", "malloc:///r0?size_mb=4"],
        &["m0", "r0:ro"],
        &[],
    );
    let (input, output) = (dir.join("in.raw"), dir.join("out.raw"));
    let in_s = input.to_str().expect("a UTF-8 path");
    let out_s = output.to_str().expect("a UTF-8 path");
    let data = random_bytes(SIZE, 3);
    write_file(&input, &data);

    // Into the export (-n: the target exists), then out of it.
    tool_ok(
        "qemu-img",
        &[
            "convert",
            "-n",
            "-f",
            "raw",
            "-O",
            "raw",
            in_s,
            &d.nbd_uri("m0"),
        ],
    );
    tool_ok(
        "qemu-img",
        &["convert", "-f", "raw", "-O", "raw", &d.nbd_uri("m0"), out_s],
    );
    assert_same(&read_file(&output), &data, "qemu-img convert");

    let info = json_in(&tool_ok(
        "qemu-img",
        &["info", "--output=json", &d.nbd_uri("m0")],
    ));
    assert_eq!(u(&info["virtual-size"]), SIZE as u64, "{info}");
    let text = tool_ok("qemu-img", &["info", &d.nbd_uri("r0")]);
    assert!(text.contains("4194304 bytes"), "{text}");

    // A read-only export refuses the copy.
    let out = tool(
        "qemu-img",
        &[
            "convert",
            "-n",
            "-f",
            "raw",
            "-O",
            "raw",
            in_s,
            &d.nbd_uri("r0"),
        ],
    );
    assert!(
        !out.status.success(),
        "qemu-img wrote to a read-only export: {out:?}"
    );
}

// ---------------------------------------------------------------------------
// 4. fio
// ---------------------------------------------------------------------------

/// Runs fio with the nbd engine on `uri` and `args`, JSON output; every job
/// must end without error and move data both ways. Returns the jobs.
fn fio_ok(uri: &str, args: &[&str]) -> Vec<Value> {
    let uri_arg = format!("--uri={uri}");
    let mut all = vec![
        "--name=nbd",
        "--ioengine=nbd",
        &uri_arg,
        "--output-format=json",
    ];
    all.extend_from_slice(args);
    let out = tool("fio", &all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "fio {all:?} failed ({})\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status
    );
    assert!(
        !stderr.contains("verify:"),
        "fio reported verify errors:\n{stderr}"
    );
    let report = json_in(&stdout);
    let jobs = report["jobs"].as_array().expect("jobs").clone();
    assert!(!jobs.is_empty(), "{report}");
    for job in &jobs {
        assert_eq!(u(&job["error"]), 0, "{job}");
        assert!(u(&job["read"]["io_bytes"]) > 0, "no reads: {job}");
        assert!(u(&job["write"]["io_bytes"]) > 0, "no writes: {job}");
    }
    jobs
}

#[test]
fn fio_random_io_verifies_on_malloc() {
    let d = start(&["malloc:///m0?size_mb=32"], &["m0"], &[]);
    let jobs = fio_ok(
        &d.nbd_uri("m0"),
        &[
            "--rw=randrw",
            "--bs=4k",
            "--iodepth=16",
            "--size=16M",
            "--verify=crc32c",
            "--verify_state_save=0",
            "--verify_fatal=1",
        ],
    );
    assert_eq!(jobs.len(), 1);
    // Every block written was read back and checked: the reads cover at
    // least the writes.
    let job = &jobs[0];
    assert!(
        u(&job["read"]["io_bytes"]) >= u(&job["write"]["io_bytes"]),
        "{job}"
    );
    let grpc = Grpc::new(&d);
    let s = grpc.io_stats("m0");
    assert!(s.write.unwrap_or_default().ops > 0, "{s:?}");
    grpc.wait_idle("m0");
}

#[test]
fn fio_jobs_run_on_connections_of_their_own_spread_over_reactors() {
    let cpus = available_cpus();
    let two = cpus.len() >= 2;
    let list = if two {
        format!("{},{}", cpus[0], cpus[1])
    } else {
        cpus[0].to_string()
    };
    let d = Daemon::start(engine_args(
        &["malloc:///m0?size_mb=64"],
        &["m0"],
        &["--poll-mode", "adaptive", "-l", &list],
    ));
    let grpc = Grpc::new(&d);
    let before = grpc.reactor_busy_ns();
    assert_eq!(before.len(), if two { 2 } else { 1 });

    // Watch the export's connection count while fio runs.
    let most = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let grpc = Arc::new(grpc);
    let watcher = {
        let (most, done, grpc) = (most.clone(), done.clone(), grpc.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(u64::from(grpc.connections("m0")), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let jobs = fio_ok(
        &d.nbd_uri("m0"),
        &[
            "--rw=randrw",
            "--bs=4k",
            "--iodepth=16",
            "--numjobs=4",
            "--size=16M",
            "--offset_increment=16M",
            "--verify=crc32c",
            "--verify_state_save=0",
            "--verify_backlog=512",
            "--verify_fatal=1",
            "--time_based",
            "--runtime=2",
        ],
    );
    done.store(true, Ordering::Relaxed);
    watcher.join().expect("the watcher thread");
    assert_eq!(jobs.len(), 4, "one report per job");
    let most = most.load(Ordering::Relaxed);
    assert!(
        most >= 4,
        "4 jobs, 4 connections at once; saw at most {most}"
    );

    let after = grpc.reactor_busy_ns();
    if two {
        for (core, (b, a)) in before.iter().zip(&after).enumerate() {
            assert!(
                a.saturating_sub(*b) > 50_000_000,
                "reactor {core} did no NBD work: busy {b} -> {a} ns ({before:?} -> {after:?})"
            );
        }
    }
    eventually("fio's connections close", || grpc.connections("m0") == 0);
    grpc.wait_idle("m0");
}

// ---------------------------------------------------------------------------
// 5. Bad input, by hand
// ---------------------------------------------------------------------------

#[test]
fn bad_requests_get_the_spec_errno_and_the_connection_lives_on() {
    const SIZE: u64 = 8 << 20;
    let d = start(
        &["malloc:///m0?size_mb=8", "malloc:///r0?size_mb=8"],
        &["m0", "r0:ro"],
        &[],
    );
    let (mut c, size, flags) = Raw::open(d.nbd_addr(), "m0");
    assert_eq!(size, SIZE);
    assert_ne!(flags & TFLAG_HAS_FLAGS, 0, "{flags:#x}");
    assert_ne!(flags & TFLAG_CAN_MULTI_CONN, 0, "{flags:#x}");
    assert_eq!(flags & TFLAG_READ_ONLY, 0, "{flags:#x}");
    let pattern = random_bytes(8192, 4);
    c.write_at(4096, &pattern);
    let good = |c: &mut Raw, after: &str| {
        assert_same(
            &c.read_at(4096, 8192),
            &pattern,
            &format!("a good read after {after}"),
        );
    };
    good(&mut c, "the write");

    let one = [0x5a_u8; 512];
    let cases: [BadRequest; 12] = [
        (
            "unaligned read (offset 1)",
            0,
            CMD_READ,
            1,
            512,
            &[],
            EINVAL,
        ),
        ("unaligned read (length 1)", 0, CMD_READ, 0, 1, &[], EINVAL),
        ("read at the end", 0, CMD_READ, SIZE, 512, &[], EINVAL),
        (
            "read across the end",
            0,
            CMD_READ,
            SIZE - 512,
            1024,
            &[],
            EINVAL,
        ),
        ("write at the end", 0, CMD_WRITE, SIZE, 512, &one, ENOSPC),
        (
            "write across the end",
            0,
            CMD_WRITE,
            SIZE - 512,
            1024,
            &[0x5a; 1024],
            ENOSPC,
        ),
        (
            "unaligned write (offset 1)",
            0,
            CMD_WRITE,
            1,
            512,
            &one,
            EINVAL,
        ),
        (
            "write with an unknown flag",
            1 << 15,
            CMD_WRITE,
            0,
            512,
            &one,
            EINVAL,
        ),
        ("unknown command 99", 0, 99, 0, 512, &[], EINVAL),
        (
            "unknown flag bit 15 on a read",
            1 << 15,
            CMD_READ,
            0,
            512,
            &[],
            EINVAL,
        ),
        ("FLUSH with a length", 0, CMD_FLUSH, 0, 512, &[], EINVAL),
        (
            "BLOCK_STATUS without a context",
            0,
            CMD_BLOCK_STATUS,
            0,
            512,
            &[],
            EINVAL,
        ),
    ];
    for (what, fl, ty, offset, len, payload, want) in cases {
        let got = c.errno(fl, ty, offset, len, payload);
        assert_eq!(got, want, "{what}: errno {got}, want {want}");
        good(&mut c, what);
    }
    // The refused writes wrote nothing: the first and last blocks are still
    // zeroes.
    for offset in [0, SIZE - 512] {
        assert_eq!(
            c.read_at(offset, 512),
            vec![0; 512],
            "refused writes left no trace at {offset}"
        );
    }
    // Things that must work.
    assert_eq!(c.errno(0, CMD_FLUSH, 0, 0, &[]), 0, "FLUSH");
    assert_eq!(
        c.errno(CMD_FLAG_FUA, CMD_WRITE, 0, 512, &one),
        0,
        "FUA write"
    );
    assert_eq!(c.read_at(0, 512), one.to_vec());
    assert_eq!(c.errno(0, CMD_TRIM, SIZE - 4096, 4096, &[]), 0, "TRIM");
    good(&mut c, "the checks");

    // A read-only export refuses every kind of write but serves reads.
    let (mut ro, size, flags) = Raw::open(d.nbd_addr(), "r0");
    assert_eq!(size, SIZE);
    assert_ne!(flags & TFLAG_READ_ONLY, 0, "{flags:#x}");
    assert_eq!(ro.errno(0, CMD_WRITE, 0, 512, &one), EPERM, "write on :ro");
    assert_eq!(ro.errno(0, CMD_TRIM, 0, 512, &[]), EPERM, "trim on :ro");
    assert_eq!(
        ro.errno(0, CMD_WRITE, SIZE, 512, &one),
        EPERM,
        "write past the end of :ro"
    );
    assert_eq!(
        ro.read_at(0, 512),
        vec![0; 512],
        "the refused write wrote nothing"
    );
    assert_eq!(ro.errno(0, CMD_FLUSH, 0, 0, &[]), 0, "FLUSH on :ro");

    // The error counters saw it all.
    let einval = metric(
        &d,
        "io_engine_nbd_errors_total",
        &["export=\"m0\"", "errno=\"EINVAL\""],
    );
    let enospc = metric(
        &d,
        "io_engine_nbd_errors_total",
        &["export=\"m0\"", "errno=\"ENOSPC\""],
    );
    let eperm = metric(
        &d,
        "io_engine_nbd_errors_total",
        &["export=\"r0\"", "errno=\"EPERM\""],
    );
    assert_eq!(
        (einval, enospc, eperm),
        (10.0, 2.0, 3.0),
        "NBD error counters"
    );

    // Both clients still work and end with DISC.
    good(&mut c, "the read-only checks");
    c.request(0, CMD_DISC, 0, 0, &[]);
    c.expect_closed("after DISC");
    ro.request(0, CMD_DISC, 0, 0, &[]);
    ro.expect_closed("after DISC");
    let grpc = Grpc::new(&d);
    eventually("both connections close", || {
        grpc.connections("m0") == 0 && grpc.connections("r0") == 0
    });
}

/// Negotiates structured replies and `base:allocation`, then GO `export`.
fn open_structured(addr: SocketAddr, export: &str) -> Raw {
    let mut c = Raw::handshake(addr);
    c.option(OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(c.option_replies(OPT_STRUCTURED_REPLY)[0].1, REP_ACK);
    let mut d = (export.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(export.as_bytes());
    d.extend_from_slice(&1u32.to_be_bytes());
    d.extend_from_slice(&15u32.to_be_bytes());
    d.extend_from_slice(b"base:allocation");
    c.option(OPT_SET_META_CONTEXT, &d);
    let replies = c.option_replies(OPT_SET_META_CONTEXT);
    assert_eq!(replies.len(), 2, "one context and ACK: {replies:?}");
    assert_eq!(replies[0].1, REP_META_CONTEXT, "{replies:?}");
    assert_eq!(&replies[0].2[4..], b"base:allocation");
    c.go(export).expect("GO");
    c
}

/// A structured READ on `c`: the data of its one OFFSET_DATA chunk.
fn structured_read(c: &mut Raw, offset: u64, len: u32) -> Vec<u8> {
    let cookie = c.request(0, CMD_READ, offset, len, &[]);
    let h = c.recv(20);
    assert_eq!(be32(&h[0..4]), STRUCTURED_REPLY_MAGIC, "{h:02x?}");
    let (flags, ty) = (be16(&h[4..6]), be16(&h[6..8]));
    assert_eq!(be64(&h[8..16]), cookie);
    assert_eq!(flags & REPLY_FLAG_DONE, REPLY_FLAG_DONE, "one chunk");
    let body = c.recv(be32(&h[16..20]) as usize);
    assert_eq!(be64(&body), offset);
    match ty {
        REPLY_TYPE_OFFSET_DATA => body[8..].to_vec(),
        // A hole chunk: the range reads as zeroes (offset, then its length).
        2 => {
            assert_eq!(body.len(), 12, "{body:02x?}");
            assert_eq!(be32(&body[8..12]), len, "hole length");
            vec![0; len as usize]
        }
        _ => panic!("chunk type {ty:#x}: {h:02x?}"),
    }
}

#[test]
fn a_structured_error_reply_carries_a_short_message() {
    const REPLY_TYPE_ERROR: u16 = (1 << 15) | 1;
    let d = start(&["malloc:///m0?size_mb=1"], &["m0"], &[]);
    let mut c = open_structured(d.nbd_addr(), "m0");
    let cookie = c.request(0, CMD_READ, 1 << 20, 512, &[]);
    let h = c.recv(20);
    assert_eq!(be32(&h[0..4]), STRUCTURED_REPLY_MAGIC, "{h:02x?}");
    assert_eq!(be16(&h[6..8]), REPLY_TYPE_ERROR, "{h:02x?}");
    assert_eq!(be64(&h[8..16]), cookie);
    let body = c.recv(be32(&h[16..20]) as usize);
    assert_eq!(be32(&body[0..4]), EINVAL);
    let len = be16(&body[4..6]) as usize;
    assert_eq!(body.len(), 6 + len, "{body:02x?}");
    let message = std::str::from_utf8(&body[6..]).expect("a UTF-8 message");
    assert!(message.starts_with("invalid request"), "{message:?}");
    // The connection lives on.
    assert_eq!(structured_read(&mut c, 0, 512).len(), 512);
}

#[test]
fn a_null_export_reads_as_the_zeroes_its_map_promises() {
    const BS: u32 = 4096;
    let d = start(&["null:///n0?size_mb=16&blk_size=4096"], &["n0"], &[]);
    let mut c = open_structured(d.nbd_addr(), "n0");
    // BLOCK_STATUS: the whole range is a hole that reads as zeroes.
    let cookie = c.request(0, CMD_BLOCK_STATUS, 0, 1 << 20, &[]);
    let h = c.recv(20);
    assert_eq!(be32(&h[0..4]), STRUCTURED_REPLY_MAGIC);
    assert_eq!(be16(&h[6..8]), REPLY_TYPE_BLOCK_STATUS);
    assert_eq!(be64(&h[8..16]), cookie);
    let body = c.recv(be32(&h[16..20]) as usize);
    assert_eq!(be32(&body[0..4]), 1, "the context id SET_META_CONTEXT gave");
    assert_eq!(be32(&body[8..12]), 3, "hole|zero: {body:02x?}");

    // Writes to a null device are discarded; what is read must then be the
    // zeroes the map promised (NBD_STATE_ZERO), never what some client wrote
    // before. 48 writes (more than a connection has buffers, so every one
    // of them has carried written data), then reads.
    let data = random_bytes(BS as usize, 5);
    let write_all = |c: &mut Raw| {
        for block in 0..48u32 {
            let err = c.errno(0, CMD_WRITE, u64::from(block * BS), BS, &data);
            assert_eq!(err, 0, "write {block}");
        }
    };
    let zeroes = |got: &[u8], what: &str| {
        assert!(
            got.iter().all(|&b| b == 0),
            "{what} of a hole|zero extent of a null export returned non-zero bytes \
             (first 16: {:02x?}; the data written before: {})",
            &got[..16],
            got == data
        );
    };
    // A client that comes after another must not see its data...
    write_all(&mut c);
    drop(c);
    let (mut simple, _, _) = Raw::open(d.nbd_addr(), "n0");
    let mut c = open_structured(d.nbd_addr(), "n0");
    for block in 0..48u32 {
        let offset = u64::from(block * BS);
        zeroes(
            &simple.read_at(offset, BS),
            &format!("a fresh client's simple read {block}"),
        );
        let got = structured_read(&mut c, offset, BS);
        zeroes(&got, &format!("a fresh client's structured read {block}"));
    }
    // ... nor its own, in either reply style.
    write_all(&mut simple);
    write_all(&mut c);
    for block in 0..48u32 {
        let offset = u64::from(block * BS);
        zeroes(
            &simple.read_at(offset, BS),
            &format!("simple read {block} after writes"),
        );
        let got = structured_read(&mut c, offset, BS);
        zeroes(&got, &format!("structured read {block} after writes"));
    }
}

#[test]
fn a_bad_request_magic_closes_only_that_connection() {
    let d = start(&["malloc:///m0?size_mb=8"], &["m0"], &[]);
    let (mut bad, _, _) = Raw::open(d.nbd_addr(), "m0");
    let (mut good, _, _) = Raw::open(d.nbd_addr(), "m0");
    let data = random_bytes(4096, 6);
    good.write_at(0, &data);
    bad.write_at(4096, &data);

    let mut header = vec![0x25, 0x60, 0x95, 0x14]; // one bit off
    header.extend_from_slice(&[0; 24]);
    bad.send(&header);
    bad.expect_closed("a request with a bad magic");

    // The other connection never noticed; new ones are welcome.
    assert_eq!(good.read_at(0, 4096), data);
    assert_eq!(good.read_at(4096, 4096), data);
    let (mut third, _, _) = Raw::open(d.nbd_addr(), "m0");
    assert_eq!(third.read_at(0, 4096), data);
    let grpc = Grpc::new(&d);
    eventually("the bad connection is gone", || grpc.connections("m0") == 2);
    assert_eq!(
        metric(
            &d,
            "io_engine_nbd_errors_total",
            &["export=\"m0\"", "errno=\"other\""]
        ),
        1.0,
        "the protocol error is counted"
    );
}

#[test]
fn a_write_over_32_mib_closes_the_connection_but_32_mib_works() {
    let d = start(&["malloc:///m0?size_mb=64"], &["m0"], &[]);
    let grpc = Grpc::new(&d);

    // Exactly the maximum payload is accepted, both ways.
    let (mut c, _, _) = Raw::open(d.nbd_addr(), "m0");
    let big = random_bytes(MAX_PAYLOAD as usize, 7);
    c.write_at(16 << 20, &big);
    assert_same(&c.read_at(16 << 20, MAX_PAYLOAD), &big, "a 32 MiB read");
    // A read longer than the maximum is refused politely.
    assert_eq!(c.errno(0, CMD_READ, 0, MAX_PAYLOAD + 512, &[]), EINVAL);
    assert_eq!(c.read_at(16 << 20, 512), big[..512].to_vec());

    // A write announcing more is a denial of service: the connection goes.
    let (mut w, _, _) = Raw::open(d.nbd_addr(), "m0");
    w.request(0, CMD_WRITE, 0, MAX_PAYLOAD + 512, &[]);
    w.expect_closed("a WRITE of 32 MiB + 512");
    assert_eq!(
        c.read_at(16 << 20, 512),
        big[..512].to_vec(),
        "the other client"
    );
    eventually("the closed connection is gone", || {
        grpc.connections("m0") == 1
    });
    grpc.wait_idle("m0");
}

#[test]
fn eof_without_disc_and_disc_are_clean_closes() {
    let d = start(&["malloc:///m0?size_mb=8"], &["m0"], &[]);
    let grpc = Grpc::new(&d);
    let data = random_bytes(4096, 8);
    for round in 0..3 {
        // EOF without DISC, as fio closes: after a write, and half-closed
        // (shutdown of the write side) or dropped.
        let (mut c, _, _) = Raw::open(d.nbd_addr(), "m0");
        c.write_at(0, &data);
        if round % 2 == 0 {
            c.s.shutdown(Shutdown::Write).expect("shutdown");
            c.expect_closed("after EOF");
        }
        drop(c);
        // DISC with a read still in flight: the read is answered first.
        let (mut c, _, _) = Raw::open(d.nbd_addr(), "m0");
        let cookie = c.request(0, CMD_READ, 0, 4096, &[]);
        c.request(0, CMD_DISC, 0, 0, &[]);
        assert_eq!(c.simple_reply(), (0, cookie), "the read before DISC");
        assert_eq!(c.recv(4096), data);
        c.expect_closed("after DISC");
    }
    eventually("every connection closed", || grpc.connections("m0") == 0);
    grpc.wait_idle("m0");
    // Still serving, and nothing to complain about in the log.
    let (mut c, _, _) = Raw::open(d.nbd_addr(), "m0");
    assert_eq!(c.read_at(0, 4096), data);
    let log = d.stderr();
    for line in log.lines() {
        let nbd_warning = line.contains("io_engine::export")
            && (line.contains("\"level\":\"WARN\"") || line.contains("\"level\":\"ERROR\""));
        assert!(
            !nbd_warning
                && !line.contains("\"level\":\"ERROR\"")
                && !line.contains("NBD connection closed:"),
            "a clean close was logged as a problem: {line}"
        );
    }
}

#[test]
fn clients_that_vanish_with_requests_in_flight_leave_nothing_behind() {
    let d = start(&["malloc:///m0?size_mb=64"], &["m0"], &[]);
    let grpc = Grpc::new(&d);
    let reference = random_bytes(1 << 20, 9);
    {
        let (mut c, _, _) = Raw::open(d.nbd_addr(), "m0");
        c.write_at(0, &reference);
    }

    // A steady client checks its data the whole time.
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Barrier::new(2));
    let steady = {
        let (addr, stop, started) = (d.nbd_addr(), stop.clone(), started.clone());
        let reference = reference.clone();
        std::thread::spawn(move || {
            let (mut c, _, _) = Raw::open(addr, "m0");
            started.wait();
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) || rounds == 0 {
                let i = (rounds % 16) as usize;
                let off = (32 << 20) + (i as u64) * 65536;
                let chunk = &reference[i * 65536..(i + 1) * 65536];
                c.write_at(off, chunk);
                assert_same(&c.read_at(off, 65536), chunk, "the steady client's data");
                assert_same(&c.read_at(0, 4096), &reference[..4096], "the shared data");
                rounds += 1;
            }
            rounds
        })
    };
    started.wait();

    for round in 0..12 {
        let (mut c, _, _) = Raw::open(d.nbd_addr(), "m0");
        let mut burst = Vec::new();
        // 32 reads: small ones, or 1 MiB ones (more than the connection's
        // buffers, so some wait for a buffer), then gone.
        let len: u32 = if round % 2 == 0 { 4096 } else { 1 << 20 };
        for i in 0..32u64 {
            c.push_read(&mut burst, i * u64::from(len) % (63 << 20), len);
        }
        if round % 3 == 2 {
            // And a write whose payload never fully arrives.
            burst.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
            burst.extend_from_slice(&0u16.to_be_bytes());
            burst.extend_from_slice(&CMD_WRITE.to_be_bytes());
            burst.extend_from_slice(&999u64.to_be_bytes());
            burst.extend_from_slice(&(40u64 << 20).to_be_bytes());
            burst.extend_from_slice(&(1u32 << 20).to_be_bytes());
            burst.extend_from_slice(&[0xee; 4096]);
        }
        c.send(&burst);
        drop(c); // never reads a reply
    }

    eventually("the vanished clients' connections close", || {
        grpc.connections("m0") == 1
    });
    stop.store(true, Ordering::Relaxed);
    let rounds = steady
        .join()
        .expect("the steady client never saw a problem");
    assert!(rounds > 0);
    eventually("the steady client's connection closes", || {
        grpc.connections("m0") == 0
    });
    grpc.wait_idle("m0");
    let pool = grpc.io_pool();
    assert_eq!(pool.in_use, 0, "{pool:?}");
    assert_eq!(pool.available, pool.capacity, "{pool:?}");
    // The half-sent write never reached the device.
    let (mut c, _, _) = Raw::open(d.nbd_addr(), "m0");
    assert_eq!(
        c.read_at(40 << 20, 4096),
        vec![0; 4096],
        "a partial write was applied"
    );
    assert_eq!(c.read_at(0, 4096), reference[..4096].to_vec());
}

#[test]
fn pipelined_requests_are_all_answered_whatever_the_depth_and_counted_once() {
    // The daemon runs adaptive (as every test daemon does): the reactor
    // sleeps while replies are held back for the rest of a burst, and must
    // wake to send them when the rest never comes.
    let d = start(&["malloc:///m0?size_mb=64"], &["m0"], &[]);
    let (mut c, _, _) = Raw::open(d.nbd_addr(), "m0");
    let data = random_bytes(48 * 4096, 21);
    c.write_at(0, &data);
    // Bursts of 48 reads (more than the connection's 32 buffers, so some
    // wait for one), then fewer, then one at a time: the depth the
    // connection learned falls each time, and every reply still comes.
    let mut reads = 0u64;
    for burst in [48u64, 48, 7, 2, 1, 1, 16] {
        let mut m = Vec::new();
        let first = c.cookie + 1;
        for i in 0..burst {
            c.push_read(&mut m, i * 4096, 4096);
        }
        c.send(&m);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..burst {
            let (err, cookie) = c.simple_reply();
            assert_eq!(err, 0, "burst of {burst}");
            let i = cookie - first;
            assert!(
                i < burst && seen.insert(cookie),
                "cookie {cookie} in a burst of {burst}"
            );
            let i = i as usize;
            assert_same(
                &c.recv(4096),
                &data[i * 4096..(i + 1) * 4096],
                "a pipelined read",
            );
        }
        reads += burst;
    }
    // Each request counted once, including those that waited for a buffer.
    assert_eq!(
        metric(
            &d,
            "io_engine_nbd_requests_total",
            &["export=\"m0\"", "cmd=\"read\""]
        ),
        reads as f64
    );
    assert_eq!(
        metric(
            &d,
            "io_engine_nbd_requests_total",
            &["export=\"m0\"", "cmd=\"write\""]
        ),
        1.0
    );
    // And each reply's wait once, held ones included.
    let count = |cmd: &str| {
        metric(
            &d,
            "io_engine_nbd_request_duration_seconds_count",
            &["export=\"m0\"", &format!("cmd=\"{cmd}\"")],
        )
    };
    eventually("every reply's duration counted", || {
        count("read") == reads as f64 && count("write") == 1.0
    });
}

/// The `_count` and `_sum` of `io_engine_nbd_request_duration_seconds` for
/// `export` and `cmd`, and its `le="+Inf"` bucket.
fn durations(d: &Daemon, export: &str, cmd: &str) -> (f64, f64, f64) {
    let labels = [format!("export=\"{export}\""), format!("cmd=\"{cmd}\"")];
    let labels = [labels[0].as_str(), labels[1].as_str()];
    let name = "io_engine_nbd_request_duration_seconds";
    let mut inf = labels.to_vec();
    inf.push("le=\"+Inf\"");
    (
        metric(d, &format!("{name}_count"), &labels),
        metric(d, &format!("{name}_sum"), &labels),
        metric(d, &format!("{name}_bucket"), &inf),
    )
}

#[test]
fn request_durations_count_every_reply_of_a_real_client_per_command() {
    let d = start(&["malloc:///m0?size_mb=16"], &["m0"], &[]);
    let name = "io_engine_nbd_request_duration_seconds_count";
    // Read and write from 0, before any request; the others once received.
    assert_eq!(durations(&d, "m0", "read"), (0.0, 0.0, 0.0));
    let text = http::get(&d.metrics_url()).expect("GET /metrics").text();
    for cmd in ["read", "write"] {
        let line = format!("{name}{{export=\"m0\",cmd=\"{cmd}\"}} 0");
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    assert!(
        !text.contains(&format!("{name}{{export=\"m0\",cmd=\"flush\"}}")),
        "a flush series before a flush"
    );
    // qemu-io: 5 reads and 3 writes of 4 KiB, one at a time, over one
    // connection (and whatever qemu adds on close: a flush, counted apart).
    const READS: u64 = 5;
    const WRITES: u64 = 3;
    let mut args = vec!["-f".to_string(), "raw".to_string()];
    for i in 0..WRITES {
        args.push("-c".into());
        args.push(format!("write -P {} {} 4k", i + 1, i * 4096));
    }
    for i in 0..READS {
        args.push("-c".into());
        args.push(format!("read {} 4k", (i % WRITES) * 4096));
    }
    args.push(d.nbd_uri("m0"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tool_ok("qemu-io", &args);

    eventually("the client's replies counted", || {
        durations(&d, "m0", "read").0 == READS as f64
            && durations(&d, "m0", "write").0 == WRITES as f64
    });
    for (cmd, n) in [("read", READS), ("write", WRITES)] {
        let (count, sum, inf) = durations(&d, "m0", cmd);
        assert_eq!(count, n as f64, "{cmd}");
        assert_eq!(inf, count, "{cmd}: +Inf = _count");
        assert!(sum > 0.0 && sum < 10.0, "{cmd}: {sum} s for {count}");
    }
    // The counts agree with the requests counted on arrival.
    for cmd in ["read", "write", "flush"] {
        let requests = metric(
            &d,
            "io_engine_nbd_requests_total",
            &["export=\"m0\"", &format!("cmd=\"{cmd}\"")],
        );
        assert_eq!(durations(&d, "m0", cmd).0, requests, "{cmd}");
    }
    // Commands never sent have no series.
    assert!(
        !http::get(&d.metrics_url())
            .expect("GET /metrics")
            .text()
            .contains(&format!("{name}{{export=\"m0\",cmd=\"trim\"}}")),
        "a trim series without a trim"
    );
}

#[test]
fn the_option_phase_answers_bad_options_and_carries_on() {
    let d = start(
        &[
            "malloc:///m0?size_mb=8",
            "malloc:///r0?size_mb=4&blk_size=4096",
        ],
        &["m0", "r0:ro"],
        &[],
    );
    let addr = d.nbd_addr();

    // Unknown option, STARTTLS, GO and INFO for unknown names: each gets its
    // error, and the same connection goes on to LIST, INFO and GO.
    let mut c = Raw::handshake(addr);
    c.option(12345, b"whatever");
    let r = c.option_replies(12345);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].1, REP_ERR_UNSUP, "unknown option: {r:?}");
    c.option(OPT_STARTTLS, &[]);
    assert_eq!(
        c.option_replies(OPT_STARTTLS)[0].1,
        REP_ERR_POLICY,
        "STARTTLS"
    );
    assert_eq!(
        c.go("nope"),
        Err(REP_ERR_UNKNOWN),
        "GO with an unknown name"
    );
    assert_eq!(
        c.info_go(OPT_INFO, "nope"),
        Err(REP_ERR_UNKNOWN),
        "INFO with an unknown name"
    );
    c.option(OPT_LIST, &[]);
    let list = c.option_replies(OPT_LIST);
    let names: BTreeSet<String> = list
        .iter()
        .filter(|r| r.1 == REP_SERVER)
        .map(|r| String::from_utf8_lossy(&r.2[4..4 + be32(&r.2) as usize]).into_owned())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["m0".to_string(), "r0".to_string()]),
        "{list:?}"
    );
    assert_eq!(list.last().expect("ACK").1, REP_ACK);
    let (size, flags, sizes) = c.info_go(OPT_INFO, "r0").expect("INFO r0");
    assert_eq!(size, 4 << 20);
    assert_ne!(flags & TFLAG_READ_ONLY, 0);
    assert_eq!(sizes[0], 4096, "minimum block size: {sizes:?}");
    assert_eq!(sizes[2], MAX_PAYLOAD, "maximum block size: {sizes:?}");
    let (size, flags) = c.go("m0").expect("GO m0 after the errors");
    assert_eq!(size, 8 << 20);
    assert_eq!(flags & TFLAG_READ_ONLY, 0);
    let data = random_bytes(512, 10);
    c.write_at(0, &data);
    assert_eq!(c.read_at(0, 512), data, "transmission after the errors");

    // EXPORT_NAME: a known name enters transmission (size, flags, and no
    // zeroes since the client asked for none); an unknown one is a hard
    // disconnect.
    let mut e = Raw::handshake(addr);
    e.option(OPT_EXPORT_NAME, b"m0");
    let reply = e.recv(10);
    assert_eq!(be64(&reply), 8 << 20, "EXPORT_NAME size");
    assert_ne!(be16(&reply[8..]) & TFLAG_HAS_FLAGS, 0);
    assert_eq!(e.read_at(0, 512), data, "transmission after EXPORT_NAME");
    let mut e = Raw::handshake(addr);
    e.option(OPT_EXPORT_NAME, b"nope");
    e.expect_closed("EXPORT_NAME with an unknown name");

    // ABORT is acknowledged, then the server closes.
    let mut a = Raw::handshake(addr);
    a.option(OPT_ABORT, &[]);
    assert_eq!(a.option_replies(OPT_ABORT)[0].1, REP_ACK);
    a.expect_closed("after ABORT");

    // Unknown client flags drop the connection before any option.
    let mut f = Raw::connect(addr);
    f.try_greeting().expect("greeting");
    f.send(&(1u32 << 7).to_be_bytes());
    f.expect_closed("unknown client flags");

    // The first connection still works.
    assert_eq!(c.read_at(0, 512), data);
}

// ---------------------------------------------------------------------------
// 6. Connection limit
// ---------------------------------------------------------------------------

#[test]
fn clients_beyond_the_connection_limit_are_refused() {
    let d = start(
        &["malloc:///m0?size_mb=8"],
        &["m0"],
        &["--nbd-max-connections", "2"],
    );
    let grpc = Grpc::new(&d);
    let data = random_bytes(4096, 11);
    let (mut a, _, _) = Raw::open(d.nbd_addr(), "m0");
    let (mut b, _, _) = Raw::open(d.nbd_addr(), "m0");
    a.write_at(0, &data);
    assert_eq!(b.read_at(0, 4096), data);
    assert_eq!(grpc.connections("m0"), 2);

    // A third gets the handshake, and its GO a policy error saying why.
    let mut c = Raw::connect(d.nbd_addr());
    c.try_greeting().expect("a greeting past the limit");
    c.send(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes());
    assert_eq!(c.go("m0"), Err(REP_ERR_POLICY), "GO past the limit");
    drop(c);
    // nbdinfo fails at its GO (not on a dropped connection).
    let out = tool("nbdinfo", &[&d.nbd_uri("m0")]);
    assert!(!out.status.success(), "nbdinfo over the limit: {out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server replied with error to opt_go"), "{err}");

    // The first two never noticed.
    assert_eq!(a.read_at(0, 4096), data);
    b.write_at(4096, &data);
    assert_eq!(a.read_at(4096, 4096), data);
    assert_eq!(grpc.connections("m0"), 2);

    // A place freed is a place taken. The export's count drops a moment
    // before the server-wide one the accept loop checks, so a client that
    // comes at once may still be refused: retry until the deadline.
    drop(a);
    eventually("the first client's connection closes", || {
        grpc.connections("m0") == 1
    });
    let mut e = None;
    eventually("a client takes the freed place", || {
        let mut c = Raw::connect(d.nbd_addr());
        if c.try_greeting().is_err() {
            return false;
        }
        c.send(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes());
        e = Some(c);
        true
    });
    let mut e = e.expect("a connection");
    e.go("m0").expect("GO after the place was freed");
    assert_eq!(e.read_at(0, 4096), data);
}

// ---------------------------------------------------------------------------
// 7. Unshare and SIGTERM
// ---------------------------------------------------------------------------

/// Opens `m0`, sends an 8 KiB WRITE at `offset` with only the first half
/// of its payload (`first_half`), waits until the server has taken it, then
/// unshares `m0`. Returns the connection and the WRITE's handle.
fn half_sent_write_then_unshare(d: &Daemon, offset: u64, first_half: &[u8]) -> (Raw, u64) {
    let (mut c, _, _) = Raw::open(d.nbd_addr(), "m0");
    let taken = c.request(0, CMD_WRITE, offset, 8192, first_half);
    eventually("the server took the WRITE", || {
        metric(
            d,
            "io_engine_nbd_requests_total",
            &["export=\"m0\"", "cmd=\"write\""],
        ) == 1.0
    });
    d.ctl_ok(&["bdev", "unshare", "m0"]);
    (c, taken)
}

#[test]
fn an_unshare_answers_what_was_taken_refuses_the_rest_with_eshutdown_and_ends_with_a_fin() {
    let d = start(&["malloc:///m0?size_mb=8"], &["m0"], &[]);
    let data = random_bytes(8192, 11);
    // A WRITE the server takes before the unshare, its payload half sent.
    let (mut c, taken) = half_sent_write_then_unshare(&d, 8192, &data[..4096]);

    // Requests after the unshare are answered ESHUTDOWN, not executed; a
    // refused WRITE's payload is skipped (the next header is found).
    c.send(&data[4096..]);
    assert_eq!(
        c.simple_reply(),
        (0, taken),
        "the WRITE taken before is done"
    );
    let r = c.request(0, CMD_READ, 0, 4096, &[]);
    assert_eq!(c.simple_reply(), (ESHUTDOWN, r), "a READ after the unshare");
    let w = c.request(0, CMD_WRITE, 0, 4096, &[0xee; 4096]);
    assert_eq!(
        c.simple_reply(),
        (ESHUTDOWN, w),
        "a WRITE after the unshare"
    );
    let f = c.request(0, CMD_FLUSH, 0, 0, &[]);
    assert_eq!(
        c.simple_reply(),
        (ESHUTDOWN, f),
        "a FLUSH after the unshare"
    );
    // The client disconnects, as the spec has it do on ESHUTDOWN.
    c.request(0, CMD_DISC, 0, 0, &[]);
    c.expect_fin("after DISC");

    // The device is free: shared again, it holds the WRITE taken before
    // and not the refused one, and the refusals were counted.
    d.ctl_ok(&["bdev", "share", "m0"]);
    let (mut c, _, _) = Raw::open(d.nbd_addr(), "m0");
    assert_same(
        &c.read_at(8192, 8192),
        &data,
        "the WRITE taken before the unshare",
    );
    assert_eq!(
        c.read_at(0, 4096),
        vec![0; 4096],
        "the refused WRITE is not executed"
    );
    assert_eq!(
        metric(
            &d,
            "io_engine_nbd_errors_total",
            &["export=\"m0\"", "errno=\"ESHUTDOWN\""]
        ),
        3.0
    );

    // An idle client gets a FIN once the export goes, and the device can
    // be destroyed at once: the lingering socket holds nothing of it.
    d.ctl_ok(&["bdev", "unshare", "m0"]);
    c.expect_fin("an idle client after the unshare");
    d.ctl_ok(&["bdev", "destroy", "m0"]);
}

#[test]
fn a_write_whose_payload_stops_coming_does_not_hold_an_unshare_up() {
    let d = start(&["malloc:///m0?size_mb=8"], &["m0"], &[]);
    // A hostile client: half a WRITE's payload, then nothing.
    let unshared = Instant::now();
    let (mut c, _) = half_sent_write_then_unshare(&d, 0, &[0x5a; 4096]);
    // The server waits for the payload at most LINGER, then for the client
    // at most LINGER more, and ends the connection with a FIN.
    c.expect_fin("a client that stopped mid-payload");
    let took = unshared.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "the connection lasted {took:?} after the unshare"
    );
    d.ctl_ok(&["bdev", "destroy", "m0"]);
}

#[test]
fn a_pipelining_client_at_an_unshare_gets_every_request_answered_then_a_fin() {
    let d = start(&["malloc:///m0?size_mb=64"], &["m0"], &[]);
    let (mut c, _, _) = Raw::open(d.nbd_addr(), "m0");
    let mut sent = std::collections::HashSet::new();
    let mut answered = (0, 0);
    let mut unshared = false;
    // Bursts of 16 READs, with the unshare landing somewhere among them.
    for round in 0..64u64 {
        let mut burst = Vec::new();
        for i in 0..16 {
            sent.insert(c.push_read(&mut burst, ((round * 16 + i) % 1024) * 65536, 65536));
        }
        c.send(&burst);
        if round == 8 {
            d.ctl_ok(&["bdev", "unshare", "m0"]);
            unshared = true;
        }
        for _ in 0..16 {
            let (err, cookie) = c.simple_reply();
            assert!(sent.remove(&cookie), "a reply to a request sent: {cookie}");
            match err {
                0 => {
                    c.recv(65536);
                    answered.0 += 1;
                }
                ESHUTDOWN => {
                    assert!(unshared, "ESHUTDOWN before the unshare");
                    answered.1 += 1;
                }
                e => panic!("READ answered {e}"),
            }
        }
    }
    assert!(sent.is_empty());
    assert!(
        answered.0 >= 9 * 16,
        "reads before the unshare are served: {answered:?}"
    );
    assert!(answered.1 > 0, "reads after it are refused: {answered:?}");
    c.request(0, CMD_DISC, 0, 0, &[]);
    c.expect_fin("after DISC");
}

#[test]
fn sigterm_with_nbd_clients_and_fio_running_exits_0_within_5_s() {
    let dir = TempDir::new("term");
    let mut d = start(&["malloc:///m0?size_mb=64"], &["m0"], &[]);
    let grpc = Grpc::new(&d);
    let (mut idle, _, _) = Raw::open(d.nbd_addr(), "m0");
    assert_eq!(idle.read_at(0, 512), vec![0; 512]);

    let fio_out = dir.join("fio.json");
    let fio = Command::new("fio")
        .args([
            "--name=term",
            "--ioengine=nbd",
            &format!("--uri={}", d.nbd_uri("m0")),
            "--rw=randrw",
            "--bs=64k",
            "--iodepth=16",
            "--size=64M",
            "--time_based",
            "--runtime=30",
            "--output-format=json",
            &format!("--output={}", fio_out.display()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start fio");
    let mut fio = ChildGuard(fio);
    let before = grpc.io_stats("m0").write.unwrap_or_default().ops;
    eventually("fio's IO flows", || {
        grpc.io_stats("m0").write.unwrap_or_default().ops > before + 100
    });
    assert!(grpc.connections("m0") >= 2, "the idle client and fio");
    drop(grpc);

    let (status, took) = d.terminate();
    assert!(
        status.success(),
        "exit status {status} after SIGTERM\n{}",
        d.stderr()
    );
    assert!(took < Duration::from_secs(5), "SIGTERM took {took:?}");
    assert!(d.stderr().contains("io-engine stopped"), "{}", d.stderr());
    idle.expect_closed("after the daemon stopped");
    // fio loses its server and ends by itself.
    let deadline = Instant::now() + Duration::from_secs(10);
    while fio.0.try_wait().expect("fio status").is_none() {
        assert!(
            Instant::now() < deadline,
            "fio still runs after the daemon exited"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
