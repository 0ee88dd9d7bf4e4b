#!/usr/bin/env python3
"""The protocol floor for tools/bench_serve.py: the same server stacks as `edgeaccel serve` (uvicorn on uvloop
with TCP_NODELAY for HTTP, grpcio's thread-pool server with Triton's proto for gRPC) answering every infer with a
fixed UINT8 tensor (1001 bytes, or ``--answer-bytes``: a model's output size, so that a large answer's transfer
counts in the floor too), running nothing. What a client measures against it is what the transport and the
client library cost on this machine, which no server can go below. Prints "HTTP_PORT GRPC_PORT" and serves
until killed.

    python tools/serve_floor.py [--answer-bytes N]
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ANSWER = bytes(int(sys.argv[sys.argv.index("--answer-bytes") + 1]) if "--answer-bytes" in sys.argv else 1001)
HEADER = json.dumps({"model_name": "m", "model_version": "1", "outputs": [
    {"name": "y", "datatype": "UINT8", "shape": [1, len(ANSWER)], "parameters": {"binary_data_size": len(ANSWER)}}]}
    ).encode()


async def http_app(scope, receive, send):
    """Reads the whole body (as a server must), answers the fixed tensor in Triton's binary extension."""
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/octet-stream"),
                            (b"content-length", str(len(HEADER) + len(ANSWER)).encode()),
                            (b"inference-header-content-length", str(len(HEADER)).encode())]})
    await send({"type": "http.response.body", "body": HEADER + ANSWER})


def start_grpc() -> int:
    import grpc

    from edgeaccel.serve.proto import grpc_service_pb2 as pb
    from edgeaccel.serve.proto import grpc_service_pb2_grpc as pb_grpc

    class Servicer(pb_grpc.GRPCInferenceServiceServicer):
        def ModelInfer(self, request, context):
            reply = pb.ModelInferResponse(model_name=request.model_name, model_version="1", id=request.id)
            reply.outputs.add(name="y", datatype="UINT8", shape=[1, len(ANSWER)])
            reply.raw_output_contents.append(ANSWER)
            return reply

    server = grpc.server(ThreadPoolExecutor(16), options=[("grpc.max_receive_message_length", 64 << 20)])
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    start_grpc.server = server  # kept alive with the process
    return port


async def main() -> None:
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(http_app, log_level="warning", access_log=False, lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    print(sock.getsockname()[1], start_grpc(), flush=True)
    await task


if __name__ == "__main__":
    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())
