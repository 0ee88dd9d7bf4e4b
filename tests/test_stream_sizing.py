"""Throughput streams on many cores (executor_options.throughput_stream_threads): one thread each below 8 cores,
wider streams above, each with threads of its own (a LiteRT interpreter each; an ONNX Runtime session each,
since concurrent runs of one session share its intra-op pool). The core count is what ``default_threads``
reports; a 16-core machine is stood in for by that figure (the runtimes do start 4 threads a stream here).
Answers must not depend on which stream ran them. Real LiteRT and ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel
from edgeaccel.executors import executor_options
from edgeaccel.executors.executor_options import throughput_stream_threads
from edgeaccel.options import RuntimeOptions, SelectionOptions

from conftest import SAMPLES
from onnx_models import small_conv

TFLITE = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"
THROUGHPUT = RuntimeOptions(performance_hint="throughput")
NO_CALIBRATION = SelectionOptions(calibrate=False)


@pytest.mark.parametrize("cores, threads", [(1, 1), (2, 1), (4, 1), (7, 1), (8, 2), (12, 3), (16, 4), (32, 5),
                                            (64, 8)])
def test_streams_are_one_thread_on_small_machines_and_wider_on_large_ones(cores, threads):
    assert throughput_stream_threads(cores) == threads
    assert cores // threads >= min(cores, 4)  # never fewer than 4 streams where there are 4 cores


def _inputs(model, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    spec = model.inputs[0]
    if spec.dtype == np.uint8:
        return [rng.integers(0, 256, spec.shape, dtype=np.uint8) for _ in range(n)]
    return [rng.standard_normal(spec.shape).astype(spec.dtype) for _ in range(n)]


@pytest.mark.parametrize("runtime", ["litert", "onnxruntime"])
def test_sixteen_cores_get_four_streams_of_four_threads_each_with_its_own_runtime_object(tmp_path, monkeypatch,
                                                                                          runtime):
    pytest.importorskip("ai_edge_litert" if runtime == "litert" else "onnxruntime")
    path = TFLITE if runtime == "litert" else small_conv(tmp_path / "conv.onnx")
    with edgeaccel.load(path, executor=runtime, selection=NO_CALIBRATION) as plain:
        xs = _inputs(plain, 16)
        want = [plain.run(x) for x in xs]
    monkeypatch.setattr(executor_options, "default_threads", lambda: 16)
    with edgeaccel.load(path, executor=runtime, runtime=THROUGHPUT, selection=NO_CALIBRATION) as model:
        assert model.executor.threads == 4 and model.concurrency == 4
        answers = [f.result(60) for f in [model.submit(x) for x in xs]]
        pool = model._executor._pool if runtime == "litert" else model._executor._sessions
        held = [pool.take() for _ in range(3)]  # three streams busy: a run now is the fourth, on an object of its own
        try:
            last = model.run(xs[0])
            assert len(pool) == 4 and len({id(obj) for obj in held}) == 3
        finally:
            for obj in held:
                pool.give(obj)
    for a, b in zip(last, want[0], strict=True):
        np.testing.assert_array_equal(a, b)
    for got, expected in zip(answers, want, strict=True):
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)


def test_an_onnx_model_on_one_thread_streams_keeps_one_shared_session(tmp_path, monkeypatch):
    """Single-threaded streams have no pool to share: concurrent runs of the one session are what ORT supports."""
    pytest.importorskip("onnxruntime")
    monkeypatch.setattr(executor_options, "default_threads", lambda: 4)
    with edgeaccel.load(small_conv(tmp_path / "conv.onnx"), executor="onnxruntime", runtime=THROUGHPUT,
                        selection=NO_CALIBRATION) as model:
        assert model.executor.threads == 1 and model.concurrency == 4 and model._executor._sessions is None
