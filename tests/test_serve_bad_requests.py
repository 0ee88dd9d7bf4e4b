"""Bad requests of every kind against a real `edgeaccel serve` subprocess, on both protocols, as an outside checker
sends them: each is answered with its own status (400 / INVALID_ARGUMENT, 408, 431) and a message that says what
was wrong, no executor runs it (no fallback), the server logs no traceback and no warning, and a good request
still works afterwards. Raw sockets for HTTP (the bytes exactly as written), the protocol's own stubs for gRPC."""

from __future__ import annotations

import json
import socket
import time

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # slow tier: servers

pytest.importorskip("onnx")
pytest.importorskip("uvicorn")
grpc = pytest.importorskip("grpc")

GOOD = np.linspace(-1, 1, 3 * 16 * 16, dtype=np.float32).reshape(1, 3, 16, 16)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from onnx_models import small_conv

    from edgeaccel.serve.process import ServerProcess

    folder = tmp_path_factory.mktemp("models")
    small_conv(folder / "conv.onnx")
    with ServerProcess([folder, "--port", "0", "--grpc-port", "0", "--log-json"]) as running:
        yield running
        time.sleep(0.2)  # the last log lines
        log = "".join(running.stderr_lines)
        assert "Traceback" not in log and "WARNING" not in log and "fallback" not in log, log[-2000:]
        rows = [json.loads(line) for line in running.stdout_lines if line.startswith("{")]
        assert rows and not [r for r in rows if r["status"] >= 500], rows


def _raw(server, data: bytes, timeout_s: float = 20.0, answers: int = 1) -> bytes:
    """Send bytes, read until ``answers`` answers are whole or the server closes."""
    host, port = server.http.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as conn:
        conn.sendall(data)
        out = b""
        try:
            while chunk := conn.recv(65536):
                out += chunk
                if out.count(b"HTTP/1.1 ") >= answers and _complete(out):
                    break
        except TimeoutError:
            pass
    return out


def _complete(out: bytes) -> bool:
    """The last answer in ``out`` is whole (its content-length of body is there)."""
    head, _, body = out.rpartition(b"HTTP/1.1 ")[2].partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def _post(body: bytes, headers: str = "", path: str = "/v2/models/conv/infer") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: {len(body)}\r\n{headers}"
            f"\r\n").encode() + body


def _json_infer(data: str, **request) -> bytes:
    tensor = f'{{"name":"x","shape":[1,3,16,16],"datatype":"FP32","data":{data}}}'
    extra = "".join(f',"{k}":{json.dumps(v)}' for k, v in request.items())
    return f'{{"inputs":[{tensor}]{extra}}}'.encode()


def _answer(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


ZEROS = json.dumps([0.0] * 767)[1:-1]


@pytest.mark.parametrize("request_bytes, status, words", [
    # JSON has no NaN or Infinity, Python's parser takes them; 1e39 is infinity in FP32: runtimes answer NaNs
    (_post(_json_infer(f"[NaN,{ZEROS}]")), 400, "holds NaN or infinity"),
    (_post(_json_infer(f"[1e39,{ZEROS}]")), 400, "a number beyond FP32's range"),
    (_post(_json_infer(json.dumps(["a"] * 768))), 400, "does not hold FP32 values only"),
    (_post(_json_infer(json.dumps([0.0] * 768), id=7)), 400, "'id' is a string, not int 7"),
    (_post(_json_infer(json.dumps([0.0] * 768), id={"a": 1})), 400, "'id' is a string, not dict"),
    (_post(_json_infer(json.dumps([[0.0] * 700, [0.0] * 68]))), 400, "not a list of numbers nested as the shape"),
    (b"POST /v2/models/conv/infer HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
     400, "not valid HTTP/1.1 (Invalid character in chunk size)"),
    (b"POST /v2/models/conv/infer HTTP/1.1\r\nHost: t\r\nContent-Length: ten\r\n\r\n{}", 400,
     "Content-Length"),
    (b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n", 431,
     "URL and headers are more than 65536 bytes"),
], ids=["nan", "beyond-fp32", "strings", "id-int", "id-object", "ragged", "bad-chunk", "bad-length", "huge-head"])
def test_a_bad_http_request_is_answered_with_what_was_wrong(server, request_bytes, status, words):
    got, body = _answer(_raw(server, request_bytes))
    assert got == status and words in body["error"], body


def test_binary_nan_is_refused_and_pipelined_http10_and_chunked_requests_are_answered(server):
    head = json.dumps({"inputs": [{"name": "x", "shape": [1, 3, 16, 16], "datatype": "FP32",
                                   "parameters": {"binary_data_size": GOOD.nbytes}}]}).encode()
    nan = np.full_like(GOOD, np.nan).tobytes()
    got, body = _answer(_raw(server, _post(head + nan, f"Inference-Header-Content-Length: {len(head)}\r\n")))
    assert got == 400 and "NaN or infinity" in body["error"]
    good = _json_infer(json.dumps(GOOD.ravel().tolist()))
    one = f"POST /v2/models/conv/infer HTTP/1.1\r\nHost: t\r\nContent-Length: {len(good)}\r\n\r\n".encode() + good
    two = _raw(server, one + one, answers=2)  # pipelined on one connection: both answered, in order
    assert two.count(b"HTTP/1.1 200 OK") == 2, two[:300]
    old = f"POST /v2/models/conv/infer HTTP/1.0\r\nContent-Length: {len(good)}\r\n\r\n".encode() + good
    assert _answer(_raw(server, old))[0] == 200
    chunked = (b"POST /v2/models/conv/infer HTTP/1.1\r\nHost: t\r\nConnection: close\r\nTransfer-Encoding: chunked"
               b"\r\n\r\n" + b"%x\r\n" % len(good) + good + b"\r\n0\r\n\r\n")
    assert _answer(_raw(server, chunked))[0] == 200


def test_a_body_that_stops_arriving_is_408_not_held_forever(server):
    started = time.monotonic()
    raw = _raw(server, b"POST /v2/models/conv/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n{\"inp")
    status, body = _answer(raw)
    assert status == 408 and "stopped arriving" in body["error"]
    assert time.monotonic() - started < 15


def _grpc_call(server, tensor_bytes: bytes, shape=(1, 3, 16, 16), twice: bool = False):
    from edgeaccel.serve.proto import grpc_service_pb2 as pb
    from edgeaccel.serve.proto import grpc_service_pb2_grpc as pb_grpc

    request = pb.ModelInferRequest(model_name="conv", id="r1")
    for _ in range(2 if twice else 1):
        request.inputs.add(name="x", datatype="FP32", shape=list(shape))
        request.raw_input_contents.append(tensor_bytes)
    with grpc.insecure_channel(server.grpc) as channel:
        return pb_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=30)


@pytest.mark.parametrize("tensor, shape, twice, words", [
    (np.full_like(GOOD, np.inf).tobytes(), (1, 3, 16, 16), False, "holds NaN or infinity"),
    (GOOD.tobytes()[:-4], (1, 3, 16, 16), False, "3068 bytes of tensor data"),
    (GOOD.tobytes(), (1, 3, 16, 16), True, "input 'x' is given twice"),
    (GOOD.tobytes(), (1, 3, 32, 8), False, "expects shape 1x3x16x16, got 1x3x32x8"),
    (b"", (1, -3, 16, 16), False, "non-negative integers"),
], ids=["inf", "short", "twice", "shape", "negative"])
def test_a_bad_grpc_request_is_invalid_argument_and_the_next_good_one_works(server, tensor, shape, twice, words):
    with pytest.raises(grpc.RpcError) as err:
        _grpc_call(server, tensor, shape, twice)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and words in err.value.details()
    reply = _grpc_call(server, GOOD.tobytes())
    assert reply.id == "r1" and len(reply.raw_output_contents[0]) == 8 * 4


def test_a_client_still_sending_after_a_broken_chunk_reads_its_400_not_a_reset(server):
    """The parser's 400 closes the connection while the client's upload goes on: the close lingers (reads and drops
    the rest) so that the client's writes succeed and it reads the answer."""
    host, port = server.http.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as conn:
        conn.sendall(b"POST /v2/models/conv/infer HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        time.sleep(0.2)  # the 400 is written and the close begins
        for _ in range(40):  # 2.5 MB more on its way
            conn.sendall(b"\0" * (64 << 10))  # EPIPE / ECONNRESET here is the defect
        conn.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := conn.recv(65536):
            out += chunk
    assert out.startswith(b"HTTP/1.1 400") and b"not valid HTTP/1.1" in out, out[:300]

