"""Calibration on the real runtimes: accuracy against the CPU reference, timing, the cache, and fallback."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS
from edgeaccel.selection.calibration import compare
from edgeaccel.errors import InferenceError
from edgeaccel.loader import select
from edgeaccel.modelinfo import Quantization, TensorSpec
from onnx_models import bf16_trap, small_conv

U8 = TensorSpec("y", (1, 4), np.dtype(np.uint8), Quantization((1 / 256,), (0,)))
F32 = TensorSpec("y", (1, 4), np.dtype(np.float32))
IDS = TensorSpec("y", (1, 4), np.dtype(np.int64))


@pytest.mark.parametrize(
    "ref, got, spec, ok",
    [
        ([[10, 200, 30, 0]], [[10, 200, 30, 0]], U8, True),
        ([[10, 200, 30, 0]], [[11, 199, 30, 1]], U8, True),  # one quantization step apart: agreement
        ([[10, 200, 30, 0]], [[10, 100, 180, 0]], U8, False),  # the winner changed
        ([[0.1, 0.9, 0.3, 0.0]], [[0.1, 0.89, 0.3, 0.0]], F32, True),
        ([[0.1, 0.9, 0.3, 0.0]], [[0.1, 0.5, 0.3, 0.0]], F32, False),  # 44% of the range
        ([[1, 2, 3, 4]], [[1, 2, 3, 4]], IDS, True),
        ([[1, 2, 3, 4]], [[1, 2, 3, 5]], IDS, False),
    ],
)
def test_compare(ref, got, spec, ok):
    dtype = spec.dtype
    result, _, why = compare([np.asarray(ref, dtype)], [np.asarray(got, dtype)], [spec], [spec], 0.05)
    assert result is ok, why


@pytest.mark.slow
@pytest.mark.shared
def test_calibration_measures_caches_and_chooses_from_measurements(tmp_path):
    model = MODELS / "mobilenet_v1_0.25_128_quant.tflite"
    first = select(model, calibrate=True, cache_dir=tmp_path, calibration_budget_s=1.0)
    assert first.measured_now and first.cache_file.is_file()
    measured = [c for c in first.ranking.candidates if first.measurements[c.key].p50_ms]
    assert {c.runtime for c in measured} >= {"litert", "openvino"}
    p50s = [first.measurements[c.key].p50_ms for c in first.ranking.candidates]
    assert p50s == sorted(p50s)  # ranked by measured latency
    again = select(model, cache_dir=tmp_path)  # no measuring: from the cache
    assert not again.measured_now and again.measurements == first.measurements
    with edgeaccel.load(model, cache_dir=tmp_path) as loaded:
        assert "measured p50" in loaded.executor.reason
        assert loaded.executor.runtime == first.ranking.candidates[0].runtime


def test_bf16_refused_where_it_changes_answers(tmp_path):
    path = bf16_trap(tmp_path / "trap.onnx")
    sel = select(path, calibrate=True, cache_dir=tmp_path, calibration_budget_s=0.5)
    ranked = [c.name for c in sel.ranking.candidates]
    assert "openvino:CPU@bf16" not in ranked and "onnxruntime:CPU" in ranked and "openvino:CPU" in ranked
    refusal = next(r for r in sel.ranking.rejected if r.name == "openvino:CPU@bf16")
    assert "calibration" in refusal.reason and "range" in refusal.reason


def test_bf16_admitted_where_it_keeps_answers(tmp_path):
    path = small_conv(tmp_path / "conv.onnx")
    sel = select(path, calibrate=True, cache_dir=tmp_path, calibration_budget_s=0.5)
    m = sel.measurements[next(c for c in [*sel.ranking.candidates] if c.name == "openvino:CPU@bf16").key]
    assert m.eligible and m.p50_ms > 0


@pytest.mark.shared
def test_run_time_failure_falls_back_with_the_same_inputs(caplog):
    with edgeaccel.load(MODELS / "split_concat.tflite") as model:
        rng = np.random.default_rng(1)
        arrays = [rng.integers(0, 256, size=s.shape, dtype=np.uint8) for s in model.inputs]
        kept = [a.copy() for a in arrays]
        expected = model.run(arrays)
        first = model.executor.name

        def broken(_inputs):
            raise InferenceError("delegate lost its device", runtime="litert")

        model._executor.run = broken  # the chosen candidate now fails at run time
        got = model.run(arrays)
        assert model.executor.name != first
        for a, b in zip(got, expected, strict=True):
            assert np.abs(a.astype(int) - b.astype(int)).max() <= 1
        for a, b in zip(arrays, kept, strict=True):
            np.testing.assert_array_equal(a, b)  # nothing the caller handed in was changed
        (event,) = model.fallbacks
        assert (event.stage, event.failed, event.replaced_by) == ("run", first, model.executor.name)
        assert "delegate lost its device" in event.error
        assert "fallback" in caplog.text


@pytest.mark.shared
def test_strict_turns_fallback_into_an_error():
    with edgeaccel.load(MODELS / "split_concat.tflite", strict=True) as model:
        arrays = [np.zeros(s.shape, np.uint8) for s in model.inputs]

        def broken(_inputs):
            raise InferenceError("boom", runtime="litert")

        model._executor.run = broken
        with pytest.raises(InferenceError, match="boom"):
            model.run(arrays)
        assert model.fallbacks == ()


@pytest.mark.shared
def test_profile_by_name_path_or_match(tmp_path):
    matched = select(MODELS / "split_concat.tflite")
    assert matched.profile is not None and matched.profile_reason
    named = select(MODELS / "split_concat.tflite", profile="rpi5")
    assert named.profile.name == "rpi5" and named.ranking.profile == "rpi5"
    broken = tmp_path / "broken.yaml"
    broken.write_text("schema: edgeaccel.profile/1\nname: x\ntitle: x\nfrobnicate: 1\n")
    with pytest.raises(edgeaccel.ConfigError, match="broken.yaml.*frobnicate"):
        select(MODELS / "split_concat.tflite", profile=str(broken))


@pytest.mark.shared
def test_a_scheduled_model_assumes_the_profile_trip_points():
    with edgeaccel.load(MODELS / "split_concat.tflite", policy="thermal", profile="rpi5") as model:
        model.run([np.zeros(s.shape, np.uint8) for s in model.inputs])
        limits = model._sampler.limits
    from edgeaccel.profiles import get_profile

    thermal = get_profile("rpi5").thermal
    assert limits["cpu"].passive_c == thermal.passive_c and limits["cpu"].critical_c == thermal.critical_c
