#!/usr/bin/env python3
"""Capture real NBD client traffic as fuzz corpus seeds.

Runs `nbdkit memory 1M` on 127.0.0.1, puts a small TCP proxy in front of it
and drives libnbd clients (nbdinfo, nbdcopy, the libnbd Python bindings)
through the proxy. Every client->server byte stream is split into the option
phase (client flags up to and including the first GO, EXPORT_NAME or ABORT)
and the transmission phase (everything after), written to
corpus/nbd_options/ and corpus/nbd_transmission/ respectively.

Needs the Debian packages nbdkit, libnbd-bin and python3-libnbd; the
scenarios that use the bindings run under /usr/bin/python3 (where Debian
installs the `nbd` module). Only loopback addresses are used; every client
and the server are stopped before the script exits.

Usage: python3 fuzz/capture_seeds.py   (from the workspace root or fuzz/)
"""

import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIONS_DIR = os.path.join(HERE, "corpus", "nbd_options")
TRANSMISSION_DIR = os.path.join(HERE, "corpus", "nbd_transmission")
SYSTEM_PYTHON = "/usr/bin/python3"
IHAVEOPT = b"IHAVEOPT"
OPT_EXPORT_NAME, OPT_ABORT, OPT_GO = 1, 2, 7


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    """Forwards 127.0.0.1:listen_port to 127.0.0.1:upstream_port and keeps
    the client->server bytes of every connection."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.streams = []
        self.lock = threading.Lock()
        self.threads = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            buf = bytearray()
            with self.lock:
                self.streams.append(buf)
            t1 = threading.Thread(target=self._pump, args=(client, upstream, buf))
            t2 = threading.Thread(target=self._pump, args=(upstream, client, None))
            for t in (t1, t2):
                t.start()
                self.threads.append(t)

    @staticmethod
    def _pump(src, dst, record):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if record is not None:
                    record.extend(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def take(self):
        """Waits for the connections so far to close; returns their streams."""
        for t in self.threads:
            t.join(timeout=10)
        with self.lock:
            streams, self.streams = self.streams, []
        self.threads = []
        return [bytes(s) for s in streams]

    def close(self):
        self.sock.close()


def split_phases(stream):
    """(option phase, transmission phase) of one client->server stream."""
    pos = 4  # client flags
    while len(stream) >= pos + 16 and stream[pos:pos + 8] == IHAVEOPT:
        option, length = struct.unpack(">II", stream[pos + 8:pos + 16])
        pos += 16 + length
        if option in (OPT_EXPORT_NAME, OPT_ABORT, OPT_GO):
            break
    return stream[:pos], stream[pos:]


def write_seed(directory, name, data):
    if not data:
        return
    path = os.path.join(directory, name + ".bin")
    with open(path, "wb") as f:
        f.write(data)
    print(f"  {os.path.relpath(path, HERE)}: {len(data)} bytes")


# Scenarios using the libnbd Python bindings; {uri} is filled in.
NBDSH_IO = r"""
import nbd
h = nbd.NBD()
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri("{uri}")
h.pwrite(b"\xab" * 4096, 0)
h.pwrite(b"\xcd" * 512, 8192, nbd.CMD_FLAG_FUA)
assert h.pread(4096, 0) == b"\xab" * 4096
h.pread_structured(65536, 0, lambda *a: 0, nbd.CMD_FLAG_DF)
h.flush()
h.trim(4096, 65536)
h.zero(8192, 131072, nbd.CMD_FLAG_FAST_ZERO)
h.zero(4096, 262144, nbd.CMD_FLAG_NO_HOLE)
h.cache(4096, 0)
h.block_status(1 << 20, 0, lambda *a: 0)
h.block_status(65536, 0, lambda *a: 0, nbd.CMD_FLAG_REQ_ONE)
h.shutdown()
"""

NBDSH_OPT_MODE = r"""
import nbd
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_uri("{uri}")
h.opt_list(lambda name, desc: 0)
h.opt_info()
h.opt_list_meta_context(lambda name: 0)
h.opt_abort()
"""

NBDSH_NO_STRUCTURED = r"""
import nbd
h = nbd.NBD()
h.set_request_structured_replies(False)
h.connect_uri("{uri}")
h.pread(4096, 4096)
h.pwrite(b"\x11" * 1024, 2048)
h.shutdown()
"""

# Clearing FIXED_NEWSTYLE makes libnbd behave like an old newstyle client:
# no options, just NBD_OPT_EXPORT_NAME (and the server's 124 zero bytes).
NBDSH_EXPORT_NAME = r"""
import nbd
h = nbd.NBD()
h.set_handshake_flags(0)
h.connect_uri("{uri}")
h.pread(512, 0)
h.shutdown()
"""

NBDSH_EXPORT_NAME_NO_ZEROES = r"""
import nbd
h = nbd.NBD()
h.set_handshake_flags(nbd.HANDSHAKE_FLAG_NO_ZEROES)
h.connect_uri("{uri}")
h.pread(512, 0)
h.shutdown()
"""


def main():
    os.makedirs(OPTIONS_DIR, exist_ok=True)
    os.makedirs(TRANSMISSION_DIR, exist_ok=True)
    port = free_port()
    server = subprocess.Popen(
        ["nbdkit", "-f", "-i", "127.0.0.1", "-p", str(port), "memory", "1M"],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        proxy = Proxy(port)
        uri = f"nbd://127.0.0.1:{proxy.port}"
        src = tempfile.NamedTemporaryFile(suffix=".img")
        src.write(os.urandom(8192) + bytes(131072) + os.urandom(4096))
        src.flush()

        scenarios = [
            ("libnbd_map", ["nbdinfo", "--map", uri]),
            ("libnbd_info", ["nbdinfo", uri]),
            ("libnbd_list", ["nbdinfo", "--list", uri]),
            ("nbdcopy", ["nbdcopy", src.name, uri]),
            ("libnbd_io", [SYSTEM_PYTHON, "-c", NBDSH_IO.format(uri=uri)]),
            ("libnbd_opt_mode", [SYSTEM_PYTHON, "-c", NBDSH_OPT_MODE.format(uri=uri)]),
            ("libnbd_simple", [SYSTEM_PYTHON, "-c", NBDSH_NO_STRUCTURED.format(uri=uri)]),
            ("export_name", [SYSTEM_PYTHON, "-c", NBDSH_EXPORT_NAME.format(uri=uri)]),
            ("export_name_no_zeroes",
             [SYSTEM_PYTHON, "-c", NBDSH_EXPORT_NAME_NO_ZEROES.format(uri=uri)]),
        ]
        for name, argv in scenarios:
            print(f"{name}: {' '.join(argv[:2])}")
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=60)
            streams = proxy.take()
            for i, stream in enumerate(streams):
                suffix = f"_{i}" if len(streams) > 1 else ""
                options, transmission = split_phases(stream)
                write_seed(OPTIONS_DIR, name + suffix, options)
                write_seed(TRANSMISSION_DIR, name + suffix, transmission)
        proxy.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
