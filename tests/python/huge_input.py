#!/usr/bin/env python3
"""A default-limits grpcio client sends huge input (issue 17, point 6).

A 1 MiB URI parameter and a 10,000-character device name must come back as
INVALID_ARGUMENT with a message under 1 KiB that says how long the input
was ("... (N bytes)"), not as RESOURCE_EXHAUSTED ("received metadata size
exceeds hard limit"), which is what a client sees when the server quotes
the whole input in grpc-message.

Usage: huge_input.py --endpoint HOST:PORT --stubs DIR [--ca FILE
       [--cert FILE --key FILE]]

DIR holds the Python stubs of proto/ (io_engine/v1/bdev_pb2.py and
bdev_pb2_grpc.py), as `python -m grpc_tools.protoc -I proto
--python_out=DIR --grpc_python_out=DIR proto/io_engine/v1/*.proto` makes
them. With --ca the channel is TLS (a client certificate with --cert and
--key). Prints one line per case; exits 0 when every case holds, 1 if not.
"""

import argparse
import sys


def channel(grpc, args):
    # No options: the client keeps grpcio's default limits (metadata, message).
    if not args.ca:
        return grpc.insecure_channel(args.endpoint)
    read = lambda path: open(path, "rb").read() if path else None
    creds = grpc.ssl_channel_credentials(
        root_certificates=read(args.ca),
        private_key=read(args.key),
        certificate_chain=read(args.cert),
    )
    return grpc.secure_channel(args.endpoint, creds)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--endpoint", required=True)
    p.add_argument("--stubs", required=True)
    p.add_argument("--ca")
    p.add_argument("--cert")
    p.add_argument("--key")
    args = p.parse_args()
    sys.path.insert(0, args.stubs)
    import grpc
    from io_engine.v1 import bdev_pb2, bdev_pb2_grpc

    stub = bdev_pb2_grpc.BdevServiceStub(channel(grpc, args))
    mib = "9" * (1 << 20)
    name = "n" * 10_000
    cases = [
        ("1 MiB parameter", f"malloc:///m1?size_mb=1&blk_size={mib}", "... (1048576 bytes)"),
        ("10,000-character name", f"malloc:///{name}?size_mb=1", "... (10000 bytes)"),
    ]
    ok = True
    for what, uri, tail in cases:
        try:
            stub.Create(bdev_pb2.CreateBdevRequest(uri=uri), timeout=30)
            print(f"FAIL {what}: created")
            ok = False
            continue
        except grpc.RpcError as e:
            code, message = e.code(), e.details() or ""
        good = (
            code == grpc.StatusCode.INVALID_ARGUMENT
            and len(message.encode()) < 1024
            and tail in message
        )
        ok &= good
        print(f"{'ok' if good else 'FAIL'} {what}: {code.name}, {len(message.encode())} bytes: {message[:160]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
