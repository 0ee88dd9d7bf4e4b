"""load(isolate=True): the same Model API served from a worker process; a crash or hang there becomes an
edgeaccel error in this process, the worker is replaced, the caller's inputs are untouched.

Crashes and hangs are real: the worker is sent SIGSEGV / SIGSTOP while a request is in flight (stopping it
first makes the timing deterministic), or given limits it cannot meet.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS, image_input
from edgeaccel import IsolationLimits
from edgeaccel.errors import InferenceTimeoutError, ModelClosedError, WorkerCrashedError

pytestmark = pytest.mark.shared

CASES = {
    "litert": ("mobilenet_v1_0.25_128_quant.tflite", {}),
    "onnxruntime": ("mobilenet_v2_1.0_224_quant.onnx", {}),
    "openvino": ("openvino/mobilenet_v2_1.0_224_quant.xml", {}),
}
SMALL = MODELS / "mobilenet_v1_0.25_128_quant.tflite"


def worker_pid(model) -> int:
    return model.executor.details["isolated"]["pid"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def run_while_stopped(model, inputs, then):
    """Stop the worker, send a request, then do ``then(pid)`` to it: the request is surely in flight."""
    pid = worker_pid(model)
    os.kill(pid, signal.SIGSTOP)
    result: dict = {}

    def call():
        try:
            result["value"] = model.run(inputs)
        except Exception as exc:  # the test inspects it
            result["error"] = exc

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.3)
    then(pid)
    t.join(30)
    assert not t.is_alive()
    return result, pid


@pytest.mark.parametrize("case", sorted(CASES))
def test_isolated_model_has_the_same_api_and_answers(case, labels):
    name, kwargs = CASES[case]
    with edgeaccel.load(MODELS / name, **kwargs) as direct, \
            edgeaccel.load(MODELS / name, isolate=True, **kwargs) as isolated:
        assert isolated.inputs == direct.inputs and isolated.outputs == direct.outputs
        assert isolated.executor.name == direct.executor.name == f"{case}:CPU"
        assert isolated.executor.reason == direct.executor.reason
        assert isolated.fallbacks == ()
        pid = worker_pid(isolated)
        assert pid != os.getpid() and alive(pid)
        image = image_input("bird", isolated.inputs[0])
        want = direct.run(image)
        got = isolated.run(image)
        assert got.names == want.names
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        assert labels[int(np.argmax(got[0]))] == "chickadee"
        np.testing.assert_array_equal(isolated.run({isolated.inputs[0].name: image}, dequantize=True)[0],
                                      direct.run(image, dequantize=True)[0])
    with pytest.raises(ModelClosedError):
        isolated.run(image)
    isolated.close()  # idempotent
    deadline = time.time() + 10
    while alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "close() must end the worker"


def test_crash_during_run_is_an_error_and_the_worker_is_replaced():
    with edgeaccel.load(SMALL, isolate=True, strict=True) as model:
        x = image_input("bird", model.inputs[0])
        before = x.copy()
        want = model.run(x)[0]

        def segfault(pid):
            os.kill(pid, signal.SIGSEGV)
            os.kill(pid, signal.SIGCONT)

        result, pid = run_while_stopped(model, x, segfault)
        error = result["error"]
        assert isinstance(error, WorkerCrashedError) and isinstance(error, edgeaccel.InferenceError)
        assert "SIGSEGV" in str(error) and "retry" in error.hint
        np.testing.assert_array_equal(x, before)  # nothing the caller handed in is lost
        np.testing.assert_array_equal(model.run(x)[0], want)  # the same request, retried, on a new worker
        assert worker_pid(model) != pid
        assert model.executor.details["isolated"]["starts"] == 2


def test_hang_is_a_timeout_and_the_worker_is_replaced():
    with edgeaccel.load(SMALL, isolate=IsolationLimits(run_timeout=1.0), strict=True) as model:
        x = image_input("bird", model.inputs[0])
        want = model.run(x)[0]
        started = time.monotonic()
        result, pid = run_while_stopped(model, x, lambda pid: None)
        error = result["error"]
        assert isinstance(error, InferenceTimeoutError) and isinstance(error, TimeoutError)
        assert "1 s" in str(error) and "retried" in error.hint
        assert time.monotonic() - started < 10
        assert not alive(pid)
        np.testing.assert_array_equal(model.run(x)[0], want)


def test_crash_without_strict_falls_back_visibly():
    with edgeaccel.load(SMALL, isolate=True) as model:
        x = image_input("bird", model.inputs[0])
        want = int(np.argmax(model.run(x)[0]))
        result, _ = run_while_stopped(model, x, lambda pid: os.kill(pid, signal.SIGKILL))
        assert "value" in result, result.get("error")
        assert int(np.argmax(result["value"][0])) == want
        (event,) = model.fallbacks
        assert event.stage == "run" and "SIGKILL" in event.error and event.replaced_by == "openvino:CPU"
        assert model.executor.runtime == "openvino" and "isolated" in model.executor.details


def test_load_timeout():
    started = time.monotonic()
    with pytest.raises(InferenceTimeoutError, match="did not load within"):
        edgeaccel.load(SMALL, isolate=IsolationLimits(load_timeout=0.05), strict=True)
    assert time.monotonic() - started < 10


def test_memory_limit_stops_a_model_too_large_for_it():
    # 300 MiB of address space is less than OpenVINO needs to compile MobileNetV2: the worker fails to
    # load, and the caller gets an edgeaccel error that names the limit or the memory it could not get.
    with pytest.raises(edgeaccel.EdgeAccelError) as err:
        edgeaccel.load(MODELS / "openvino/mobilenet_v2_1.0_224_quant.xml", strict=True,
                       isolate=IsolationLimits(memory_bytes=300 << 20))
    assert "IsolationLimits(memory_bytes=" in err.value.hint, str(err.value)


def test_concurrent_callers_share_one_worker():
    with edgeaccel.load(MODELS / "split_concat.tflite", isolate=True) as model:
        rng = np.random.default_rng(0)
        inputs = [[rng.integers(0, 256, s.shape, dtype=np.uint8) for s in model.inputs] for _ in range(6)]
        expected = [list(model.run(x)) for x in inputs]

        def call(i):
            got = model.run(inputs[i % 6])
            return sum(not np.array_equal(g, e) for g, e in zip(got, expected[i % 6]))

        with ThreadPoolExecutor(8) as pool:
            assert sum(pool.map(call, range(8 * 50))) == 0
        assert model.executor.details["isolated"]["starts"] == 1


def test_worker_dies_with_its_caller(tmp_path):
    code = (
        "import edgeaccel, os, sys\n"
        f"m = edgeaccel.load({str(SMALL)!r}, isolate=True)\n"
        "print(m.executor.details['isolated']['pid'], flush=True)\n"
        "os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    pid = int(out.stdout.split()[0])
    deadline = time.time() + 10
    while alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_replies_are_never_unpickled():
    from edgeaccel.isolation import wire

    a, b = socket.socketpair()
    with a, b:
        wire.send_frame(a, b'{"arrays": [{"dtype": "|O", "shape": [1]}]}', [b"\0" * 8])
        with pytest.raises(wire.WireError, match="refused"):
            wire.recv_json(b, 1 << 20)
        wire.send_frame(a, b'{"arrays": [{"dtype": "<f4", "shape": [4]}]}', [b"\0" * 8])
        with pytest.raises(wire.WireError, match="does not match"):
            wire.recv_json(b, 1 << 20)
        wire.send_frame(a, b"{}", [b"\0" * 64])
        with pytest.raises(wire.WireError, match="limit"):
            wire.recv_json(b, 16)


def test_cli_isolate():
    out = subprocess.run([sys.executable, "-m", "edgeaccel", "run", str(SMALL), "--isolate", "--runs", "2", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import json

    report = json.loads(out.stdout)
    assert report["executor"]["isolated"] is True and report["executor"]["runtime"] == "litert"


def test_worker_under_a_caller_with_a_lower_memory_limit(tmp_path):
    """A caller already under RLIMIT_AS (a container, ulimit -v) below IsolationLimits' default: the worker
    takes the inherited limit instead of failing to raise it."""
    code = (
        "import resource, numpy as np, edgeaccel\n"
        "resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))\n"
        f"with edgeaccel.load({str(SMALL)!r}, isolate=True, strict=True) as m:\n"
        "    print(m.run(np.zeros(m.inputs[0].shape, np.uint8))[0].shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "(1, 1001)" in out.stdout, out.stderr[-2000:]


def test_worker_started_from_a_short_lived_thread_outlives_it():
    """PR_SET_PDEATHSIG follows the forking thread: a worker forked by an app's loader thread used to be
    killed when that thread ended. Workers are forked by one long-lived thread instead."""
    box = {}
    t = threading.Thread(target=lambda: box.update(model=edgeaccel.load(SMALL, isolate=True, strict=True)))
    t.start()
    t.join()
    time.sleep(0.5)
    with box["model"] as model:
        assert alive(worker_pid(model))
        model.run(np.zeros(model.inputs[0].shape, np.uint8))
        assert model.executor.details["isolated"]["starts"] == 1
