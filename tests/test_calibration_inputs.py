"""Inputs calibration makes for itself are inputs the model can take, and a candidate that fails only on them
is never condemned for real inputs (it happened: `tune` on a dynamic model stored a failure on invented inputs,
and every later `run` said no executor could run the model)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import edgeaccel
from edgeaccel.selection.cache import calibration_key
from edgeaccel.selection.calibration import SYNTHETIC_FAILURE, sample_inputs
from edgeaccel.executors.base import ExecutorOptions
from edgeaccel.loader import select
from edgeaccel.modelinfo import Quantization, TensorSpec
from edgeaccel.tensors import TOKEN_IDS, concrete_shape, random_array
from onnx_models import save


def embedding(path, vocab: int = 100):
    """ids int64 (batch, sequence), both dynamic -> Gather from a (vocab, 8) table -> mean over the sequence."""
    from onnx import TensorProto, helper

    table = np.random.default_rng(0).standard_normal((vocab, 8)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["table", "input_ids"], ["e"]),
             helper.make_node("ReduceMean", ["e"], ["y"], axes=[1], keepdims=0)]
    return save(nodes, [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])], {"table": table}, path,
                opset=13)


def pairs(path):
    """x float (1, n), n dynamic, read in fives: Reshape to (-1, 5) fails at run time unless 5 divides n."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Reshape", ["x", "shape"], ["p"]),
             helper.make_node("ReduceSum", ["p", "axes"], ["y"], keepdims=0)]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
                {"shape": np.array([-1, 5], np.int64), "axes": np.array([1], np.int64)}, path)


@pytest.mark.parametrize("spec, low, high", [
    (TensorSpec("input_ids", (1, None), np.dtype(np.int64)), 0, TOKEN_IDS - 1),
    (TensorSpec("tokens", (1, 7), np.dtype(np.int32)), 0, TOKEN_IDS - 1),
    (TensorSpec("image", (1, 4, 4, 3), np.dtype(np.uint8)), 0, 255),
    (TensorSpec("q", (1, 4), np.dtype(np.int8), Quantization((0.1,), (0,))), -128, 127),
    (TensorSpec("attention_mask", (1, None), np.dtype(np.int64)), 1, 1),
])
def test_synthetic_integers_stay_in_the_range_the_model_takes(spec, low, high):
    values = random_array(spec, np.random.default_rng(0))
    assert values.dtype == spec.dtype and values.min() >= low and values.max() <= high


def test_dynamic_dimensions_get_sizes_by_role():
    assert concrete_shape(TensorSpec("x", (None, 3, None, None), np.dtype(np.float32))) == [1, 3, 224, 224]
    assert concrete_shape(TensorSpec("x", (None, None, None, 3), np.dtype(np.uint8))) == [1, 224, 224, 3]
    assert concrete_shape(TensorSpec("ids", (None, None), np.dtype(np.int64))) == [1, 16]
    assert concrete_shape(TensorSpec("x", (2, 5), np.dtype(np.float32))) == [2, 5]


def test_images_with_dynamic_size_get_the_photo():
    spec = TensorSpec("x", (None, 3, None, None), np.dtype(np.float32))
    (first,), (second,) = sample_inputs([spec], 2, 0)
    assert first.shape == (1, 3, 224, 224) and not np.array_equal(first, second)  # two variants of the photo


def test_token_ids_calibrate_on_every_runtime(tmp_path):
    """Ids drawn from -128..255 used to break the embedding lookup on every candidate ("failed to run")."""
    sel = select(embedding(tmp_path / "emb.onnx"), calibrate=True, cache_dir=tmp_path, calibration_budget_s=0.5)
    plain = {k.split("/")[1]: m for k, m in sel.measurements.items()}
    assert plain["onnxruntime:CPU"].p50_ms > 0 and plain["openvino:CPU"].p50_ms > 0
    assert "accurate" in plain["openvino:CPU"].reason


def test_failure_on_invented_inputs_is_not_stored_as_broken(tmp_path):
    path = pairs(tmp_path / "pairs.onnx")
    tuned = select(path, calibrate=True, cache_dir=tmp_path, calibration_budget_s=0.5)
    m = next(m for k, m in tuned.measurements.items() if k.endswith("/onnxruntime:CPU"))
    assert SYNTHETIC_FAILURE in m.reason and "calibration_inputs=" in m.reason and m.eligible
    assert tuned.ranking.candidates  # something can still run it
    with edgeaccel.load(path, cache_dir=tmp_path) as model:  # later loads read the cache: still runnable
        assert model.run(np.ones((1, 10), np.float32))[0].shape == (2,)
    real = [[np.ones((1, 10), np.float32)], [np.arange(5, dtype=np.float32)[None]]]
    measured = select(path, calibrate=True, cache_dir=tmp_path, calibration_budget_s=0.5, calibration_inputs=real)
    m = next(m for k, m in measured.measurements.items() if k.endswith("/onnxruntime:CPU"))
    assert m.p50_ms > 0 and SYNTHETIC_FAILURE not in m.reason


def test_the_cache_key_covers_what_changes_a_measurement():
    base = dict(artifact_hashes=["a"], fingerprint="x86|2", versions={"litert": "2.3"}, threads=2)
    options = ExecutorOptions()
    key = calibration_key(**base, options=options)
    changed = [
        calibration_key(**base, options=ExecutorOptions(runtime_options={"openvino": {"NUM_STREAMS": 2}})),
        calibration_key(**base, options=ExecutorOptions(performance_hint="throughput")),
        calibration_key(**base, options=ExecutorOptions(precision="bf16")),
        calibration_key(**{**base, "threads": 1}, options=options),
        calibration_key(**{**base, "versions": {"litert": "2.4"}}, options=options),
        calibration_key(**{**base, "fingerprint": "arm|4"}, options=options),
        calibration_key(**base, options=options, tolerance=0.1),
        calibration_key(**base, options=options, device="CUDA"),
    ]
    assert key == calibration_key(**base, options=ExecutorOptions())
    assert len({key, *changed}) == len(changed) + 1


def test_a_tune_on_real_samples_serves_later_loads(tmp_path):
    """The samples a calibration ran on are recorded with it, not keyed: a later load cannot know them, and
    `tune --input` followed by a plain load must use what was measured."""
    path = embedding(tmp_path / "emb.onnx")
    real = [[np.arange(7, dtype=np.int64)[None]]]
    select(path, calibrate=True, cache_dir=tmp_path, calibration_budget_s=0.3, calibration_inputs=real)
    later = select(path, cache_dir=tmp_path)
    assert later.measurements
    assert json.loads(later.cache_file.read_text())["about"]["calibration_inputs"] not in (None, "edgeaccel samples")


def test_measurements_under_other_runtime_options_are_not_reused(tmp_path):
    path = embedding(tmp_path / "emb.onnx")
    select(path, calibrate=True, cache_dir=tmp_path, calibration_budget_s=0.3)
    assert select(path, cache_dir=tmp_path).measurements  # the same settings: from the cache
    assert not select(path, cache_dir=tmp_path, performance_hint="throughput").measurements
    assert not select(path, cache_dir=tmp_path, runtime_options={"onnxruntime": {"x": 1}}).measurements
