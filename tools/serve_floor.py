#!/usr/bin/env python3
"""The protocol floor for tools/bench_serve.py: the same server stacks as `edgeaccel serve` (uvicorn on uvloop
with TCP_NODELAY for HTTP, grpcio's thread-pool server with Triton's proto for gRPC) answering every infer with a
fixed UINT8 tensor (1001 bytes, or ``--answer-bytes``: a model's output size, so that a large answer's transfer
counts in the floor too), running nothing. What a client measures against it is what the transport and the
client library cost on this machine, which no server can go below. Prints "HTTP_PORT GRPC_PORT" and serves
until killed.

With ``--model PATH`` (.tflite or .onnx) it is instead the bare server one would write around the raw runtime:
each request's tensor (binary only: the benchmark's clients send that) runs through a LiteRT Interpreter
(XNNPACK, a thread per usable core) or an ONNX Runtime session (its defaults, its workers' spin stopped at each
run's end) in the thread that took it, and its first output is the answer. Against it a client measures the
transport plus what running a model between requests costs by itself (the runtime's threads and the caches gone
cold while the client waited, which a loop of back-to-back in-process runs never pays): what `edgeaccel serve`
adds above that is its own code.

    python tools/serve_floor.py [--answer-bytes N | --model PATH]
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ANSWER = bytes(int(sys.argv[sys.argv.index("--answer-bytes") + 1]) if "--answer-bytes" in sys.argv else 1001)
MODEL = Path(sys.argv[sys.argv.index("--model") + 1]) if "--model" in sys.argv else None


def raw_runner():
    """The raw runtime on MODEL: bytes of its one input -> bytes of its first output."""
    import numpy as np

    if MODEL.suffix == ".onnx":
        import onnxruntime as ort

        options = ort.SessionOptions()
        # its defaults, but for the workers' spin after each run (~40 ms of a core: docs/runtime-facts.md), which
        # would slow the benchmark's next calls to the other servers on the same cores
        options.add_session_config_entry("session.force_spinning_stop", "1")
        session = ort.InferenceSession(str(MODEL), options, providers=["CPUExecutionProvider"])
        spec = session.get_inputs()[0]
        dtype = {"tensor(uint8)": np.uint8, "tensor(int8)": np.int8}.get(spec.type, np.float32)
        shape = [d if isinstance(d, int) else 1 for d in spec.shape]
        return lambda data: session.run(None, {spec.name: np.frombuffer(data, dtype).reshape(shape)})[0].tobytes()
    from ai_edge_litert.interpreter import Interpreter

    from edgeaccel.executors.executor_options import default_threads

    # the threads edgeaccel's latency configuration gives it: a difference in threads is not our code's share
    interpreter = Interpreter(model_path=str(MODEL), num_threads=default_threads())
    interpreter.allocate_tensors()
    spec, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]

    def run(data: bytes) -> bytes:
        interpreter.set_tensor(spec["index"], np.frombuffer(data, spec["dtype"]).reshape(spec["shape"]))
        interpreter.invoke()
        return interpreter.get_tensor(out["index"]).tobytes()
    return run


def locked(run):
    """One run at a time: an interpreter is not thread-safe (the benchmark's latency clients call one by one)."""
    lock = threading.Lock()

    def call(data: bytes) -> bytes:
        with lock:
            return run(data)
    return call


RUN = locked(raw_runner()) if MODEL is not None else lambda data: ANSWER


@functools.lru_cache(maxsize=4)
def header(size: int) -> bytes:
    return json.dumps({"model_name": "m", "model_version": "1", "outputs": [
        {"name": "y", "datatype": "UINT8", "shape": [1, size], "parameters": {"binary_data_size": size}}]}).encode()


async def http_app(scope, receive, send):
    """Reads the whole body (as a server must), answers in Triton's binary extension."""
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    head = int(dict(scope["headers"]).get(b"inference-header-content-length", len(body)))
    answer = RUN(body[head:])
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/octet-stream"),
                            (b"content-length", str(len(header(len(answer))) + len(answer)).encode()),
                            (b"inference-header-content-length", str(len(header(len(answer)))).encode())]})
    await send({"type": "http.response.body", "body": header(len(answer)) + answer})


def start_grpc() -> int:
    import grpc

    from edgeaccel.serve.proto import grpc_service_pb2 as pb
    from edgeaccel.serve.proto import grpc_service_pb2_grpc as pb_grpc

    class Servicer(pb_grpc.GRPCInferenceServiceServicer):
        def ModelInfer(self, request, context):
            answer = RUN(request.raw_input_contents[0] if request.raw_input_contents else b"")
            reply = pb.ModelInferResponse(model_name=request.model_name, model_version="1", id=request.id)
            reply.outputs.add(name="y", datatype="UINT8", shape=[1, len(answer)])
            reply.raw_output_contents.append(answer)
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
