"""SIGTERM in the middle of a flood on both protocols, at several moments: a real server in a subprocess on
127.0.0.1, HTTP clients on raw sockets (http.client, keep-alive and not) and tritonclient.grpc clients that keep
sending until the server is gone. Every request is answered with its own result (200), refused by the server
(503 / gRPC UNAVAILABLE saying it is shutting down), or finds no server listening (connection refused); none is
reset, CANCELLED or lost. Bounded: each client stops at the server's exit or after its own time limit."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # slow tier: servers

pytest.importorskip("onnx")
pytest.importorskip("uvicorn")
tritonclient_grpc = pytest.importorskip("tritonclient.grpc")

CLIENT_LIMIT_S = 40.0


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    from onnx_models import small_conv

    folder = tmp_path_factory.mktemp("models")
    small_conv(folder / "conv.onnx")
    small_conv(folder / "wide.onnx", dynamic=True)  # any H x W: 256 x 256 requests are 786 KB uploads
    return folder


def _reference(repo, model, x):
    import edgeaccel

    with edgeaccel.load(repo / f"{model}.onnx", executor="onnxruntime") as loaded:
        return loaded.run(x)[0]


def _infer_body(x: np.ndarray) -> tuple[bytes, dict]:
    """A small tensor as JSON; a large one binary (the binary tensor extension), as clients send images."""
    if x.size <= 1024:
        return json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                       "data": x.ravel().tolist()}]}).encode(), {}
    head = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    return head + x.tobytes(), {"Inference-Header-Content-Length": str(len(head))}


# large uploads: a socket closed with a body unread resets it (a refusal before the body was read, an idle
# connection closed at shutdown while a request was being written on it)
@pytest.mark.parametrize("after_s, model, side", [(0.2, "conv", 16), (0.9, "conv", 16), (0.5, "wide", 256)])
def test_sigterm_under_a_flood_refuses_new_requests_first_and_resets_or_cancels_none(repo, after_s, model, side):
    from edgeaccel.serve.process import ServerProcess

    server = ServerProcess([repo, "--port", "0", "--grpc-port", "0", "--executor", "onnxruntime", "--log-json",
                            "--max-queue", "16"]).start()
    host, port = server.http.rsplit(":", 1)
    outcomes: list[tuple[str, str]] = []  # (protocol, ok | refused | gone | bad: what)
    lock = threading.Lock()

    def record(protocol: str, what: str) -> None:
        with lock:
            outcomes.append((protocol, what))

    def http_app(seed: int, keep_alive: bool) -> None:
        x = np.full((1, 3, side, side), seed / 10, np.float32)
        want = _reference(repo, model, x)
        body, headers = _infer_body(x)
        conn = None
        end = time.monotonic() + CLIENT_LIMIT_S
        while time.monotonic() < end:
            if conn is None:
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                try:
                    conn.connect()
                except ConnectionRefusedError:
                    record("http", "gone")
                    return
            try:
                conn.request("POST", f"/v2/models/{model}/infer", body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                record("http", f"bad: {type(exc).__name__}: {exc}")
                return
            if response.status == 200:
                got = np.asarray(json.loads(data)["outputs"][0]["data"], np.float32)
                record("http", "ok" if np.allclose(got, want.ravel(), atol=1e-5) else "bad: someone else's answer")
            elif response.status == 503 and b"shutting down" in data:
                record("http", "refused")
            elif response.status == 503:  # the queue was full: a refusal too
                record("http", "refused")
            else:
                record("http", f"bad: {response.status} {data[:200]!r}")
            if not keep_alive or response.will_close:
                conn.close()
                conn = None

    def grpc_app(seed: int) -> None:
        client = tritonclient_grpc.InferenceServerClient(server.grpc)
        x = np.full((1, 3, side, side), seed / 10, np.float32)
        want = _reference(repo, model, x)
        tensor = tritonclient_grpc.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        end = time.monotonic() + CLIENT_LIMIT_S
        while time.monotonic() < end:
            try:
                result = client.infer(model, [tensor], client_timeout=30)
            except tritonclient_grpc.InferenceServerException as exc:
                status, message = exc.status(), exc.message() or ""
                if status == "StatusCode.UNAVAILABLE" and ("shutting down" in message or "waiting" in message):
                    record("grpc", "refused")
                    continue
                if status == "StatusCode.UNAVAILABLE":  # no server at the address any more (connection refused)
                    record("grpc", "gone")
                    return
                record("grpc", f"bad: {status} {message[:200]}")
                return
            record("grpc", "ok" if np.allclose(result.as_numpy("y"), want, atol=1e-5) else "bad: wrong answer")

    threads = [threading.Thread(target=http_app, args=(k, k % 2 == 0)) for k in range(4)] + \
        [threading.Thread(target=grpc_app, args=(10 + k,)) for k in range(3)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while sum(1 for _, what in outcomes if what == "ok") < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(after_s)
        code = server.terminate(timeout_s=60)
    finally:
        for t in threads:
            t.join(CLIENT_LIMIT_S + 30)
        server.kill()
    assert code == 0, "".join(server.stderr_lines[-20:])
    bad = [o for o in outcomes if o[1].startswith("bad")]
    assert not bad, bad[:5]
    for protocol in ("http", "grpc"):
        seen = {what for p, what in outcomes if p == protocol}
        assert "ok" in seen and "refused" in seen, (protocol, seen)  # the refusal came before the ports closed
    stopped = [line for line in server.stderr_lines if "stopped: answered" in line]
    answered, accepted = map(int, re.search(r"answered (\d+) of the (\d+)", stopped[0]).groups())
    assert answered == accepted
    logged = [json.loads(line) for line in server.stdout_lines if line.startswith("{")]
    for protocol in ("http", "grpc"):  # every 200 the server logged reached its client
        assert sum(1 for row in logged if row["protocol"] == protocol and row["status"] == 200) == \
            sum(1 for p, what in outcomes if p == protocol and what == "ok")


def _catches_sigterm(pid: int) -> bool:
    """The process has its own SIGTERM handler (the CLI installs it first thing): /proc's caught-signals mask."""
    import signal
    from pathlib import Path

    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(mask >> (signal.SIGTERM - 1) & 1)


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"), reason="reads /proc")
def test_sigterm_while_the_models_load_and_again_after_the_shutdown_still_exits_0(repo):
    """Two ends of a server's life an orchestrator's SIGTERM can hit: while the models load (the default action
    killed the process, exit -15, no accounting), and a second SIGTERM after the event loop closed (the loop had
    put the default action back: -15 after a clean shutdown)."""
    import signal
    import subprocess
    import sys

    from edgeaccel.serve.process import ServerProcess

    args = ServerProcess([repo, "--port", "0", "--grpc-port", "0"])
    loading = subprocess.Popen([sys.executable, "-m", "edgeaccel", "serve", *args.args], env=args.env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not _catches_sigterm(loading.pid) and loading.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    loading.send_signal(signal.SIGTERM)
    out, err = loading.communicate(timeout=60)
    assert loading.returncode == 0, err
    assert "answered 0 of the 0 requests accepted" in err and "Traceback" not in err
    if "ready" not in out:
        assert "SIGTERM before serving" in err

    server = ServerProcess([repo, "--port", "0", "--grpc-port", "0"]).start()
    try:
        while server.proc.poll() is None:  # SIGTERM, and again every few ms until the process is gone
            server.proc.send_signal(signal.SIGTERM)
            time.sleep(0.005)
        assert server.proc.wait(60) == 0, "".join(server.stderr_lines[-20:])
    finally:
        server.kill()


def test_a_slow_upload_begun_as_the_server_shuts_down_reads_its_503_not_a_reset(repo):
    """An upload that outlasts the in-app discard (2 s) on a connection the client opened before the SIGTERM: the
    server answers 503, half-closes and reads the rest, so every write succeeds and the answer is read whole."""
    import signal
    import socket

    from edgeaccel.serve.process import ServerProcess

    server = ServerProcess([repo, "--port", "0", "--grpc-port", "off", "--executor", "onnxruntime"]).start()
    host, port = server.http.rsplit(":", 1)
    try:
        conn = socket.create_connection((host, int(port)), timeout=30)
        conn.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"200 OK" in conn.recv(4096)  # an idle keep-alive connection, as a client's pool holds
        chunk, chunks = b"\0" * (64 << 10), 56  # 3.5 MB at 1 MB/s: 3.5 s
        server.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the server refuses (the signal is handled on its loop)
            probe = http.client.HTTPConnection(host, int(port), timeout=10)
            try:
                probe.request("GET", "/v2/health/ready")
                refusing = probe.getresponse().status == 503
            except OSError:  # the port already closed: refusing too (the idle connection still has its grace)
                refusing = True
            finally:
                probe.close()
            if refusing:
                break
        conn.sendall(b"POST /v2/models/wide/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                     b"Content-Length: " + str(len(chunk) * chunks).encode() + b"\r\n\r\n")
        for _ in range(chunks):
            conn.sendall(chunk)  # EPIPE / ECONNRESET here is the defect
            time.sleep(len(chunk) / (1 << 20))
        answer = b""
        while data := conn.recv(65536):
            answer += data
        conn.close()
    finally:
        exit_code = server.terminate(timeout_s=60)
    assert answer.startswith(b"HTTP/1.1 503") and b"shutting down" in answer, answer[:300]
    assert exit_code == 0
