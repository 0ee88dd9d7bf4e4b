"""Regressions found by tools/sweep_models.py: models unlike the shared ones that edgeaccel refused, or ran with
answers other than the raw runtime's. Each model is built here, small, and compared with the raw runtime."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel
from onnx_models import save

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _raw_ort(path, feed):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)


def _scalar_model(path):
    """x (dynamic length) and a scalar s -> sum(x * s), a scalar."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("ReduceSum", ["m"], ["y"], keepdims=0)]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
                        helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], {}, path)


@pytest.mark.parametrize("kwargs", [{"executor": "openvino"}, {"executor": "onnxruntime", "isolate": True},
                                    {"executor": "openvino", "isolate": True}])
def test_scalar_inputs_and_outputs_stay_scalars(tmp_path, kwargs):
    """np.ascontiguousarray makes a 0-d array 1-d: a scalar output came back from the isolated worker with
    shape (1,), and OpenVINO refused a scalar input of a model with dynamic inputs."""
    path = _scalar_model(tmp_path / "scalar.onnx")
    x, s = np.arange(5, dtype=np.float32), np.array(0.5, np.float32)
    (expected,) = _raw_ort(path, {"x": x, "s": s})
    with edgeaccel.load(path, **kwargs) as model:
        (got,) = model.run([x, s])
    assert got.shape == () and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6)
