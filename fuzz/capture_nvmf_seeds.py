#!/usr/bin/env python3
"""Capture real NVMe/TCP host traffic as seeds of the nvmf_queue_pair target.

Runs the release io-engine daemon on 127.0.0.1 with the fuzz target's two
devices (disk0: malloc, 1 MiB, 512-byte blocks, writable; null0: null,
1 GiB, 4 KiB blocks, read-only), both shared over NVMe/TCP, puts the
recording TCP proxy of capture_seeds.py in front of it, and drives two
hosts through the proxy:

- nvmf-perf (target/release/nvmf-perf): reads and writes in the capsule
  and by R2T/H2CData, Copy, verify, with and without digests;
- a small raw-socket host (below) sending the PDU sequences of the tests
  crate's NVMe/TCP tests (tests/src/nvmf.rs): Property Get/Set, Identify,
  Get Log Page (the discovery log too), Get/Set Features, Asynchronous
  Event Requests, Keep Alive, Abort, Compare, Write Zeroes, Dataset
  Management, Copy, Flush, Disconnect; it checks every answer's status.

Every recorded host->target stream (one per connection) becomes one seed
in corpus/nvmf_queue_pair/: a scenario byte (see the target's doc comment:
the queue, the digests and the device of the stream's ICReq and Connect),
then what the host sent after its Connect, cut at a PDU boundary after at
most MAX_PDUS PDUs and MAX_BYTES bytes, so that seeds stay small.

Build the binaries first (cargo build --release --bins). Only loopback
addresses are used; the daemon is stopped at the end.

Usage: python3 fuzz/capture_nvmf_seeds.py   (from the workspace root or fuzz/)
"""

import os
import socket
import struct
import subprocess
import sys
import time

from capture_seeds import Proxy, free_port, write_seed

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus", "nvmf_queue_pair")
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
RELEASE = os.path.join(TARGET_DIR, "release")
DISCOVERY_NQN = "nqn.2014-08.org.nvmexpress.discovery"
HOST_NQN = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-000000000001"
DEVICES = ["disk0", "null0"]
MAX_PDUS = 32
MAX_BYTES = 20 << 10
CC_ENABLE = 1 | 6 << 16 | 4 << 20
CC_SHUTDOWN = CC_ENABLE | 1 << 14
WRITE_PROTECTED = 0x20


def nqn_of(name):
    return f"nqn.2024-12.io.io-engine:{name}"


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def sqe(opcode, nsid=0, **cdw):
    """A 64-byte command; cdw10=... style keyword arguments set dwords."""
    b = bytearray(64)
    b[0] = opcode
    b[4:8] = struct.pack("<I", nsid)
    for name, v in cdw.items():
        n = int(name[3:])
        b[n * 4:n * 4 + 4] = struct.pack("<I", v & 0xFFFFFFFF)
    return b


def fabrics(fctype):
    b = sqe(0x7F)
    b[4] = fctype
    return b


class Host:
    """One queue pair, blocking, with a 5 s timeout on every read."""

    def __init__(self, port, hdgst=False, ddgst=False):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.hd, self.dd = hdgst, ddgst
        self.cid = 1
        req = bytearray(128)
        req[0:8] = bytes([0, 0, 128, 0, 128, 0, 0, 0])
        req[11] = hdgst | ddgst << 1
        req[12:16] = struct.pack("<I", 15)
        self.sock.sendall(req)
        assert self.recv()[0] == 0x01, "no ICResp"

    def recv_exact(self, n):
        b = bytearray()
        while len(b) < n:
            chunk = self.sock.recv(n - len(b))
            if not chunk:
                raise EOFError("the target closed the connection")
            b += chunk
        return bytes(b)

    def recv(self):
        ch = self.recv_exact(8)
        plen = struct.unpack("<I", ch[4:8])[0]
        return ch + self.recv_exact(plen - 8)

    def capsule(self, cmd, data):
        hdl = 4 if self.hd else 0
        ddl = 4 if self.dd and data else 0
        pdo = 72 + hdl if data else 0
        plen = 72 + hdl + len(data) + ddl
        b = bytearray([4, self.hd | (1 if ddl else 0) << 1, 72, pdo])
        b += struct.pack("<I", plen) + cmd
        if self.hd:
            b += struct.pack("<I", crc32c(b[:72]))
        b += data
        if ddl:
            b += struct.pack("<I", crc32c(data))
        return bytes(b)

    def h2c_data(self, cccid, ttag, offset, data):
        hdl = 4 if self.hd else 0
        ddl = 4 if self.dd else 0
        pdo = 24 + hdl
        flags = 1 << 2 | self.hd | self.dd << 1
        b = bytearray([6, flags, 24, pdo])
        b += struct.pack("<IHHII4x", pdo + len(data) + ddl, cccid, ttag, offset, len(data))
        if self.hd:
            b += struct.pack("<I", crc32c(b[:24]))
        b += data
        if ddl:
            b += struct.pack("<I", crc32c(data))
        return bytes(b)

    def send(self, cmd, in_capsule=b"", length=0):
        """Sends a command (CID set, SGL for in-capsule data or `length`
        bytes by the transport); returns its CID."""
        cid = self.cid
        self.cid += 1
        cmd = bytearray(cmd)
        cmd[2:4] = struct.pack("<H", cid)
        if in_capsule:
            cmd[32:36] = struct.pack("<I", len(in_capsule))
            cmd[39] = 0x01
        elif length:
            cmd[32:36] = struct.pack("<I", length)
            cmd[39] = 0x5A
        self.sock.sendall(self.capsule(bytes(cmd), in_capsule))
        return cid

    def exec(self, cmd, in_capsule=b"", length=0, write=b"", expect=0):
        """Runs a command: answers R2Ts with `write`, gathers C2HData;
        checks the status; returns (dw0, data read)."""
        self.send(cmd, in_capsule, length or len(write))
        read = bytearray()
        while True:
            p = self.recv()
            if p[0] == 0x05:
                dw0, _, _, _, _, sf = struct.unpack("<IIHHHH", p[8:24])
                status = sf >> 1 & 0x7FF
                assert status == expect, f"status {status:#x}, expected {expect:#x}"
                return dw0, bytes(read)
            if p[0] == 0x07:
                pdo = p[3]
                off, n = struct.unpack("<II", p[12:20])
                read[off:off + n] = p[pdo:pdo + n]
            elif p[0] == 0x09:
                cccid, ttag, off, n = struct.unpack("<HHII", p[8:20])
                self.sock.sendall(self.h2c_data(cccid, ttag, off, write[off:off + n]))
            else:
                raise AssertionError(f"unexpected PDU {p[:24].hex()}")

    def connect(self, qid, cntlid, subnqn, kato_ms=0):
        data = bytearray(1024)
        data[16:18] = struct.pack("<H", cntlid)
        data[256:256 + len(subnqn)] = subnqn.encode()
        data[512:512 + len(HOST_NQN)] = HOST_NQN.encode()
        cmd = fabrics(0x01)
        cmd[42:44] = struct.pack("<H", qid)
        cmd[44:46] = struct.pack("<H", 31)
        cmd[48:52] = struct.pack("<I", kato_ms)
        return self.exec(cmd, bytes(data))[0]

    def get_property(self, offset, wide=False):
        cmd = fabrics(0x04)
        cmd[40] = wide
        cmd[44:48] = struct.pack("<I", offset)
        return self.exec(cmd)[0]

    def set_cc(self, cc):
        cmd = fabrics(0x00)
        cmd[44:48] = struct.pack("<I", 0x14)
        cmd[48:56] = struct.pack("<Q", cc)
        self.exec(cmd)

    def read_admin(self, cmd, length):
        return self.exec(cmd, length=length)[1]

    def get_log(self, lid, length, offset=0):
        numd = length // 4 - 1
        cmd = sqe(0x02, 0xFFFFFFFF, cdw10=lid | (numd & 0xFFFF) << 16,
                  cdw11=numd >> 16, cdw12=offset)
        return self.read_admin(cmd, length)

    def disconnect(self):
        self.exec(fabrics(0x08))
        self.sock.close()


def rw(opcode, slba, nlb, nsid=1):
    return sqe(opcode, nsid, cdw10=slba, cdw11=slba >> 32, cdw12=nlb - 1)


def host_discovery(port):
    h = Host(port)
    h.connect(0, 0xFFFF, DISCOVERY_NQN, 30000)
    h.get_property(0x00, wide=True)
    h.set_cc(CC_ENABLE)
    h.get_property(0x1C)
    h.read_admin(sqe(0x06, 0, cdw10=1), 4096)
    h.get_log(0x70, 1024)
    h.get_log(0x70, 4096)
    h.get_log(0x70, 1024, offset=1024)
    h.exec(sqe(0x18))
    h.set_cc(CC_SHUTDOWN)
    h.get_property(0x1C)
    h.disconnect()


def host_admin(port, name):
    h = Host(port)
    h.connect(0, 0xFFFF, nqn_of(name), 30000)
    h.get_property(0x00, wide=True)
    h.get_property(0x08)
    h.set_cc(CC_ENABLE)
    h.get_property(0x14)
    h.get_property(0x1C)
    for cns, nsid in [(1, 0), (0, 1), (2, 0), (3, 1)]:
        h.read_admin(sqe(0x06, nsid, cdw10=cns), 4096)
    for cns in (5, 6):
        h.read_admin(sqe(0x06, 1, cdw10=cns), 4096)
    h.exec(sqe(0x06, 2, cdw10=0), length=4096, expect=0x0B)
    for lid, length in [(0x01, 64), (0x02, 512), (0x03, 512), (0x04, 4096), (0x05, 4096)]:
        h.get_log(lid, length)
    h.exec(sqe(0x09, cdw10=0x07, cdw11=3 | 3 << 16))
    for fid in (0x01, 0x02, 0x04, 0x05, 0x06, 0x07, 0x0B, 0x0F):
        h.exec(sqe(0x0A, cdw10=fid))
    h.exec(sqe(0x09, cdw10=0x0F, cdw11=15000))
    h.exec(sqe(0x09, cdw10=0x0B, cdw11=0x100))
    h.exec(sqe(0x09, cdw10=0x04, cdw11=343))
    # Two Asynchronous Event Requests, held by the target.
    aer = h.send(sqe(0x0C))
    h.send(sqe(0x0C))
    h.exec(sqe(0x18))
    h.exec(sqe(0x08, cdw10=aer << 16))
    h.set_cc(CC_SHUTDOWN)
    h.get_property(0x1C)
    h.disconnect()


def io_admin(port, name):
    """An enabled admin queue that lets I/O queues connect; its cntlid."""
    h = Host(port)
    cntlid = h.connect(0, 0xFFFF, nqn_of(name), 30000)
    h.set_cc(CC_ENABLE)
    h.exec(sqe(0x09, cdw10=0x07, cdw11=3 | 3 << 16))
    return h, cntlid


def host_io_disk(port, hdgst, ddgst):
    admin, cntlid = io_admin(port, "disk0")
    q = Host(port, hdgst, ddgst)
    q.connect(1, cntlid, nqn_of("disk0"))
    small = bytes(range(256)) * 4            # 2 blocks, in the capsule
    large = bytes(reversed(range(256))) * 16  # 8 blocks, by R2T
    q.exec(rw(0x01, 0, 2), small)
    assert q.exec(rw(0x02, 0, 2), length=len(small))[1] == small
    q.exec(rw(0x01, 64, 8), write=large)
    assert q.exec(rw(0x02, 64, 8), length=len(large))[1] == large
    q.exec(rw(0x05, 0, 2), small)
    q.exec(rw(0x05, 64, 8), write=large)
    q.exec(rw(0x05, 0, 2), bytes(len(small)), expect=0x285)
    q.exec(rw(0x08, 128, 16))
    ranges = struct.pack("<IIQ", 0, 4, 256) + struct.pack("<IIQ", 0, 8, 300)
    q.exec(sqe(0x09, 1, cdw10=1, cdw11=4), ranges)
    copy = struct.pack("<8xQH14x", 0, 7) + struct.pack("<8xQH14x", 64, 3)
    q.exec(sqe(0x19, 1, cdw10=512, cdw11=0, cdw12=1), copy)
    q.exec(sqe(0x00, 1))
    q.disconnect()
    admin.set_cc(CC_SHUTDOWN)
    admin.disconnect()


def host_io_null(port):
    admin, cntlid = io_admin(port, "null0")
    q = Host(port)
    q.connect(1, cntlid, nqn_of("null0"))
    assert q.exec(rw(0x02, 0, 1), length=4096)[1] == bytes(4096)
    q.exec(rw(0x02, 1000, 4), length=16 << 10)
    q.exec(rw(0x01, 0, 1), bytes(4096), expect=WRITE_PROTECTED)
    q.exec(rw(0x08, 0, 8), expect=WRITE_PROTECTED)
    q.exec(rw(0x05, 0, 1), bytes(4096))
    q.exec(sqe(0x00, 1))
    q.disconnect()
    admin.disconnect()


def perf(port, name, *args):
    tid = f"trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:{port} subnqn:{nqn_of(name)}"
    argv = [os.path.join(RELEASE, "nvmf-perf"), "-t", "0.05", "-r", tid, *args]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=60)


def scenario_and_rest(stream):
    """The seed of one host->target stream: its scenario byte and what
    came after its Connect, cut short; None when it has no Connect."""
    if len(stream) < 128 + 8:
        return None
    dgst = stream[11]
    connect = stream[128:]
    plen = struct.unpack("<I", connect[4:8])[0]
    pdo = connect[3]
    if connect[0] != 0x04 or len(connect) < plen or pdo == 0:
        return None
    qid = struct.unpack("<H", connect[8 + 42:8 + 44])[0]
    subnqn = connect[pdo + 256:pdo + 512].split(b"\0")[0].decode()
    if subnqn == DISCOVERY_NQN:
        queue, device = 0, 0
    else:
        queue = 1 if qid == 0 else 2
        device = DEVICES.index(subnqn.rsplit(":", 1)[1])
    scenario = queue | (dgst & 3) << 2 | device << 4
    rest = connect[plen:]
    pos = 0
    for _ in range(MAX_PDUS):
        if len(rest) - pos < 8:
            break
        n = struct.unpack("<I", rest[pos + 4:pos + 8])[0]
        if pos + n > MAX_BYTES or pos + n > len(rest):
            break
        pos += n
    return bytes([scenario]) + rest[:pos]


def main():
    os.makedirs(CORPUS, exist_ok=True)
    port = free_port()
    daemon = subprocess.Popen(
        [os.path.join(RELEASE, "io-engine"),
         "--poll-mode", "adaptive",
         "--grpc-addr", f"127.0.0.1:{free_port()}",
         "--metrics-addr", f"127.0.0.1:{free_port()}",
         "--nbd-addr", f"127.0.0.1:{free_port()}",
         "--nvmf-addr", f"127.0.0.1:{port}",
         "--bdev", "malloc:///disk0?size_mb=1&blk_size=512",
         "--bdev", "null:///null0?size_mb=1024&blk_size=4096",
         "--share", "disk0:nvmf", "--share", "null0:nvmf:ro"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        proxy = Proxy(port)
        p = proxy.port
        scenarios = [
            ("host_discovery", lambda: host_discovery(p)),
            ("host_admin", lambda: host_admin(p, "disk0")),
            ("host_admin_null", lambda: host_admin(p, "null0")),
            ("host_io", lambda: host_io_disk(p, False, False)),
            ("host_io_digests", lambda: host_io_disk(p, True, True)),
            ("host_io_null", lambda: host_io_null(p)),
            ("perf_randrw", lambda: perf(p, "disk0", "-q", "4", "-o", "4k", "-w", "randrw")),
            ("perf_write_r2t", lambda: perf(p, "disk0", "-q", "2", "-o", "16k", "-w", "write")),
            ("perf_copy", lambda: perf(p, "disk0", "-q", "4", "-o", "4k", "-w", "copy")),
            ("perf_verify_digests", lambda: perf(
                p, "disk0", "-q", "4", "-o", "8k", "-w", "randrw", "-y", "-H", "-I")),
            ("perf_null_read", lambda: perf(p, "null0", "-q", "2", "-o", "128k", "-w", "read")),
        ]
        for name, run in scenarios:
            print(name)
            run()
            streams = proxy.take()
            for i, stream in enumerate(streams):
                seed = scenario_and_rest(stream)
                if seed is not None and len(seed) > 1:
                    write_seed(CORPUS, f"{name}_{i}", seed)
        proxy.close()
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
