"""A Python grpcio client of the engine over TLS (tests/tests/grpc_tls.rs).

Usage: grpc_tls_client.py HOST:PORT CA [CLIENT_CERT CLIENT_KEY]
       grpc_tls_client.py HOST:PORT plaintext

Connects with the CA (and the client certificate, if given), or without
TLS for `plaintext`, then calls
EngineService.GetInfo, the health service's Check and the reflection
service's list over the same channel. Prints one JSON object: what each
call returned, or, on the first failure, {"error": CODE, "details": TEXT}
(and exits 3), so the test can tell a refused handshake from a served call.
"""

import json
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
# The reflection messages of v1alpha are v1's, field for field; the engine
# serves grpc.reflection.v1.
from grpc_reflection.v1alpha import reflection_pb2

from io_engine.v1 import engine_pb2, engine_pb2_grpc

TIMEOUT = 5


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    addr, ca = sys.argv[1], sys.argv[2]
    cert = key = None
    if len(sys.argv) > 3:
        cert, key = read(sys.argv[3]), read(sys.argv[4])
    if ca == "plaintext":
        channel = grpc.insecure_channel(addr)
    else:
        creds = grpc.ssl_channel_credentials(
            root_certificates=read(ca), private_key=key, certificate_chain=cert
        )
        channel = grpc.secure_channel(addr, creds)
    out = {}
    with channel:
        try:
            info = engine_pb2_grpc.EngineServiceStub(channel).GetInfo(
                engine_pb2.GetInfoRequest(), timeout=TIMEOUT
            )
            out["version"] = info.version
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT
            )
            out["health"] = health_pb2.HealthCheckResponse.ServingStatus.Name(health.status)
            reflect = channel.stream_stream(
                "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
            )
            request = reflection_pb2.ServerReflectionRequest(list_services="")
            replies = list(reflect(iter([request]), timeout=TIMEOUT))
            out["services"] = sorted(
                s.name for r in replies for s in r.list_services_response.service
            )
        except grpc.RpcError as e:
            print(json.dumps({"error": e.code().name, "details": e.details(), **out}))
            return 3
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
