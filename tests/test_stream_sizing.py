"""Streams of the adaptive executor's throughput twin on many cores (executor_options.throughput_stream_threads):
one thread each below 8 cores, wider above, each with threads of its own (a LiteRT interpreter each; an ONNX
Runtime session each, since concurrent runs of one session share its intra-op pool: runtime facts). The plain
throughput hint keeps one thread a stream. The core count is what ``default_threads`` reports; a 16-core machine
is stood in for by that figure (the runtimes do start 4 threads a stream here). Answers must not depend on which
stream ran them. Real LiteRT and ONNX Runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgeaccel
from edgeaccel.executors import executor_options
from edgeaccel.executors.executor_options import ExecutorOptions, throughput_stream_threads
from edgeaccel.options import RuntimeOptions, SelectionOptions

from conftest import SAMPLES
from onnx_models import small_conv

TFLITE = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"
NO_CALIBRATION = SelectionOptions(calibrate=False)


@pytest.mark.parametrize("cores, threads", [(1, 1), (2, 1), (4, 1), (7, 1), (8, 2), (12, 3), (16, 4), (32, 5),
                                            (64, 8)])
def test_streams_are_one_thread_on_small_machines_and_wider_on_large_ones(cores, threads):
    assert throughput_stream_threads(cores) == threads
    assert cores // threads >= min(cores, 4)  # never fewer than 4 streams where there are 4 cores


def test_the_width_is_the_callers_and_threads_win_over_it():
    sized = ExecutorOptions(RuntimeOptions(performance_hint="throughput"), stream_width=4)
    assert ExecutorOptions(RuntimeOptions(performance_hint="throughput")).stream_threads() == 1
    assert sized.stream_threads() == 4 and sized.with_runtime(cache=False).stream_width == 4
    assert sized.with_runtime(threads=2).stream_threads() == 2
    assert sized.with_runtime(performance_hint="latency").stream_threads() == executor_options.default_threads()


def _inputs(model, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    spec = model.inputs[0]
    if spec.dtype == np.uint8:
        return [rng.integers(0, 256, spec.shape, dtype=np.uint8) for _ in range(n)]
    return [rng.standard_normal(spec.shape).astype(spec.dtype) for _ in range(n)]


@pytest.mark.parametrize("runtime", ["litert", "onnxruntime"])
def test_on_sixteen_cores_the_adaptive_twin_has_four_streams_of_four_threads_each_its_own(tmp_path, monkeypatch,
                                                                                        runtime):
    pytest.importorskip("ai_edge_litert" if runtime == "litert" else "onnxruntime")
    path = TFLITE if runtime == "litert" else small_conv(tmp_path / "conv.onnx")
    with edgeaccel.load(path, executor=runtime, selection=NO_CALIBRATION) as plain:
        xs = _inputs(plain, 16)
        want = [plain.run(x) for x in xs]
    monkeypatch.setattr(executor_options, "default_threads", lambda: 16)
    with edgeaccel.load(path, executor=runtime, runtime=RuntimeOptions(performance_hint="adaptive"),
                        selection=NO_CALIBRATION) as model:
        twin = model._executor.throughput
        assert model.executor.threads == 16 and twin.info.threads == 4 and model.concurrency == 4
        answers = [f.result(60) for f in [model.submit(x) for x in xs]]
        pool = twin._pool if runtime == "litert" else twin._sessions
        held = [pool.take() for _ in range(3)]  # three streams busy: a run now is the fourth, on an object of its own
        try:
            last = twin.run([xs[0]])
            assert len(pool) == 4 and len({id(obj) for obj in held}) == 3
        finally:
            for obj in held:
                pool.give(obj)
    for got, expected in zip([*answers, last], [*want, want[0]], strict=True):
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("runtime", ["litert", "onnxruntime"])
def test_the_throughput_hint_keeps_one_thread_a_stream_and_one_shared_session(tmp_path, monkeypatch, runtime):
    """Many requests in flight (the hint's purpose): a stream per core. ORT's single-threaded streams have no
    pool to share: concurrent runs of the one session are what ORT supports."""
    pytest.importorskip("ai_edge_litert" if runtime == "litert" else "onnxruntime")
    path = TFLITE if runtime == "litert" else small_conv(tmp_path / "conv.onnx")
    monkeypatch.setattr(executor_options, "default_threads", lambda: 16)
    with edgeaccel.load(path, executor=runtime, runtime=RuntimeOptions(performance_hint="throughput"),
                        selection=NO_CALIBRATION) as model:
        assert model.executor.threads == 1 and model.concurrency == 16
        if runtime == "onnxruntime":
            assert model._executor._sessions is None


def test_an_onnx_stream_that_cannot_open_a_session_shares_the_first_and_says_so(tmp_path, monkeypatch, caplog):
    """The stream's file is gone (evicted from the cache, deleted) when requests first overlap: the stream runs on
    the first session (ORT allows concurrent runs of one), the same answers, one warning."""
    pytest.importorskip("onnxruntime")
    path = small_conv(tmp_path / "conv.onnx")
    with edgeaccel.load(path, executor="onnxruntime", selection=NO_CALIBRATION) as plain:
        x = _inputs(plain, 1)[0]
        want = plain.run(x)
    monkeypatch.setattr(executor_options, "default_threads", lambda: 16)
    with edgeaccel.load(path, executor="onnxruntime", runtime=RuntimeOptions(performance_hint="adaptive"),
                        selection=NO_CALIBRATION) as model:
        twin = model._executor.throughput
        Path(twin._stream_source[0]).unlink()  # the model, or ORT's optimized graph in the (test's own) cache
        held = [twin._sessions.take()]  # one stream busy: the next run needs a session of its own
        try:
            with caplog.at_level("WARNING", logger="edgeaccel.onnxruntime"):
                got = [twin.run([x]) for _ in range(2)]
                held += [twin._sessions.take() for _ in range(2)]
            assert all(session is held[0] for session in held)  # the first session, shared
        finally:
            for session in held:
                twin._sessions.give(session)
    assert len([r for r in caplog.records if "throughput stream" in r.getMessage()]) == 1
    for answer in got:
        np.testing.assert_array_equal(answer[0], want[0])


@pytest.mark.parametrize("runtime", ["litert", "onnxruntime"])
def test_closing_while_streams_run_lets_the_runs_finish_and_wakes_the_waiting(tmp_path, monkeypatch, runtime):
    """close() with every stream busy and a caller waiting for one: the busy runs answer, the waiting caller
    gets an error at once (it would otherwise wait forever)."""
    import threading

    pytest.importorskip("ai_edge_litert" if runtime == "litert" else "onnxruntime")
    path = TFLITE if runtime == "litert" else small_conv(tmp_path / "conv.onnx")
    monkeypatch.setattr(executor_options, "default_threads", lambda: 16)
    model = edgeaccel.load(path, executor=runtime, runtime=RuntimeOptions(performance_hint="adaptive"),
                           selection=NO_CALIBRATION)
    twin = model._executor.throughput
    pool = twin._pool if runtime == "litert" else twin._sessions
    held = [pool.take() for _ in range(4)]  # every stream busy
    x = _inputs(model, 1)[0]
    waiting: list = []
    waiter = threading.Thread(target=lambda: waiting.append(_outcome(twin.run, [x])))
    waiter.start()
    model.close()
    waiter.join(30)
    assert not waiter.is_alive() and isinstance(waiting[0], edgeaccel.errors.EdgeAccelError), waiting
    for obj in held:  # the runs that held them finish and give them back: closed, not kept
        pool.give(obj)
    assert len(pool) == 0


def _outcome(call, *args):
    try:
        return call(*args)
    except Exception as exc:
        return exc


def test_openvino_sizes_its_own_streams_and_the_details_do_not_claim_a_width():
    """OpenVINO's THROUGHPUT hint picks its streams and their threads itself (its info counts all threads):
    the adaptive details give no per-stream width for it, and the served metadata says so."""
    pytest.importorskip("openvino")
    from types import SimpleNamespace

    from edgeaccel.serve.describe import _streams

    with edgeaccel.load(TFLITE, executor="openvino", runtime=RuntimeOptions(performance_hint="adaptive"),
                        selection=NO_CALIBRATION) as model:
        details = model.executor.details
        if not details.get("adaptive"):
            pytest.skip("one core here: no throughput twin")
        assert "stream_threads" not in details
        said = _streams(SimpleNamespace(executors={"openvino:CPU": model.executor}))["streams"]
        assert said == f"{details['throughput_streams']} requests at once, in openvino's own streams"
    with edgeaccel.load(TFLITE, executor="litert", runtime=RuntimeOptions(performance_hint="adaptive"),
                        selection=NO_CALIBRATION) as model:
        width = model.executor.details["stream_threads"]
        assert _streams(SimpleNamespace(executors={"litert:CPU": model.executor}))["streams"] == \
            f"{model.concurrency} x {width} thread{'s' if width != 1 else ''}"
