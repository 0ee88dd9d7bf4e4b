"""performance_hint="adaptive" (executors/adaptive.py): a lone request on the latency twin (every core), requests
that overlap on the throughput twin (a core each below 8 cores; wider streams: test_stream_sizing.py), the same
answers from both; real LiteRT and ONNX Runtime."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import edgeaccel

from conftest import SAMPLES
from onnx_models import small_conv

TFLITE = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"
CORES = len(os.sched_getaffinity(0))
needs_two_cores = pytest.mark.skipif(CORES < 2, reason="one core here: the adaptive hint has no second stream")


def _inputs(model, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    spec = model.inputs[0]
    if spec.dtype == np.uint8:
        return [rng.integers(0, 256, spec.shape, dtype=np.uint8) for _ in range(n)]
    return [rng.standard_normal(spec.shape).astype(spec.dtype) for _ in range(n)]


@needs_two_cores
@pytest.mark.parametrize("runtime", ["litert", "onnxruntime"])
def test_lone_requests_take_the_latency_twin_and_overlapping_ones_the_streams(tmp_path, monkeypatch, runtime):
    path = TFLITE if runtime == "litert" else small_conv(tmp_path / "conv.onnx")
    with edgeaccel.load(path, executor=runtime, performance_hint="adaptive", calibrate=False) as model, \
            edgeaccel.load(path, executor=runtime, calibrate=False) as plain:
        details = model.executor.details
        assert details["adaptive"] is True and details["throughput_streams"] == model.concurrency >= 2
        assert model.executor.threads == plain.executor.threads == CORES  # a lone request has every core
        xs = _inputs(model, 24)
        for x in xs[:4]:
            model.run(x)
        assert model.executor.details["runs"] == {"latency": 4, "throughput": 0}
        # a request arriving while another runs: the lone one is held after its real run (a spy around the
        # latency twin's run, so that the overlap does not depend on timing); the second takes a stream
        twin = model._executor.latency
        real_run, ran, release = twin.run, threading.Event(), threading.Event()

        def held_run(arrays):
            out = real_run(arrays)
            ran.set()
            release.wait(30)
            return out

        monkeypatch.setattr(twin, "run", held_run)
        first: list = []
        lone = threading.Thread(target=lambda: first.append(model.run(xs[4])))
        lone.start()
        assert ran.wait(30)
        second = model.run(xs[5])
        release.set()
        lone.join(30)
        assert model.executor.details["runs"] == {"latency": 5, "throughput": 1}
        results = {4: first[0], 5: second}
        futures = [model.submit(x) for x in xs]  # `concurrency` workers calling run: both twins answer
        answers = [f.result(60) for f in futures]
        # the twins are the same runtime on the same model: the same answers
        for x, got in zip(xs, answers, strict=True):
            want = plain.run(x)
            for a, b in zip(got, want, strict=True):
                np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=1, rtol=1e-4)
        for i, got in results.items():
            np.testing.assert_allclose(got[0].astype(np.float64), plain.run(xs[i])[0].astype(np.float64),
                                       atol=1, rtol=1e-4)


def test_on_one_core_adaptive_is_the_latency_executor_alone():
    """With one core the throughput configuration has one stream: nothing to adapt to, no second copy."""
    script = ("import os, edgeaccel\n"
              "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
              f"m = edgeaccel.load({str(TFLITE)!r}, executor='litert', performance_hint='adaptive', calibrate=False)\n"
              "print(m.concurrency, m.executor.threads, 'adaptive' in m.executor.details)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "False"]


def test_a_wrong_performance_hint_names_the_three():
    with pytest.raises(ValueError, match="'latency', 'throughput' or 'adaptive'"):
        edgeaccel.load(TFLITE, performance_hint="fast")


@needs_two_cores
def test_under_a_policy_only_each_devices_first_executor_holds_the_twins():
    """The device's work goes to one executor; its fallbacks there open with the latency hint alone (no
    second copy of their runtime's objects)."""
    with edgeaccel.load(TFLITE, policy="thermal", performance_hint="adaptive", calibrate=False) as model:
        by_device: dict[str, list[bool]] = {}
        for info in model.executors.values():
            by_device.setdefault(info.device, []).append(bool(info.details.get("adaptive")))
        assert by_device and all(flags[0] and not any(flags[1:]) for flags in by_device.values()), by_device
