"""Small ONNX models the tests build (IR 9: onnxruntime 1.31 reads IR <= 13, onnx 1.23 writes 14)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def save(graph_nodes, inputs, outputs, initializers, path: Path, opset: int = 17) -> Path:
    import onnx
    from onnx import helper, numpy_helper

    graph = helper.make_graph(graph_nodes, path.stem, inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def bf16_trap(path: Path, n: int = 64, seed: int = 0) -> Path:
    """y = x @ (A + D) - x @ A with |A| ~ 1000 and |D| ~ 1: bf16 weights lose D entirely, f32 keeps it.
    The float model whose answers OpenVINO's bf16 default destroys (runtime facts), built on purpose."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    big = (rng.standard_normal((n, 10)) * 1000).astype(np.float32)
    small = rng.standard_normal((n, 10)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "A"], ["h"]), helper.make_node("MatMul", ["x", "B"], ["k"]),
             helper.make_node("Sub", ["k", "h"], ["y"])]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], {"A": big, "B": big + small}, path)


def small_conv(path: Path, seed: int = 0, dynamic: bool = False) -> Path:
    """x (1,3,H,W) float -> Conv 3x3 (8 channels) -> Relu -> GlobalAveragePool -> Flatten: a tiny image model."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    weight = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.5
    bias = rng.standard_normal(8).astype(np.float32) * 0.1
    hw = ["h", "w"] if dynamic else [16, 16]
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["y"])]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, *hw])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], {"W": weight, "b": bias}, path)
