"""ONNX Runtime's cached optimized graph must not change a later run.

Below ONNX IR version 4 every initializer is also a graph input (the old model-zoo classics). ORT's
ConstantSharing merges equal small initializers when it optimizes such a model, and the optimized graph it
saves still lists the merged names as inputs: loaded from the cache, the session asks for them in the feed
and the second run failed over to another runtime. The model here is built to trigger exactly that.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import edgeaccel


def ir3_with_initializers_as_inputs(path: Path) -> Path:
    """x (2, 3) -> Reshape([-1]) -> Mul(2) -> Reshape([-1]) -> Mul(2), ir_version 3, opset 8: two pairs of equal
    one-element initializers, each listed in graph.input as IR 3 requires."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    constants = {"a__SHAPE": np.array([-1], np.int64), "b__SHAPE": np.array([-1], np.int64),
                 "k1": np.array([2.0], np.float32), "k2": np.array([2.0], np.float32)}
    initializers = [numpy_helper.from_array(v, k) for k, v in constants.items()]
    nodes = [helper.make_node("Reshape", ["x", "a__SHAPE"], ["f"]), helper.make_node("Mul", ["f", "k1"], ["g"]),
             helper.make_node("Reshape", ["g", "b__SHAPE"], ["h"]), helper.make_node("Mul", ["h", "k2"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])]
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in initializers]
    graph = helper.make_graph(nodes, "ir3", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])],
                              initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    model.ir_version = 3
    onnx.save(model, path)
    return path


def test_second_load_with_the_same_cache_runs_like_the_first(tmp_path):
    path = ir3_with_initializers_as_inputs(tmp_path / "ir3.onnx")
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    answers = []
    for _ in range(2):
        with edgeaccel.load(path, executor="onnxruntime", cache_dir=tmp_path / "cache") as model:
            answers.append(model.run(x)[0])
            assert model.fallbacks == (), model.fallbacks
            assert model.executor.runtime == "onnxruntime"
            assert model.executor.details["optimized_model_from_cache"] is False
    np.testing.assert_array_equal(answers[0], x.reshape(-1) * 4)
    np.testing.assert_array_equal(answers[1], answers[0])


def test_newer_ir_models_still_use_the_optimized_graph_cache(tmp_path):
    """The guard is narrow: an IR 9 model is optimized once and read back from the cache."""
    from onnx_models import small_conv

    path = small_conv(tmp_path / "conv.onnx")
    x = np.random.default_rng(0).random((1, 3, 16, 16), np.float32)
    seen = []
    for _ in range(2):
        with edgeaccel.load(path, executor="onnxruntime", cache_dir=tmp_path / "cache") as model:
            seen.append((model.executor.details["optimized_model_from_cache"], model.run(x)[0]))
    assert [from_cache for from_cache, _ in seen] == [False, True]
    np.testing.assert_array_equal(seen[0][1], seen[1][1])
