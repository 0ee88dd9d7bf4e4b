"""8 threads x 200 calls on each executor: every output equals the single-threaded one for its input.

runtime facts: a shared LiteRT Interpreter or OpenVINO InferRequest returns wrong results across threads; the
executors keep those per caller. Inputs differ per call so that a crossed-over result cannot hide.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS

pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: soak: many threads for seconds

THREADS, CALLS = 8, 200
CASES = {
    "litert": ("mobilenet_v1_0.25_128_quant.tflite", {}),
    "litert-multi-io": ("split_concat.tflite", {}),
    "openvino-tflite": ("mobilenet_v1_0.25_128_quant.tflite", {"executor": "openvino"}),
    "openvino-ir": ("openvino/mobilenet_v2_1.0_224_quant.xml", {}),
    "onnxruntime": ("mobilenet_v2_1.0_224_quant.onnx", {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_concurrent_runs_match_sequential(case):
    name, kwargs = CASES[case]
    rng = np.random.default_rng(7)
    with edgeaccel.load(MODELS / name, **kwargs) as model:
        inputs = [[rng.integers(0, 256, size=s.shape, dtype=np.uint8) for s in model.inputs] for _ in range(8)]
        expected = [list(model.run(x)) for x in inputs]

        def call(i: int) -> int:
            k = i % len(inputs)
            got = model.run(inputs[k])
            return sum(not np.array_equal(g, e) for g, e in zip(got, expected[k], strict=True))

        with ThreadPoolExecutor(THREADS) as pool:
            wrong = sum(pool.map(call, range(THREADS * CALLS)))
    assert wrong == 0
