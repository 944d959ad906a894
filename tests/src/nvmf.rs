//! A small blocking NVMe/TCP host that speaks the protocol PDU by PDU, for
//! the tests: to drive the target as a host would (ICReq, Connect,
//! Property Set, commands with in-capsule data, R2T/H2CData, C2HData) and
//! to send what real hosts never do (bad headers, wrong tags, digests
//! that do not match), DH-HMAC-CHAP from the host's side (the responses
//! computed by Python's hashlib and hmac, never by the engine's code), and
//! what a hostile host watches for: how the target reacted to what it sent
//! ([`Reaction`]).
//!
//! Every socket has read and write timeouts: an answer that does not come
//! is an error, never a hang.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

/// Read and write timeout of the host's sockets.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The discovery subsystem.
pub const DISCOVERY_NQN: &str = "nqn.2014-08.org.nvmexpress.discovery";

/// The host NQN the tests connect as.
pub const HOST_NQN: &str = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-000000000001";

/// The subsystem NQN of device `name`.
pub fn nqn_of(name: &str) -> String {
    format!("nqn.2024-12.io.io-engine:{name}")
}

/// CRC-32C (Castagnoli), as NVMe/TCP digests use it.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A PDU as received.
#[derive(Debug, Clone)]
pub struct Pdu {
    /// Type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Header length.
    pub hlen: u8,
    /// Data offset.
    pub pdo: u8,
    /// The whole PDU.
    pub bytes: Vec<u8>,
}

impl Pdu {
    /// Little-endian u16 at `at`.
    pub fn u16_at(&self, at: usize) -> u16 {
        u16::from_le_bytes([self.bytes[at], self.bytes[at + 1]])
    }

    /// Little-endian u32 at `at`.
    pub fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().unwrap())
    }
}

/// A completion queue entry, as every host of the project reads one.
pub use io_engine::export::nvmf::Cqe;

/// A 64-byte command: the target's own submission queue entry, built
/// with its setters.
pub use io_engine::export::nvmf::Command as Sqe;

/// One queue pair's connection.
pub struct Host {
    /// The socket.
    pub sock: TcpStream,
    /// Header and data digests in use.
    pub digests: (bool, bool),
    /// The CATTR its Connect sends (0x04: SQ flow control disabled).
    pub cattr: u8,
    next_cid: u16,
}

impl Host {
    /// Connects to `addr` (no ICReq yet).
    pub fn tcp(addr: SocketAddr) -> io::Result<Host> {
        let sock = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        sock.set_read_timeout(Some(IO_TIMEOUT))?;
        sock.set_write_timeout(Some(IO_TIMEOUT))?;
        sock.set_nodelay(true)?;
        Ok(Host {
            sock,
            digests: (false, false),
            cattr: 0,
            next_cid: 1,
        })
    }

    /// Sends an ICReq asking for the given digests; returns the ICResp.
    pub fn ic(&mut self, hdgst: bool, ddgst: bool) -> io::Result<Pdu> {
        self.ic_hpda(hdgst, ddgst, 0)
    }

    /// [`Host::ic`] with HPDA `hpda`: the data of the PDUs the target
    /// sends starts at a multiple of `4 * (hpda + 1)` bytes.
    pub fn ic_hpda(&mut self, hdgst: bool, ddgst: bool, hpda: u8) -> io::Result<Pdu> {
        let mut req = vec![0u8; 128];
        req[..8].copy_from_slice(&[0, 0, 128, 0, 128, 0, 0, 0]);
        req[10] = hpda;
        req[11] = hdgst as u8 | (ddgst as u8) << 1;
        req[12..16].copy_from_slice(&15u32.to_le_bytes()); // MAXR2T 16
        self.sock.write_all(&req)?;
        let resp = self.recv()?;
        if resp.kind == 0x01 {
            self.digests = (resp.bytes[11] & 1 != 0, resp.bytes[11] & 2 != 0);
        }
        Ok(resp)
    }

    /// Sends raw bytes.
    pub fn send(&mut self, b: &[u8]) -> io::Result<()> {
        self.sock.write_all(b)
    }

    /// Receives one PDU.
    pub fn recv(&mut self) -> io::Result<Pdu> {
        let mut ch = [0u8; 8];
        self.sock.read_exact(&mut ch)?;
        let plen = u32::from_le_bytes(ch[4..8].try_into().unwrap()) as usize;
        if !(8..=64 << 20).contains(&plen) {
            return Err(io::Error::other(format!("PLEN {plen}")));
        }
        let mut bytes = ch.to_vec();
        bytes.resize(plen, 0);
        self.sock.read_exact(&mut bytes[8..])?;
        Ok(Pdu {
            kind: ch[0],
            flags: ch[1],
            hlen: ch[2],
            pdo: ch[3],
            bytes,
        })
    }

    /// Whether the target closed the connection (EOF) within the timeout.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 4096];
        loop {
            match self.sock.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }

    /// A command capsule for `sqe` (its CID set) with `data` in the capsule.
    pub fn capsule(&self, sqe: &Sqe, data: &[u8]) -> Vec<u8> {
        let (hd, dd) = self.digests;
        let hlen = 72;
        let hdl = if hd { 4 } else { 0 };
        let pdo = if data.is_empty() { 0 } else { hlen + hdl };
        let ddl = if dd && !data.is_empty() { 4 } else { 0 };
        let plen = hlen + hdl + data.len() + ddl;
        let mut b = vec![
            4u8,
            hd as u8 | ((dd && !data.is_empty()) as u8) << 1,
            hlen as u8,
            pdo as u8,
        ];
        b.extend_from_slice(&(plen as u32).to_le_bytes());
        b.extend_from_slice(&sqe.0);
        if hd {
            let c = crc32c(&b[..hlen]);
            b.extend_from_slice(&c.to_le_bytes());
        }
        b.extend_from_slice(data);
        if ddl > 0 {
            b.extend_from_slice(&crc32c(data).to_le_bytes());
        }
        b
    }

    /// An H2CData PDU.
    pub fn h2c_data(&self, cccid: u16, ttag: u16, offset: u32, data: &[u8], last: bool) -> Vec<u8> {
        let (hd, dd) = self.digests;
        let hdl = if hd { 4 } else { 0 };
        let ddl = if dd { 4 } else { 0 };
        let pdo = 24 + hdl;
        let plen = pdo + data.len() + ddl;
        let flags = (last as u8) << 2 | hd as u8 | (dd as u8) << 1;
        let mut b = vec![6u8, flags, 24, pdo as u8];
        b.extend_from_slice(&(plen as u32).to_le_bytes());
        b.extend_from_slice(&cccid.to_le_bytes());
        b.extend_from_slice(&ttag.to_le_bytes());
        b.extend_from_slice(&offset.to_le_bytes());
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        if hd {
            let c = crc32c(&b[..24]);
            b.extend_from_slice(&c.to_le_bytes());
        }
        b.extend_from_slice(data);
        if dd {
            b.extend_from_slice(&crc32c(data).to_le_bytes());
        }
        b
    }

    /// Runs one command: sends it (with `in_capsule` data), answers an R2T
    /// with `write` data, gathers C2HData; returns the completion and the
    /// data read.
    pub fn exec(
        &mut self,
        mut sqe: Sqe,
        in_capsule: &[u8],
        write: &[u8],
    ) -> io::Result<(Cqe, Vec<u8>)> {
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1).max(1);
        sqe.0[2..4].copy_from_slice(&cid.to_le_bytes());
        if !in_capsule.is_empty() {
            // SGL: data block, offset addressing, in the capsule.
            sqe.0[24..32].copy_from_slice(&0u64.to_le_bytes());
            sqe.0[32..36].copy_from_slice(&(in_capsule.len() as u32).to_le_bytes());
            sqe.0[39] = 0x01;
        } else if sqe.0[39] == 0 {
            sqe.0[39] = 0x5A;
        }
        let capsule = self.capsule(&sqe, in_capsule);
        self.sock.write_all(&capsule)?;
        let mut read = Vec::new();
        loop {
            let p = self.recv()?;
            match p.kind {
                0x05 => {
                    let at = 8;
                    let cqe = Cqe(p.bytes[at..at + 16].try_into().unwrap());
                    return Ok((cqe, read));
                }
                0x07 => {
                    let off = p.u32_at(12) as usize;
                    let len = p.u32_at(16) as usize;
                    let pdo = p.pdo as usize;
                    if read.len() < off + len {
                        read.resize(off + len, 0);
                    }
                    read[off..off + len].copy_from_slice(&p.bytes[pdo..pdo + len]);
                    if self.digests.1 {
                        let want = p.u32_at(pdo + len);
                        if crc32c(&p.bytes[pdo..pdo + len]) != want {
                            return Err(io::Error::other("C2HData digest mismatch"));
                        }
                    }
                }
                0x09 => {
                    let (cccid, ttag) = (p.u16_at(8), p.u16_at(10));
                    let (off, len) = (p.u32_at(12) as usize, p.u32_at(16) as usize);
                    let data = &write[off..off + len];
                    let pdu = self.h2c_data(cccid, ttag, off as u32, data, true);
                    self.sock.write_all(&pdu)?;
                }
                k => {
                    return Err(io::Error::other(format!(
                        "unexpected PDU type {k:#x}: {:?}",
                        p.bytes
                    )));
                }
            }
        }
    }

    /// An admin queue to `subnqn`, enabled, and one I/O queue of `sqsize`
    /// (0-based), each Connect checked; returns both and the controller ID.
    pub fn pair(addr: SocketAddr, subnqn: &str, sqsize: u16) -> (Host, Host, u16) {
        Host::pair_as(addr, subnqn, HOST_NQN, sqsize)
    }

    /// [`Host::pair`] for host `hostnqn`.
    pub fn pair_as(
        addr: SocketAddr,
        subnqn: &str,
        hostnqn: &str,
        sqsize: u16,
    ) -> (Host, Host, u16) {
        let (mut admin, cqe) = Host::admin_as(addr, subnqn, hostnqn).unwrap();
        assert_eq!(cqe.status(), 0, "admin Connect");
        let cntlid = cqe.dw0() as u16;
        assert_eq!(admin.set_cc(CC_ENABLE).unwrap().status(), 0);
        let (io, cqe) = Host::io_queue(addr, 1, sqsize, cntlid, subnqn, hostnqn).unwrap();
        assert_eq!(cqe.status(), 0, "I/O queue Connect");
        (admin, io, cntlid)
    }

    /// ICReq and Connect of an admin queue to `subnqn`; returns the host
    /// and the controller ID.
    pub fn admin(addr: SocketAddr, subnqn: &str, kato_ms: u32) -> io::Result<(Host, Cqe)> {
        let mut h = Host::tcp(addr)?;
        h.ic(false, false)?;
        let cqe = h.connect(0, 31, 0xFFFF, subnqn, HOST_NQN, kato_ms)?;
        Ok((h, cqe))
    }

    /// [`Host::admin`] for host `hostnqn`, without keep-alive timeout.
    pub fn admin_as(addr: SocketAddr, subnqn: &str, hostnqn: &str) -> io::Result<(Host, Cqe)> {
        let mut h = Host::tcp(addr)?;
        h.ic(false, false)?;
        let cqe = h.connect(0, 31, 0xFFFF, subnqn, hostnqn, 0)?;
        Ok((h, cqe))
    }

    /// ICReq and Connect of I/O queue `qid` (SQSIZE `sqsize`, 0-based) of
    /// controller `cntlid` for host `hostnqn`; returns the host and the
    /// Connect's completion, whatever its status.
    pub fn io_queue(
        addr: SocketAddr,
        qid: u16,
        sqsize: u16,
        cntlid: u16,
        subnqn: &str,
        hostnqn: &str,
    ) -> io::Result<(Host, Cqe)> {
        let mut h = Host::tcp(addr)?;
        h.ic(false, false)?;
        let cqe = h.connect(qid, sqsize, cntlid, subnqn, hostnqn, 0)?;
        Ok((h, cqe))
    }

    /// Connect of queue `qid` (SQSIZE `sqsize`, 0-based).
    pub fn connect(
        &mut self,
        qid: u16,
        sqsize: u16,
        cntlid: u16,
        subnqn: &str,
        hostnqn: &str,
        kato_ms: u32,
    ) -> io::Result<Cqe> {
        let data = io_engine::export::nvmf::command::connect_data(cntlid, subnqn, hostnqn);
        let sqe = Sqe::connect(qid, sqsize, self.cattr, kato_ms);
        Ok(self.exec(sqe, &data, &[])?.0)
    }

    /// Property Set of CC (4 bytes).
    pub fn set_cc(&mut self, cc: u32) -> io::Result<Cqe> {
        let sqe = Sqe::fabrics(0x00)
            .with_bytes(44, &0x14u32.to_le_bytes())
            .with_bytes(48, &(cc as u64).to_le_bytes());
        Ok(self.exec(sqe, &[], &[])?.0)
    }

    /// Property Get at `offset` (8 bytes when `wide`).
    pub fn get_property(&mut self, offset: u32, wide: bool) -> io::Result<u64> {
        let sqe = Sqe::fabrics(0x04)
            .with_bytes(40, &[wide as u8])
            .with_bytes(44, &offset.to_le_bytes());
        let (cqe, _) = self.exec(sqe, &[], &[])?;
        Ok(cqe.dw0() as u64 | (cqe.dw1() as u64) << 32)
    }

    /// A data-in admin command (Identify, Get Log Page) of `len` bytes.
    pub fn read_admin(&mut self, sqe: Sqe, len: u32) -> io::Result<(Cqe, Vec<u8>)> {
        let sqe = sqe
            .with_bytes(32, &len.to_le_bytes())
            .with_bytes(39, &[0x5A]);
        self.exec(sqe, &[], &[])
    }

    /// The first `len` bytes (a multiple of 4) of the discovery log page
    /// (70h).
    pub fn discovery_log(&mut self, len: u32) -> io::Result<(Cqe, Vec<u8>)> {
        self.read_admin(discovery_log_command(len), len)
    }

    /// Set Features, Number of Queues: asks for `n` I/O queues; the
    /// completion's dword 0 says how many were granted (0-based).
    pub fn set_queues(&mut self, n: u16) -> io::Result<Cqe> {
        let n = u32::from(n - 1);
        let sqe = Sqe::new(0x09, 0)
            .with_cdw(10, 0x07)
            .with_cdw(11, n | n << 16);
        Ok(self.exec(sqe, &[], &[])?.0)
    }

    /// Keep Alive.
    pub fn keep_alive(&mut self) -> io::Result<Cqe> {
        Ok(self.exec(Sqe::new(0x18, 0), &[], &[])?.0)
    }

    /// AUTH_Send of DH-HMAC-CHAP message `msg`, in the capsule.
    pub fn auth_send(&mut self, msg: &[u8]) -> io::Result<Cqe> {
        Ok(self.exec(auth_send_command(msg.len() as u32), msg, &[])?.0)
    }

    /// AUTH_Receive with an allocation length (and SGL length) of `len`.
    pub fn auth_receive(&mut self, len: u32) -> io::Result<(Cqe, Vec<u8>)> {
        let sqe = Sqe::fabrics(0x06)
            .with_bytes(41, &[0x01, 0x01, 0xE9])
            .with_bytes(44, &len.to_le_bytes());
        self.read_admin(sqe, len)
    }

    /// DH-HMAC-CHAP with the NULL DH group and SHA-256, transaction `tid`:
    /// Negotiate, Challenge, Reply with `secret`'s response (by Python);
    /// returns the last message the target sent (Success1 or Failure1).
    /// Errors when a step's status is not success or the Challenge is not
    /// one.
    pub fn authenticate(
        &mut self,
        secret: &str,
        hostnqn: &str,
        subnqn: &str,
        tid: u16,
    ) -> io::Result<Vec<u8>> {
        let fail = |what: &str| Err(io::Error::other(what.to_string()));
        let cqe = self.auth_send(&negotiate(tid, &[HASH_SHA256], &[DHGROUP_NULL]))?;
        if cqe.status() != 0 {
            return fail(&format!("Negotiate: status {:#x}", cqe.status()));
        }
        let (cqe, c) = self.auth_receive(4096)?;
        if cqe.status() != 0 || c.len() < 48 || (c[0], c[1], c[6]) != (1, 0x01, 32) {
            return fail(&format!(
                "no Challenge (status {:#x}): {:?}",
                cqe.status(),
                &c[..c.len().min(16)]
            ));
        }
        let s1 = u32::from_le_bytes(c[12..16].try_into().unwrap());
        let r = dhchap_response(secret, hostnqn, subnqn, &c[16..48], s1, tid);
        let mut reply = vec![0u8; 16 + 64];
        reply[..2].copy_from_slice(&[0x01, 0x02]);
        reply[4..6].copy_from_slice(&tid.to_le_bytes());
        reply[6] = 32;
        reply[16..48].copy_from_slice(&r);
        let cqe = self.auth_send(&reply)?;
        if cqe.status() != 0 {
            return fail(&format!("Reply: status {:#x}", cqe.status()));
        }
        let (cqe, answer) = self.auth_receive(4096)?;
        if cqe.status() != 0 {
            return fail(&format!("after the Reply: status {:#x}", cqe.status()));
        }
        Ok(answer)
    }

    /// Reads what the target sends until it closes the connection (EOF or
    /// a reset), says nothing for `quiet`, or `within` has passed (at most
    /// 10000 PDUs); the socket's read timeout is [`IO_TIMEOUT`] again
    /// after.
    pub fn react(&mut self, quiet: Duration, within: Duration) -> Reaction {
        let end = Instant::now() + within;
        let mut r = Reaction {
            pdus: Vec::new(),
            closed: false,
        };
        while r.pdus.len() < 10_000 {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let _ = self.sock.set_read_timeout(Some(left.min(quiet)));
            match self.recv() {
                Ok(p) => r.pdus.push(p),
                Err(e) => {
                    r.closed = matches!(
                        e.kind(),
                        io::ErrorKind::UnexpectedEof
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionAborted
                    );
                    break;
                }
            }
        }
        let _ = self.sock.set_read_timeout(Some(IO_TIMEOUT));
        r
    }
}

/// How the target reacted to what a host sent: the PDUs it sent, and
/// whether it closed the connection.
#[derive(Debug)]
pub struct Reaction {
    /// The PDUs, in order.
    pub pdus: Vec<Pdu>,
    /// The target closed the connection (EOF or a reset).
    pub closed: bool,
}

impl Reaction {
    /// Whether a C2HTermReq came.
    pub fn terminated(&self) -> bool {
        self.pdus.iter().any(|p| p.kind == 0x03)
    }

    /// The completions that came, in order.
    pub fn completions(&self) -> Vec<Cqe> {
        self.pdus
            .iter()
            .filter(|p| p.kind == 0x05 && p.bytes.len() >= 24)
            .map(|p| Cqe(p.bytes[8..24].try_into().unwrap()))
            .collect()
    }

    /// Whether command `cid` was answered with a status other than
    /// success.
    pub fn failed(&self, cid: u16) -> bool {
        self.completions()
            .iter()
            .any(|c| c.cid() == cid && c.status() != 0)
    }

    /// The PDU types that came, for messages.
    pub fn kinds(&self) -> Vec<u8> {
        self.pdus.iter().map(|p| p.kind).collect()
    }
}

/// Get Log Page of the first `len` bytes (a multiple of 4) of the
/// discovery log (70h), its data by C2HData.
pub fn discovery_log_command(len: u32) -> Sqe {
    let numd = len / 4 - 1;
    Sqe::new(0x02, 0)
        .with_cdw(10, 0x70 | numd << 16)
        .with_bytes(32, &len.to_le_bytes())
        .with_bytes(39, &[0x5A])
}

/// AUTH_Send of `len` bytes (DH-HMAC-CHAP: SECP E9h, SPSP 01h 01h); its
/// data in the capsule once [`Host::exec`] or [`Sqe::set_sgl`] says so.
pub fn auth_send_command(len: u32) -> Sqe {
    Sqe::fabrics(0x05)
        .with_bytes(41, &[0x01, 0x01, 0xE9])
        .with_bytes(44, &len.to_le_bytes())
}

/// DH-HMAC-CHAP hash identifier of SHA-256.
pub const HASH_SHA256: u8 = 0x01;
/// DH-HMAC-CHAP group identifiers: NULL (no DH) and ffdhe2048.
pub const DHGROUP_NULL: u8 = 0x00;
/// ffdhe2048.
pub const DHGROUP_FFDHE2048: u8 = 0x01;

/// A Negotiate message (72 bytes): transaction `tid`, no secure channel,
/// one DH-HMAC-CHAP descriptor offering `hashes` and `groups`.
pub fn negotiate(tid: u16, hashes: &[u8], groups: &[u8]) -> Vec<u8> {
    let mut m = vec![0u8; 72];
    m[4..6].copy_from_slice(&tid.to_le_bytes());
    m[7] = 1; // one protocol descriptor
    m[8] = 1; // DH-HMAC-CHAP
    m[10] = hashes.len() as u8;
    m[11] = groups.len() as u8;
    m[12..12 + hashes.len()].copy_from_slice(hashes);
    m[42..42 + groups.len()].copy_from_slice(groups);
    m
}

/// A Failure2 message (8 bytes), as a host ends a transaction:
/// transaction `tid`, reason "authentication failure", explanation
/// "failed".
pub fn failure2(tid: u16) -> Vec<u8> {
    let mut m = vec![0x00, 0xF0, 0, 0, 0, 0, 0x01, 0x01];
    m[4..6].copy_from_slice(&tid.to_le_bytes());
    m
}

/// A fresh DH-HMAC-CHAP secret as `nvme gen-dhchap-key --hmac=1` prints
/// it (`DHHC-1:01:BASE64:`, a 32-byte key and its CRC-32), by Python.
pub fn dhchap_secret() -> String {
    const GEN: &str = r#"
import os, zlib, base64
k = os.urandom(32)
print("DHHC-1:01:" + base64.b64encode(k + zlib.crc32(k).to_bytes(4, "little")).decode() + ":")
"#;
    let out = Command::new("python3")
        .args(["-c", GEN])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The host's DH-HMAC-CHAP response (NULL DH group, SHA-256), by Python:
/// HMAC(transformed key, C1 || SEQNUM || T_ID || 00h || "HostHost" ||
/// NQNh || 00h || NQNs).
pub fn dhchap_response(
    secret: &str,
    hostnqn: &str,
    subnqn: &str,
    c1: &[u8],
    s1: u32,
    tid: u16,
) -> Vec<u8> {
    const PY: &str = r#"
import sys, hmac, hashlib, base64
secret, host, sub, c1, s1, tid = sys.argv[1:]
_, hh, b64 = secret.split(':')[:3]
key = base64.b64decode(b64)[:-4]
if int(hh):
    key = hmac.new(key, host.encode() + b"NVMe-over-Fabrics", hashlib.sha256).digest()
msg = bytes.fromhex(c1) + int(s1).to_bytes(4, 'little') + int(tid).to_bytes(2, 'little') \
    + b'\0' + b'HostHost' + host.encode() + b'\0' + sub.encode()
print(hmac.new(key, msg, hashlib.sha256).hexdigest())
"#;
    let c1: String = c1.iter().map(|b| format!("{b:02x}")).collect();
    let (s1, tid) = (s1.to_string(), tid.to_string());
    let out = Command::new("python3")
        .args(["-c", PY, secret, hostnqn, subnqn, &c1, &s1, &tid])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{out:?}");
    let hex = String::from_utf8(out.stdout).unwrap();
    let hex = hex.trim();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// CC with EN set and the queue entry sizes a host sets.
pub const CC_ENABLE: u32 = 1 | 6 << 16 | 4 << 20;
