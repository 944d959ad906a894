//! A queue pair in blocking mode, for what happens before the run: the
//! ICReq exchange, Connect, and the admin commands (Property Get/Set,
//! Identify, Set Features) one at a time. An I/O queue leaves it as its
//! socket once connected, for a worker to drive without blocking.
//!
//! Thread: `main`. Every socket call has a timeout: a target that does
//! not answer is a one-line error, never a hang.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use io_engine::export::nvmf::command::{Command, connect_data, fctype, sgl};
use io_engine::export::nvmf::pdu::{Digests, flags, kind};

use super::wire;
use io_engine::export::nvmf::Cqe;

/// Longest wait for a connection or an answer during setup.
const TIMEOUT: Duration = Duration::from_secs(10);

/// One queue pair being set up.
pub struct SetupQueue {
    sock: TcpStream,
    digests: Digests,
    /// MAXH2CDATA from the ICResp.
    pub maxh2cdata: u32,
    next_cid: u16,
    out: Vec<u8>,
}

impl SetupQueue {
    /// Connects to `addr` and exchanges ICReq/ICResp asking for `digests`;
    /// fails unless the target grants them.
    pub fn open(addr: SocketAddr, digests: Digests) -> Result<SetupQueue, String> {
        let sock = TcpStream::connect_timeout(&addr, TIMEOUT)
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let set = |r: std::io::Result<()>| r.map_err(|e| format!("socket to {addr}: {e}"));
        set(sock.set_read_timeout(Some(TIMEOUT)))?;
        set(sock.set_write_timeout(Some(TIMEOUT)))?;
        set(sock.set_nodelay(true))?;
        let mut q = SetupQueue {
            sock,
            digests: Digests::default(),
            maxh2cdata: 0,
            next_cid: 0,
            out: Vec::with_capacity(2048),
        };
        wire::put_ic_req(&mut q.out, digests);
        q.send()?;
        let resp = q.recv()?;
        if resp[0] != kind::IC_RESP {
            return Err(format!(
                "{addr} answered ICReq with PDU type {:#x}",
                resp[0]
            ));
        }
        let granted = Digests {
            header: resp[11] & 1 != 0,
            data: resp[11] & 2 != 0,
        };
        if granted != digests {
            return Err(format!(
                "{addr} did not grant the digests asked for (header {}, data {})",
                granted.header, granted.data
            ));
        }
        q.digests = granted;
        q.maxh2cdata = u32::from_le_bytes(resp[12..16].try_into().expect("4 bytes"));
        if q.maxh2cdata < 4096 {
            return Err(format!("{addr}: MAXH2CDATA {} is below 4096", q.maxh2cdata));
        }
        Ok(q)
    }

    fn send(&mut self) -> Result<(), String> {
        let r = self.sock.write_all(&self.out);
        self.out.clear();
        r.map_err(|e| format!("sending to the target: {e}"))
    }

    /// One whole PDU.
    fn recv(&mut self) -> Result<Vec<u8>, String> {
        let gone = |e: std::io::Error| format!("reading from the target: {e}");
        let mut b = vec![0u8; wire::HEADER];
        self.sock.read_exact(&mut b).map_err(gone)?;
        let plen = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")) as usize;
        if !(wire::HEADER..=wire::max_pdu(16 << 20)).contains(&plen) {
            return Err(format!("the target sent a PDU of PLEN {plen}"));
        }
        b.resize(plen, 0);
        self.sock.read_exact(&mut b[wire::HEADER..]).map_err(gone)?;
        if b[0] == kind::C2H_TERM_REQ {
            return Err(wire::term_req(&b));
        }
        Ok(b)
    }

    /// Runs one command with `data` in the capsule (none when empty) and
    /// `read` bytes of data from the target; returns the completion and
    /// the data.
    pub fn exec(
        &mut self,
        mut sqe: Command,
        data: &[u8],
        read: u32,
    ) -> Result<(Cqe, Vec<u8>), String> {
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1);
        sqe.set_cid(cid);
        if !data.is_empty() {
            sqe.set_sgl(data.len() as u32, sgl::IN_CAPSULE);
        } else {
            sqe.set_sgl(read, sgl::TRANSPORT);
        }
        wire::put_capsule(&mut self.out, &sqe, data, self.digests);
        self.send()?;
        let mut got = vec![0u8; read as usize];
        loop {
            let p = self.recv()?;
            let (at, len) = wire::received(&p, self.digests)?;
            match p[0] {
                kind::CAPSULE_RESP => {
                    let cqe = Cqe::from_slice(&p[8..]).ok_or("a response capsule cut short")?;
                    if cqe.cid() != cid {
                        return Err(format!("a completion for CID {} (sent {cid})", cqe.cid()));
                    }
                    return Ok((cqe, got));
                }
                kind::C2H_DATA => {
                    let off = u32::from_le_bytes(p[12..16].try_into().expect("4 bytes")) as usize;
                    if off + len > got.len() {
                        return Err("C2HData beyond the command's buffer".into());
                    }
                    if !wire::data_digest_ok(&p, at, len, self.digests) {
                        return Err("data digest mismatch in C2HData".into());
                    }
                    got[off..off + len].copy_from_slice(&p[at..at + len]);
                    if p[1] & flags::SUCCESS != 0 {
                        // No response capsule follows: the command succeeded.
                        let mut cqe = [0u8; 16];
                        cqe[12..14].copy_from_slice(&cid.to_le_bytes());
                        return Ok((Cqe(cqe), got));
                    }
                }
                k => return Err(format!("unexpected PDU type {k:#x} during setup")),
            }
        }
    }

    /// Fabrics Connect of queue `qid` with `entries` entries to
    /// controller `cntlid` (0xFFFF: a new one, on the admin queue).
    pub fn connect(
        &mut self,
        qid: u16,
        entries: u16,
        cntlid: u16,
        subnqn: &str,
        hostnqn: &str,
    ) -> Result<Cqe, String> {
        let data = connect_data(cntlid, subnqn, hostnqn);
        let sqe = Command::connect(qid, entries - 1, 0, 0);
        Ok(self.exec(sqe, &data, 0)?.0)
    }

    /// Property Get at `offset`, 8 bytes when `wide`.
    pub fn get_property(&mut self, offset: u32, wide: bool) -> Result<u64, String> {
        let sqe = Command::fabrics(fctype::PROPERTY_GET)
            .with_bytes(40, &[wide as u8])
            .with_bytes(44, &offset.to_le_bytes());
        let (cqe, _) = self.exec(sqe, &[], 0)?;
        if cqe.status() != 0 {
            return Err(format!(
                "Property Get {offset:#x}: status {:#x}",
                cqe.status()
            ));
        }
        Ok(cqe.dw0() as u64 | (cqe.dw1() as u64) << 32)
    }

    /// Property Set of a 4-byte property.
    pub fn set_property(&mut self, offset: u32, value: u32) -> Result<(), String> {
        let sqe = Command::fabrics(fctype::PROPERTY_SET)
            .with_bytes(44, &offset.to_le_bytes())
            .with_bytes(48, &(value as u64).to_le_bytes());
        let (cqe, _) = self.exec(sqe, &[], 0)?;
        match cqe.status() {
            0 => Ok(()),
            s => Err(format!("Property Set {offset:#x}: status {s:#x}")),
        }
    }

    /// The socket, for a worker: non-blocking from now on.
    pub fn into_socket(self) -> Result<TcpStream, String> {
        self.sock
            .set_nonblocking(true)
            .map_err(|e| format!("socket: {e}"))?;
        Ok(self.sock)
    }
}
