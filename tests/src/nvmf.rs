//! A small blocking NVMe/TCP host that speaks the protocol PDU by PDU, for
//! the tests: to drive the target as a host would (ICReq, Connect,
//! Property Set, commands with in-capsule data, R2T/H2CData, C2HData) and
//! to send what real hosts never do (bad headers, wrong tags, digests
//! that do not match).
//!
//! Every socket has read and write timeouts: an answer that does not come
//! is an error, never a hang.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

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

/// A completion queue entry.
#[derive(Debug, Clone, Copy)]
pub struct Cqe(pub [u8; 16]);

impl Cqe {
    /// Dword 0.
    pub fn dw0(&self) -> u32 {
        u32::from_le_bytes(self.0[0..4].try_into().unwrap())
    }

    /// Dword 1.
    pub fn dw1(&self) -> u32 {
        u32::from_le_bytes(self.0[4..8].try_into().unwrap())
    }

    /// Command identifier.
    pub fn cid(&self) -> u16 {
        u16::from_le_bytes([self.0[12], self.0[13]])
    }

    /// Status: type in bits 10:8, code in bits 7:0 (0: success).
    pub fn status(&self) -> u16 {
        let sf = u16::from_le_bytes([self.0[14], self.0[15]]);
        (sf >> 1) & 0x7FF
    }
}

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
        let mut req = vec![0u8; 128];
        req[..8].copy_from_slice(&[0, 0, 128, 0, 128, 0, 0, 0]);
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
        let (mut admin, cqe) = Host::admin(addr, subnqn, 0).unwrap();
        assert_eq!(cqe.status(), 0, "admin Connect");
        let cntlid = cqe.dw0() as u16;
        assert_eq!(admin.set_cc(CC_ENABLE).unwrap().status(), 0);
        let mut io = Host::tcp(addr).unwrap();
        io.ic(false, false).unwrap();
        let cqe = io.connect(1, sqsize, cntlid, subnqn, HOST_NQN, 0).unwrap();
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
        let mut data = vec![0u8; 1024];
        data[16..18].copy_from_slice(&cntlid.to_le_bytes());
        data[256..256 + subnqn.len()].copy_from_slice(subnqn.as_bytes());
        data[512..512 + hostnqn.len()].copy_from_slice(hostnqn.as_bytes());
        let sqe = Sqe::fabrics(0x01)
            .with_bytes(42, &qid.to_le_bytes())
            .with_bytes(44, &sqsize.to_le_bytes())
            .with_bytes(46, &[self.cattr])
            .with_bytes(48, &kato_ms.to_le_bytes());
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
        let numd = len / 4 - 1;
        self.read_admin(Sqe::new(0x02, 0).with_cdw(10, 0x70 | numd << 16), len)
    }
}

/// CC with EN set and the queue entry sizes a host sets.
pub const CC_ENABLE: u32 = 1 | 6 << 16 | 4 << 20;
