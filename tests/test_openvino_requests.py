"""Under the throughput hint the OpenVINO executor holds three requests per stream (one running, two queued),
so that a stream never waits for Python to hand it the next one (measured: 0.44-0.50 of benchmark_app beside
it on a loaded CPU with the optimal number, 0.97-1.00 with three times it; tools/perf_suite.py). Every one of
those requests in flight at once gives run()'s answer for its own input."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS

pytestmark = pytest.mark.shared
pytest.importorskip("openvino")


@pytest.mark.parametrize("hint, per_stream", [("throughput", 3), ("latency", 1)])
def test_requests_held_and_answers_with_all_of_them_in_flight(hint, per_stream):
    with edgeaccel.load(MODELS / "mobilenet_v1_0.25_128_quant.tflite", executor="openvino",
                        performance_hint=hint) as model:
        optimal = model._executor.optimal_requests
        assert model.concurrency == per_stream * optimal
        rng = np.random.default_rng(1)
        xs = [rng.integers(0, 256, size=model.inputs[0].shape, dtype=np.uint8) for _ in range(2 * model.concurrency)]
        expected = [model.run(x)[0] for x in xs]
        futures = [model.submit(x) for x in xs]  # more than it holds: submit waits for an idle request
        assert len(model._executor._queue) == model.concurrency
        for future, want in zip(futures, expected, strict=True):
            np.testing.assert_array_equal(future.result(timeout=60)[0], want)


@pytest.mark.slow
def test_requests_in_flight_at_exit_finish_before_the_interpreter_goes(tmp_path):
    """A model never closed, with requests still queued when the script ends: the process exits 0. Without the
    exit hook OpenVINO's completion thread called into the finalizing interpreter and the process aborted
    ("FATAL: exception not rethrown")."""
    import subprocess
    import sys

    script = tmp_path / "leave_requests.py"
    script.write_text(
        "import numpy as np, edgeaccel\n"
        f"m = edgeaccel.load({str(MODELS / 'mobilenet_v2_1.0_224_quant.onnx')!r}, executor='openvino',\n"
        "                   performance_hint='throughput', calibrate=False)\n"
        "x = np.zeros(m.inputs[0].shape, np.uint8)\n"
        "futures = [m.submit(x) for _ in range(2 * m.concurrency)]\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "FATAL" not in done.stderr, done.stderr[-2000:]
