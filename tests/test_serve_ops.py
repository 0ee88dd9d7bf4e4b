"""`edgeaccel serve` in operation, each against a real server in a subprocess on 127.0.0.1: a client flood that
fills the queue (503 + Retry-After, nothing lost), SIGTERM under load (every accepted request answered, exit 0),
the API token (401, no model touched; a non-loopback bind without one refused before binding), per-request
timeouts, and two client processes sharing one emulated Edge TPU (right answers, the device never holds more
than one run). Every client call has a timeout; every server is killed in its fixture's finalizer."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import IMAGES, MODELS, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: servers
tritonclient_http = pytest.importorskip("tritonclient.http")
tritonclient_grpc = pytest.importorskip("tritonclient.grpc")
pytest.importorskip("uvicorn")

MOBILENET = "mobilenet_v2_1.0_224_quant.tflite"
SOFTMAX = "MobilenetV2/Predictions/Softmax"
TOKEN = "serve-test-token-0123456789abcdef"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    shutil.copy(MODELS / MOBILENET, folder / "mobilenet.tflite")
    return folder


@pytest.fixture(scope="module")
def bird():
    import edgeaccel

    return edgeaccel.image_input(IMAGES / "bird.png", edgeaccel.describe(MODELS / MOBILENET))


@pytest.fixture
def start():
    """start(args, ...) -> a running ServerProcess; every one started is killed at the end of the test."""
    from edgeaccel.serve.process import ServerProcess

    started = []

    def _start(args, **kwargs):
        proc = ServerProcess([str(a) for a in args], **kwargs)
        started.append(proc)
        return proc.start()

    yield _start
    for proc in started:
        proc.kill()


def _binary_request(bird) -> tuple[bytes, dict]:
    header = json.dumps({"inputs": [{"name": "input", "shape": [1, 224, 224, 3], "datatype": "UINT8",
                                     "parameters": {"binary_data_size": bird.size}}],
                         "parameters": {"binary_data_output": True}}).encode()
    return header + bird.tobytes(), {"Inference-Header-Content-Length": str(len(header))}


def _post(conn: http.client.HTTPConnection, body: bytes, headers: dict) -> tuple[int, dict, bytes]:
    conn.request("POST", "/v2/models/mobilenet/infer", body=body, headers=headers)
    response = conn.getresponse()
    return response.status, dict(response.getheaders()), response.read()


def _top1(status: int, headers: dict, body: bytes, labels) -> str | None:
    if status != 200:
        return None
    n = int(headers["inference-header-content-length"])
    scores = np.frombuffer(body[n:], np.uint8)
    return labels[int(scores.argmax())]


def _metric(text: str, name: str, **labels) -> float | None:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if labels else "") + r" (\S+)"
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def _get(url: str, path: str, headers: dict | None = None) -> tuple[int, str]:
    host, port = url.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


# -- a full queue ------------------------------------------------------------------------------------------
def test_flood_fills_the_queue_503_with_retry_after_and_loses_nothing(start, repo, bird, labels):
    server = start([repo, "--port", 0, "--grpc-port", 0, "--max-queue", 2])
    host, port = server.http.rsplit(":", 1)
    body, headers = _binary_request(bird)
    results: list[tuple[int, str | None, str | None]] = []
    grpc_results: list[tuple[str, str | None]] = []

    def grpc_client():
        client = tritonclient_grpc.InferenceServerClient(server.grpc)
        tensor = tritonclient_grpc.InferInput("input", list(bird.shape), "UINT8")
        tensor.set_data_from_numpy(bird)
        for _ in range(6):
            try:
                scores = client.infer("mobilenet", [tensor], client_timeout=30).as_numpy(SOFTMAX)
                grpc_results.append(("OK", labels[int(scores.argmax())]))
            except tritonclient_grpc.InferenceServerException as exc:
                grpc_results.append((exc.status(), exc.message()))

    def client():
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            for _ in range(6):
                status, got, data = _post(conn, body, headers)
                results.append((status, _top1(status, got, data, labels), got.get("retry-after")))
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(12)] + [threading.Thread(target=grpc_client)
                                                                       for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 72 and len(grpc_results) == 24  # every request had an answer
    for status, what in grpc_results:
        assert (status, what) == ("OK", "chickadee") or (status == "StatusCode.UNAVAILABLE" and "retry" in what)
    statuses = {status for status, _, _ in results}
    assert statuses <= {200, 503}, statuses
    refused = [r for r in results if r[0] == 503]
    served = [r for r in results if r[0] == 200]
    assert refused and served
    assert all(retry == "1" for _, _, retry in refused)
    assert all(top1 == "chickadee" for _, top1, _ in served)
    _, text = _get(server.http, "/metrics")
    assert _metric(text, "edgeaccel_serve_requests_total", model="mobilenet", protocol="http", status="503") == \
        len(refused)
    assert _metric(text, "edgeaccel_serve_requests_total", model="mobilenet", protocol="http", status="200") == \
        len(served)
    assert _get(server.http, "/v2/health/live")[0] == 200


def test_isolated_models_serve_and_a_request_timeout_is_504(start, repo, bird, labels):
    server = start([repo, "--port", 0, "--grpc-port", "off", "--isolate"])
    client = tritonclient_http.InferenceServerClient(server.http, connection_timeout=10, network_timeout=30)
    assert client.get_model_metadata("mobilenet")["parameters"]["isolated"] is True  # in a worker process
    tensor = tritonclient_http.InferInput("input", list(bird.shape), "UINT8")
    tensor.set_data_from_numpy(bird)
    with pytest.raises(tritonclient_http.InferenceServerException) as err:
        client.infer("mobilenet", [tensor], timeout=1)  # microseconds: no executor can make it
    assert err.value.status() == "504" and "deadline" in err.value.message()
    scores = client.infer("mobilenet", [tensor]).as_numpy(SOFTMAX)
    assert labels[int(scores.argmax())] == "chickadee"


# -- SIGTERM under load ------------------------------------------------------------------------------------
def test_sigterm_under_load_answers_every_accepted_request_and_exits_0(start, repo, bird, labels):
    server = start([repo, "--port", 0, "--grpc-port", 0, "--log-json", "--models", "mobilenet"])
    host, port = server.http.rsplit(":", 1)
    body, headers = _binary_request(bird)
    answers: list[tuple[str, int, str | None]] = []
    stop = threading.Event()

    def http_client():
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        while not stop.is_set():
            try:
                status, got, data = _post(conn, body, headers)
            except (OSError, http.client.HTTPException):  # closed at shutdown: reconnect, refused once it stopped
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                try:
                    conn.connect()
                except OSError:
                    return
                continue
            answers.append(("http", status, _top1(status, got, data, labels)))

    def grpc_client():
        client = tritonclient_grpc.InferenceServerClient(server.grpc)
        tensor = tritonclient_grpc.InferInput("input", list(bird.shape), "UINT8")
        tensor.set_data_from_numpy(bird)
        while not stop.is_set():
            try:
                result = client.infer("mobilenet", [tensor], client_timeout=30)
            except tritonclient_grpc.InferenceServerException:
                return
            answers.append(("grpc", 200, labels[int(result.as_numpy(SOFTMAX).argmax())]))

    threads = [threading.Thread(target=http_client) for _ in range(3)] + [threading.Thread(target=grpc_client)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(answers) < 30 and time.monotonic() < deadline:
        time.sleep(0.02)
    code = server.terminate(timeout_s=60)
    stop.set()
    for t in threads:
        t.join(60)
    assert code == 0, "".join(server.stderr_lines[-20:])
    assert len(answers) >= 30
    assert all(status in (200, 503) for _, status, _ in answers)
    assert all(top1 == "chickadee" for _, status, top1 in answers if status == 200)
    stopped = [line for line in server.stderr_lines if "stopped: answered" in line]
    assert stopped, server.stderr_lines
    answered, accepted = map(int, re.search(r"answered (\d+) of the (\d+)", stopped[0]).groups())
    assert answered == accepted
    logged = [json.loads(line) for line in server.stdout_lines if line.startswith("{")]
    # what the server answered with 200 is exactly what the clients received: none lost on the way out
    for protocol in ("http", "grpc"):
        assert sum(1 for row in logged if row["protocol"] == protocol and row["status"] == 200) == \
            sum(1 for p, status, _ in answers if p == protocol and status == 200)


# -- security ------------------------------------------------------------------------------------------------
def test_token_required_401_touches_no_model(start, repo, bird):
    env = dict(os.environ, EDGEACCEL_SERVE_TOKEN=TOKEN)
    server = start([repo, "--port", 0, "--grpc-port", 0], env=env)
    status, text = _get(server.http, "/v2/models/mobilenet")
    assert status == 401 and "token" in json.loads(text)["error"]
    assert _get(server.http, "/metrics", {"Authorization": "Bearer wrong-token-wrong-token"})[0] == 401
    client = tritonclient_http.InferenceServerClient(server.http, connection_timeout=10, network_timeout=30)
    tensor = tritonclient_http.InferInput("input", list(bird.shape), "UINT8")
    tensor.set_data_from_numpy(bird)
    with pytest.raises(tritonclient_http.InferenceServerException) as err:
        client.infer("mobilenet", [tensor])
    assert err.value.status() == "401"
    grpc = tritonclient_grpc.InferenceServerClient(server.grpc)
    gtensor = tritonclient_grpc.InferInput("input", list(bird.shape), "UINT8")
    gtensor.set_data_from_numpy(bird)
    with pytest.raises(tritonclient_grpc.InferenceServerException) as err:
        grpc.infer("mobilenet", [gtensor], client_timeout=30)
    assert err.value.status() == "StatusCode.UNAUTHENTICATED"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    _, text = _get(server.http, "/metrics", auth)
    assert "edgeaccel_serve_requests_total{" not in text  # the refused requests reached no model
    assert _metric(text, "edgeaccel_serve_device_peak", device="cpu") == 0
    assert client.infer("mobilenet", [tensor], headers=auth).as_numpy(SOFTMAX).shape == (1, 1001)
    result = grpc.infer("mobilenet", [gtensor], headers={"authorization": f"Bearer {TOKEN}"}, client_timeout=30)
    assert result.as_numpy(SOFTMAX).shape == (1, 1001)


@pytest.mark.parametrize("extra,words", [([], "without authentication"), (["--token", "short"], "too short")])
def test_non_loopback_bind_without_a_good_token_is_refused_before_binding(cli, repo, extra, words):
    done = cli("serve", str(repo), "--host", "0.0.0.0", "--port", "0", *extra, timeout=60, env={"EDGEACCEL_SERVE_TOKEN": None})
    assert done.returncode == 7, done.stderr  # EXIT_CONFIG
    assert words in done.stderr and "hint:" in done.stderr
    assert "ready" not in done.stdout and "loaded" not in done.stderr  # refused before loading or binding


# -- two client processes, one emulated Edge TPU -------------------------------------------------------------
CORAL_PLUGIN = '''"""An emulated Edge TPU (LiteRT answers, 5 ms a run) that records the most runs it ever held at
once, across every model and executor in the process, into $CORAL_PEAK_FILE: the device's own view of its
concurrency."""

import os
import threading

from edgeaccel.testing.emulated import emulated_accelerator

_Emulated = emulated_accelerator("coralemu", device="EdgeTPU", kind="edgetpu", fixed_latency_ms=5)
_LOCK = threading.Lock()
_STATE = {"now": 0, "peak": 0, "runs": 0}


class CoralEmu(_Emulated):
    def run(self, inputs):
        with _LOCK:
            _STATE["now"] += 1
            _STATE["runs"] += 1
            _STATE["peak"] = max(_STATE["peak"], _STATE["now"])
            with open(os.environ["CORAL_PEAK_FILE"], "w") as f:
                f.write(f"{_STATE['peak']} {_STATE['runs']}")
        try:
            return super().run(inputs)
        finally:
            with _LOCK:
                _STATE["now"] -= 1
'''

CLIENT = '''
import sys, numpy as np, edgeaccel
protocol, url, model, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
x = edgeaccel.image_input(sys.argv[5], edgeaccel.describe(sys.argv[6]))
labels = open(sys.argv[7]).read().splitlines()
if protocol == "http":
    import tritonclient.http as t
    client = t.InferenceServerClient(url, connection_timeout=10, network_timeout=30)
else:
    import tritonclient.grpc as t
    client = t.InferenceServerClient(url)
out = []
for _ in range(n):
    tensor = t.InferInput("input", list(x.shape), "UINT8")
    tensor.set_data_from_numpy(x)
    kwargs = {} if protocol == "http" else {"client_timeout": 30}
    result = client.infer(model, [tensor], **kwargs)
    out.append(labels[int(result.as_numpy("MobilenetV1/Predictions/Reshape_1").argmax())])
print(" ".join(out))
'''


def test_two_client_processes_share_one_emulated_edgetpu(start, tmp_path):
    from edgeaccel.testing.plugins import install, uninstall

    small = MODELS / "mobilenet_v1_0.25_128_quant.tflite"
    repo = tmp_path / "models"
    repo.mkdir()
    shutil.copy(small, repo / "cam_a.tflite")
    shutil.copy(small, repo / "cam_b.tflite")
    plugin = install(tmp_path / "plugin", source=CORAL_PLUGIN, entry_points={"coralemu": "coral_emu:CoralEmu"},
                     distribution="coral-emu", module="coral_emu")
    try:
        peak_file = tmp_path / "peak.txt"
        env = dict(os.environ, CORAL_PEAK_FILE=str(peak_file))
        server = start([repo, "--port", 0, "--grpc-port", 0, "--executor", "coralemu", "--priority", "cam_a=5",
                        "--device-limit", "cpu=1"], env=env, pythonpath=str(plugin.folder))  # edgetpu: its own 1
    finally:
        uninstall(plugin)
    meta = json.loads(_get(server.http, "/v2/models/cam_a")[1])
    assert meta["parameters"]["executors"] == "coralemu:EdgeTPU" and meta["parameters"]["devices"] == "edgetpu"
    assert meta["parameters"]["priority"] == 5
    n = 25
    clients = [subprocess.Popen([sys.executable, "-c", CLIENT, protocol, url, model, str(n), str(IMAGES / "bird.png"),
                                 str(small), str(MODELS / "imagenet_labels.txt")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
               for protocol, url, model in (("http", server.http, "cam_a"), ("grpc", server.grpc, "cam_b"))]
    outputs = []
    try:
        for client in clients:
            out, err = client.communicate(timeout=120)
            assert client.returncode == 0, err
            outputs.append(out.split())
    finally:
        for client in clients:
            if client.poll() is None:
                client.kill()
    assert outputs == [["chickadee"] * n, ["chickadee"] * n]
    peak, runs = map(int, peak_file.read_text().split())
    assert peak == 1 and runs >= 2 * n  # the device's own count: never two runs at once, every request ran on it
    _, text = _get(server.http, "/metrics")
    assert _metric(text, "edgeaccel_serve_device_limit", device="edgetpu") == 1
    assert _metric(text, "edgeaccel_serve_device_peak", device="edgetpu") == 1
