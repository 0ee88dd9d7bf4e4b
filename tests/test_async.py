"""submit() and stream() on every executor: same answers as run(), order kept when asked, errors in the
future, and a run-time failure falls back as in run()."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS
from edgeaccel.errors import InferenceError, InputShapeError

pytestmark = pytest.mark.shared

CASES = {
    "litert": ("mobilenet_v1_0.25_128_quant.tflite", {}),
    "openvino": ("mobilenet_v1_0.25_128_quant.tflite", {"executor": "openvino"}),
    "onnxruntime": ("mobilenet_v2_1.0_224_quant.onnx", {}),
}


def inputs_for(model, count, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=model.inputs[0].shape, dtype=np.uint8) for _ in range(count)]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("hint", ["latency", "throughput"])
def test_stream_in_order_equals_run(case, hint):
    name, kwargs = CASES[case]
    with edgeaccel.load(MODELS / name, performance_hint=hint, **kwargs) as model:
        xs = inputs_for(model, 12)
        expected = [model.run(x)[0] for x in xs]
        got = [out[0] for out in model.stream(xs)]
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_array_equal(g, e)
        unordered = [out[0] for out in model.stream(xs, ordered=False, max_in_flight=3)]
        assert sorted(a.tobytes() for a in unordered) == sorted(e.tobytes() for e in expected)
        futures = [model.submit(x, dequantize=True) for x in xs[:3]]
        for f in futures:
            assert f.result(timeout=30)[0].dtype == np.float32


def test_submit_checks_inputs_at_once():
    with edgeaccel.load(MODELS / "mobilenet_v1_0.25_128_quant.tflite") as model:
        with pytest.raises(InputShapeError):
            model.submit(np.zeros((1, 3, 3, 3), np.uint8))


def test_submit_failure_falls_back_in_the_background():
    with edgeaccel.load(MODELS / "mobilenet_v1_0.25_128_quant.tflite") as model:
        x = inputs_for(model, 1)[0]
        expected = model.run(x)[0]

        def broken(_inputs):
            raise InferenceError("device went away", runtime="litert")

        model._executor.run = broken
        out = model.submit(x).result(timeout=60)[0]
        assert np.abs(out.astype(int) - expected.astype(int)).max() <= 1
        assert model.fallbacks and model.fallbacks[-1].stage == "run"


def test_submit_failure_with_strict_arrives_in_the_future():
    with edgeaccel.load(MODELS / "mobilenet_v1_0.25_128_quant.tflite", strict=True) as model:
        def broken(_inputs):
            raise InferenceError("device went away", runtime="litert")

        model._executor.run = broken
        future = model.submit(inputs_for(model, 1)[0])
        with pytest.raises(InferenceError, match="went away"):
            future.result(timeout=30)
