"""The server's fast paths (issue 31 item 3): a request an idle executor can start runs in the thread that waits
for it (``ServeCore.infer(here=math.inf)``, what gRPC's handlers use), and HTTP's small answers go out in one write.
They must answer the same bytes as the queued path, and under load still keep the queue's bound and the
request's timeout. Real models on real runtimes, no stand-ins."""

from __future__ import annotations

import math
import shutil
import socket
import threading
import time

import numpy as np
import pytest

from conftest import MODELS
from edgeaccel.serve.errors import ServeError
from edgeaccel.serve.repository import ModelRepository

pytestmark = pytest.mark.shared


def _core(tmp_path, model: str, **options):
    from edgeaccel.serve.core import ServeCore, ServeOptions
    from edgeaccel.serve.metrics import Metrics

    (tmp_path / "models").mkdir(exist_ok=True)
    shutil.copy(MODELS / model, tmp_path / "models" / f"m{(MODELS / model).suffix}")
    metrics = Metrics()
    core = ServeCore(ModelRepository(tmp_path / "models"), ServeOptions(policy="latency", **options), metrics)
    metrics.attach(core)
    core.load("m")
    return core, metrics


def _inputs(core, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {t.name: rng.integers(0, 256, t.shape, dtype=np.uint8) for t in core.get("m").model.inputs}


@pytest.mark.parametrize("model", ["split_concat.tflite", "mobilenet_v1_0.25_128_quant.tflite",
                                   "mobilenet_v2_1.0_224_quant.onnx"])
def test_a_request_run_in_the_waiting_thread_answers_what_the_queued_path_answers(tmp_path, model):
    core, _ = _core(tmp_path, model)
    try:
        ran_here = 0
        for seed in range(3):
            inputs = _inputs(core, seed)
            here = core.infer("m", inputs, here=math.inf)
            ran_here += here.done()  # ran in this thread: the future came back with its answer (unless the
            # executor was busy re-measuring itself just then: the request queued as usual)
            queued = core.infer("m", inputs).result(timeout=30)
            answer = here.result()
            assert list(answer) == list(queued) == [t.name for t in core.get("m").model.outputs]
            for name in answer:
                assert answer[name].dtype == queued[name].dtype and answer[name].shape == queued[name].shape
                assert answer[name].tobytes() == queued[name].tobytes(), name
            assert answer.executor and answer.executor == queued.executor
        assert ran_here >= 2
        assert core.pending == 0 and core.accepted == core.answered == 6
    finally:
        core.close()


def test_under_load_the_waiting_threads_keep_the_queue_bound_and_every_accepted_request_is_answered(tmp_path):
    core, metrics = _core(tmp_path, "mobilenet_v2_1.0_224_quant.tflite", max_queue=3)
    inputs = _inputs(core, 0)
    expected = core.infer("m", inputs).result(timeout=60)
    clients, start = 12, threading.Barrier(12)
    outcomes: list = [None] * clients
    peak, running = [0], [True]

    def watch():
        while running[0]:
            peak[0] = max(peak[0], core.pending)
            time.sleep(0.0005)

    def client(i):
        start.wait()
        try:
            for _ in range(3):
                answer = core.infer("m", inputs, here=math.inf).result(timeout=60)
                assert answer[next(iter(answer))].tobytes() == expected[next(iter(expected))].tobytes()
            outcomes[i] = "answered"
        except ServeError as exc:
            outcomes[i] = exc

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    running[0] = False
    watcher.join()
    try:
        assert not any(t.is_alive() for t in threads)
        refused = [o for o in outcomes if isinstance(o, ServeError)]
        assert all(o.status == 503 and "--max-queue 3" in o.message for o in refused), refused
        assert refused, "12 clients at once on a queue of 3: some must have been refused"
        assert "answered" in outcomes
        assert peak[0] <= 3  # never more accepted and unanswered than the bound
        assert core.pending == 0 and core.accepted == core.answered
        sample = metrics.registry.get_sample_value
        assert sample("edgeaccel_serve_queue_depth") == 0
    finally:
        core.close()


def test_a_request_that_cannot_meet_its_timeout_is_504_on_the_fast_path_too(tmp_path):
    core, _ = _core(tmp_path, "mobilenet_v2_1.0_224_quant.tflite")
    inputs = _inputs(core, 0)
    try:
        core.infer("m", inputs).result(timeout=60)  # measured once: the scheduler knows it takes milliseconds
        future = core.infer("m", inputs, timeout_s=1e-6, here=math.inf)
        with pytest.raises(ServeError) as caught:
            future.result(timeout=30)
        assert caught.value.status == 504 and "deadline" in caught.value.message
        # while one request holds the executor, others with a short timeout queue and fail in time, not hang
        busy = threading.Thread(target=lambda: [core.infer("m", inputs, here=math.inf).result(60) for _ in range(20)])
        busy.start()
        started = time.monotonic()
        results = [core.infer("m", inputs, timeout_s=0.002, here=math.inf) for _ in range(5)]
        for f in results:
            try:
                f.result(timeout=30)
            except ServeError as exc:
                assert exc.status == 504
        assert time.monotonic() - started < 20
        busy.join(60)
        assert core.pending == 0 and core.accepted == core.answered
    finally:
        core.close()


def test_metrics_count_every_request_under_its_model_and_unknown_names_under_one_label(tmp_path):
    core, metrics = _core(tmp_path, "split_concat.tflite")
    try:
        for status in (200, 200, 400):
            metrics.request("m", "grpc", status, 0.001)
        metrics.request("no-such-model", "http", 404, 0.001)
        sample = metrics.registry.get_sample_value
        assert sample("edgeaccel_serve_requests_total", {"model": "m", "protocol": "grpc", "status": "200"}) == 2
        assert sample("edgeaccel_serve_requests_total", {"model": "m", "protocol": "grpc", "status": "400"}) == 1
        assert sample("edgeaccel_serve_request_seconds_count", {"model": "m", "protocol": "grpc"}) == 2
        assert sample("edgeaccel_serve_requests_total",
                      {"model": "(not loaded)", "protocol": "http", "status": "404"}) == 1
        core.unload("m")
        metrics.request("m", "grpc", 200, 0.001)  # unloaded: its later requests count as a name no model has
        assert sample("edgeaccel_serve_requests_total",
                      {"model": "(not loaded)", "protocol": "grpc", "status": "200"}) == 1
    finally:
        core.close()


@pytest.mark.parametrize("model", ["mobilenet_v1_0.25_128_quant.tflite",  # 1 KB: one write
                                   "deeplabv3_mnv2_dm05_pascal_quant.tflite"])  # 2 MB: header, then the array
def test_http_answers_whole_over_one_keep_alive_connection_the_bytes_grpc_and_in_process_give(tmp_path, model):
    """The one-write path (a small answer) and the parts path (a large one, its output array written as the
    runtime gave it): head and body parse as one HTTP response, again and again on one connection, with the
    output bytes gRPC returns and the model gives in-process."""
    tritonclient_grpc = pytest.importorskip("tritonclient.grpc")
    import json

    import edgeaccel
    from edgeaccel.serve.process import ServerProcess

    shutil.copy(MODELS / model, tmp_path / "m.tflite")
    with edgeaccel.schedule(tmp_path / "m.tflite", "latency") as loaded:
        name, shape = loaded.inputs[0].name, list(loaded.inputs[0].shape)
        x = np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)
        local = loaded.run(x)[0].tobytes()
    header = json.dumps({"inputs": [{"name": name, "shape": shape, "datatype": "UINT8",
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}}).encode()
    request = (f"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: {len(header)}\r\n"
               f"Content-Length: {len(header) + x.nbytes}\r\n\r\n").encode() + header + x.tobytes()
    with ServerProcess([str(tmp_path), "--port", "0", "--grpc-port", "0", "--policy", "latency"]) as server:
        host, port = server.http.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as conn:
            for _ in range(3):
                conn.sendall(request)
                head, body = _read_response(conn)
                assert head.startswith(b"HTTP/1.1 200")
                json_length = int(_header(head, b"inference-header-content-length"))
                assert body[json_length:] == local
        client = tritonclient_grpc.InferenceServerClient(server.grpc)
        tensor = tritonclient_grpc.InferInput(name, shape, "UINT8")
        tensor.set_data_from_numpy(x)
        reply = client.infer("m", [tensor], client_timeout=30).get_response()
        assert reply.raw_output_contents[0] == local
        client.close()


def _read_response(conn: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, "the server closed the connection mid-response"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(_header(head, b"content-length"))
    while len(body) < length:
        chunk = conn.recv(65536)
        assert chunk, "the server closed the connection mid-body"
        body += chunk
    assert len(body) == length  # nothing beyond the declared body: the next response starts clean
    return head, body


def _header(head: bytes, name: bytes) -> bytes:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    raise AssertionError(f"no {name!r} header in {head!r}")


def test_the_event_loop_runs_a_short_request_itself_only_while_the_server_is_otherwise_idle(tmp_path):
    from edgeaccel.serve.core import INLINE_ONE_PLACE_MAX_S

    core, _ = _core(tmp_path, "split_concat.tflite")
    try:
        inputs = _inputs(core, 0)
        core.infer("m", inputs).result(timeout=30)  # measured: a run of this graph takes well under 3 ms
        _device_free(core)
        assert core.quick("m") == INLINE_ONE_PLACE_MAX_S  # the server's only model: nobody else could start
        assert core.infer("m", inputs, here=core.quick("m")).done()
        core.admit()  # another request in flight: the loop must stay free for it and its client
        try:
            assert core.quick("m") == 0.0
        finally:
            core.release()
        _device_free(core)
        assert core.quick("m") == INLINE_ONE_PLACE_MAX_S
        assert core.quick("not-loaded") == 0.0
        core.refuse()  # shutting down: nothing new runs anywhere
        assert core.quick("m") == 0.0
    finally:
        core.close()


def test_the_event_loop_keeps_long_runs_off_itself_where_another_model_could_run_elsewhere(tmp_path):
    """A second model on the same device keeps the longer bound (its request would wait for the device anyway);
    one placed on another device (an accelerator: its record says where its executors run) brings it down to
    the short one, since its requests could have started while the loop ran."""
    from edgeaccel.serve.core import INLINE_MAX_S, INLINE_ONE_PLACE_MAX_S

    core, _ = _core(tmp_path, "split_concat.tflite")
    try:
        shutil.copy(MODELS / "mobilenet_v1_0.25_128_quant.tflite", tmp_path / "models" / "other.tflite")
        core.load("other")
        _device_free(core)
        assert core.get("other").devices == core.get("m").devices
        assert core.quick("m") == INLINE_ONE_PLACE_MAX_S
        core.get("other").devices = ["edgetpu:0"]  # as the record of a model served on an Edge TPU reads
        core._models_changed()  # what a load does once the model is in place (the caps are kept per load)
        assert core.quick("m") == INLINE_MAX_S
        assert core.quick("other") == INLINE_MAX_S  # and the other way round: "m" could run on the CPU meanwhile
        core.unload("other")
        assert core.quick("m") == INLINE_ONE_PLACE_MAX_S  # alone on its device again
    finally:
        core.close()


def _device_free(core) -> None:
    """Wait (briefly) for an idle executor's re-measurement, which holds the device, to end."""
    deadline = time.monotonic() + 10
    while not all(core.gate.idle(d) for d in core.get("m").devices) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_requests_arriving_together_run_side_by_side_not_one_by_one_on_the_event_loop(tmp_path):
    """A lone request may run on the event loop; requests whose heads arrive together (or while the loop ran
    one) must not take turns there while the device could run them side by side: the device's peak shows it."""
    import json
    import os

    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: the adaptive executor has one stream, the device runs one request at a time anyway")
    from edgeaccel.serve.process import ServerProcess

    shutil.copy(MODELS / "mobilenet_v2_1.0_224_quant.tflite", tmp_path / "m.tflite")  # ~6 ms a run on 2 cores
    x = np.zeros((1, 224, 224, 3), np.uint8)
    header = json.dumps({"inputs": [{"name": "input", "shape": [1, 224, 224, 3], "datatype": "UINT8",
                                     "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    request = (f"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: {len(header)}\r\n"
               f"Content-Length: {len(header) + x.nbytes}\r\n\r\n").encode() + header + x.tobytes()
    with ServerProcess([str(tmp_path), "--port", "0", "--grpc-port", "off"]) as server:
        host, port = server.http.rsplit(":", 1)
        conns = [socket.create_connection((host, int(port)), timeout=30) for _ in range(6)]
        try:
            for _ in range(5):  # one at a time first: the executor's run is measured, a lone request runs on the loop
                conns[0].sendall(request)
                assert _read_response(conns[0])[0].startswith(b"HTTP/1.1 200")
            assert _device_peak(host, port) == 1
            for _ in range(3):
                for conn in conns:
                    conn.sendall(request)
                for conn in conns:
                    head, _ = _read_response(conn)
                    assert head.startswith(b"HTTP/1.1 200"), head
        finally:
            for conn in conns:
                conn.close()
        assert _device_peak(host, port) >= 2


def _device_peak(host: str, port: str) -> float:
    """The most runs the server's CPU gate held at once so far (its /metrics)."""
    import re

    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        _, body = _read_response(conn)
    peak = re.search(rb'edgeaccel_serve_device_peak\{device="cpu"\} ([0-9.]+)', body)
    assert peak is not None, body[:500]
    return float(peak.group(1))
