"""Small ONNX models built here, seeds for the ONNX fuzz campaign next to the shared MobileNet.

Each covers an operator family that the runtimes treat specially: a convolution stack with a dynamic spatial
size (runtime facts: ORT SIGFPE when H is smaller than a kernel), a lone strided MaxPool on a dynamic H, a QDQ conv
(quantized path), an MLP (MatMul/Gemm), shape arithmetic (Reshape/Gather/Concat/Slice) and an LSTM.
Built with ``ir_version=9``: onnxruntime 1.31 reads IR up to 13 and onnx 1.23 writes 14 by default.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

IR_VERSION = 9
OPSET = 17


def build_all(folder: Path) -> list[Path]:
    """Write every zoo model into ``folder``; return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, build in BUILDERS.items():
        path = folder / f"{name}.onnx"
        if not path.exists():
            _save(build(), path)
        paths.append(path)
    return paths


def _save(model, path: Path) -> None:
    import onnx

    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def _model(nodes, inputs, outputs, initializers=()):
    from onnx import helper

    graph = helper.make_graph(nodes, "zoo", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", OPSET)],
                             producer_name="edgeaccel.fuzzing.onnx_zoo")


def _const(name: str, array: np.ndarray):
    from onnx import numpy_helper

    return numpy_helper.from_array(array, name)


def conv_dynamic():
    """Conv 3x3 -> Relu -> MaxPool 3/2 -> GlobalAveragePool -> Flatten -> Gemm, on a dynamic H and W."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    inits = [_const("w", rng.standard_normal((8, 3, 3, 3)).astype(np.float32)),
             _const("b", rng.standard_normal(8).astype(np.float32)),
             _const("fc_w", rng.standard_normal((10, 8)).astype(np.float32)),
             _const("fc_b", rng.standard_normal(10).astype(np.float32))]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)


def maxpool_dynamic():
    """One MaxPool k=3 s=2 on a dynamic H: the runtime facts' SIGFPE at ORT_ENABLE_ALL with H=1."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "H", 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, "Ho", 3])])


def maxpool_nchwc():
    """MaxPool k=3 s=2 on 16 channels and a dynamic H: at ORT_ENABLE_ALL ORT rewrites it to its NCHWc kernel,
    which dies with SIGFPE when H=1 (measured with onnxruntime 1.31); ORT_ENABLE_EXTENDED returns cleanly."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, "H", 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, "Ho", 3])])


def qdq_conv():
    """uint8 in -> DequantizeLinear -> Conv -> QuantizeLinear -> uint8 out, the tf2onnx pattern."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s_in", "z_in"], ["xf"]),
        helper.make_node("DequantizeLinear", ["wq", "s_w", "z_w"], ["wf"]),
        helper.make_node("Conv", ["xf", "wf"], ["c"], kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node("QuantizeLinear", ["c", "s_out", "z_out"], ["y"]),
    ]
    inits = [_const("s_in", np.array(0.02, np.float32)), _const("z_in", np.array(128, np.uint8)),
             _const("wq", rng.integers(0, 255, (4, 3, 3, 3), dtype=np.uint8)),
             _const("s_w", np.array(0.01, np.float32)), _const("z_w", np.array(127, np.uint8)),
             _const("s_out", np.array(0.1, np.float32)), _const("z_out", np.array(0, np.uint8))]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 16, 16])],
                  [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 4, 7, 7])], inits)


def mlp():
    """MatMul -> Add -> Relu -> Gemm -> Softmax."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m"]),
        helper.make_node("Add", ["m", "b1"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["g"]),
        helper.make_node("Softmax", ["g"], ["y"], axis=-1),
    ]
    inits = [_const("w1", rng.standard_normal((16, 32)).astype(np.float32)),
             _const("b1", rng.standard_normal(32).astype(np.float32)),
             _const("w2", rng.standard_normal((32, 5)).astype(np.float32)),
             _const("b2", rng.standard_normal(5).astype(np.float32))]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], inits)


def shape_ops():
    """Reshape by a constant shape, Gather, Slice and Concat: the index arithmetic runtimes trust."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Gather", ["r", "idx"], ["g"], axis=1),
        helper.make_node("Slice", ["r", "starts", "ends", "axes"], ["s"]),
        helper.make_node("Concat", ["g", "s"], ["y"], axis=1),
    ]
    inits = [_const("shape", np.array([2, 12], np.int64)), _const("idx", np.array([0, 3, 11], np.int64)),
             _const("starts", np.array([1], np.int64)), _const("ends", np.array([5], np.int64)),
             _const("axes", np.array([1], np.int64))]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7])], inits)


def lstm():
    """One LSTM layer over a 5-step sequence."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(3)
    hidden, features = 6, 4
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "h"], hidden_size=hidden)]
    inits = [_const("W", rng.standard_normal((1, 4 * hidden, features)).astype(np.float32) * 0.3),
             _const("R", rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32) * 0.3),
             _const("B", np.zeros((1, 8 * hidden), np.float32))]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 1, features])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 1, 1, hidden]),
                   helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 1, hidden])], inits)


def data_dependent():
    """Operators whose output size comes from a constant's values: Expand, Tile, Pad, Resize, TopK,
    ConstantOfShape. A mutated value there asks a runtime for a huge or negative allocation."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Expand", ["x", "expand_to"], ["e"]),
        helper.make_node("Tile", ["e", "repeats"], ["t"]),
        helper.make_node("Pad", ["t", "pads"], ["p"], mode="constant"),
        helper.make_node("Resize", ["p", "", "scales"], ["r"], mode="nearest"),
        helper.make_node("ReduceMax", ["r"], ["m"], axes=[1], keepdims=0),
        helper.make_node("TopK", ["m", "k"], ["y", "i"], axis=-1),
        helper.make_node("ConstantOfShape", ["cshape"], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
        helper.make_node("Add", ["y", "c"], ["z"]),
    ]
    inits = [_const("expand_to", np.array([2, 1, 4], np.int64)), _const("repeats", np.array([1, 2, 1], np.int64)),
             _const("pads", np.array([0, 0, 1, 0, 0, 1], np.int64)),
             _const("scales", np.array([1.0, 2.0, 1.0], np.float32)),
             _const("k", np.array([3], np.int64)), _const("cshape", np.array([2, 3], np.int64))]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 4])],
                  [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3]),
                   helper.make_tensor_value_info("i", TensorProto.INT64, [2, 3])], inits)


BUILDERS = {
    "conv_dynamic": conv_dynamic,
    "maxpool_dynamic": maxpool_dynamic,
    "maxpool_nchwc": maxpool_nchwc,
    "qdq_conv": qdq_conv,
    "mlp": mlp,
    "shape_ops": shape_ops,
    "lstm": lstm,
    "data_dependent": data_dependent,
}
