"""Run-time guards: dynamic dimensions that crash ONNX Runtime, dtype, and check_finite on every executor
(in process and isolated)."""

from __future__ import annotations

import signal
import subprocess
import sys

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS
from edgeaccel.errors import InputDTypeError, InputShapeError, InputValueError, OutputValueError
from edgeaccel.fuzzing import onnx_zoo
from tflite_edit import float_fc

pytestmark = pytest.mark.shared


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zoo")
    onnx_zoo.build_all(folder)
    return folder


RAW_ORT = """
import sys, numpy as np, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
s.run(None, {"x": np.ones((1, 16, 1, 8), np.float32)})
"""

EDGEACCEL = """
import sys, numpy as np, edgeaccel
with edgeaccel.load(sys.argv[1]) as model:
    print(model.executor.details["graph_optimization"], flush=True)
    for h in (1, 2, 3, 4, 9):
        try:
            out = model.run(np.ones((1, 16, h, 8), np.float32))[0]
            print(h, "ok", out.shape, flush=True)
        except edgeaccel.EdgeAccelError as exc:
            print(h, "error", type(exc).__name__, flush=True)
"""


@pytest.mark.slow
def test_small_dynamic_dim_that_kills_ort_is_safe_through_edgeaccel(zoo):
    """runtime facts: ORT_ENABLE_ALL + a dynamic spatial dim smaller than the kernel -> SIGFPE. Both halves run in
    child processes: the raw runtime dies, edgeaccel's default path answers every size (ORT_ENABLE_ALL, as a
    plain session, for the sizes shape inference proves safe; an ORT_ENABLE_EXTENDED session for the others)."""
    path = zoo / "maxpool_nchwc.onnx"
    raw = subprocess.run([sys.executable, "-c", RAW_ORT, str(path)], capture_output=True, timeout=120)
    assert raw.returncode == -signal.SIGFPE, "raw ORT no longer dies here: docs/runtime-facts.md needs an update"
    ours = subprocess.run([sys.executable, "-c", EDGEACCEL, str(path)], capture_output=True, text=True, timeout=120)
    assert ours.returncode == 0, ours.stderr[-2000:]
    lines = ours.stdout.splitlines()
    assert lines[0] == "ORT_ENABLE_ALL"
    assert [line.split()[0] for line in lines[1:]] == ["1", "2", "3", "4", "9"]
    assert lines[-1].startswith("9 ok (1, 16, 4, 3)")


def test_zero_sized_dynamic_dim_is_refused_before_the_runtime(zoo):
    with edgeaccel.load(zoo / "conv_dynamic.onnx") as model:
        with pytest.raises(InputShapeError, match="at least 1"):
            model.run(np.ones((1, 3, 0, 8), np.float32))
        with pytest.raises(InputShapeError):
            model.run(np.ones((1, 3, 8), np.float32))  # rank differs
        assert model.run(np.ones((1, 3, 8, 8), np.float32))[0].shape == (1, 10)


def _float_models(zoo, tmp_path):
    fc = float_fc(tmp_path / "fc.tflite")
    return {
        "litert": (fc, {}, (1, 4)),
        "onnxruntime": (zoo / "mlp.onnx", {}, (2, 16)),
        "openvino": (zoo / "mlp.onnx", {"executor": "openvino"}, (2, 16)),
        "openvino-tflite": (fc, {"executor": "openvino"}, (1, 4)),
    }


@pytest.mark.slow
@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
@pytest.mark.parametrize("case", ["litert", "onnxruntime", "openvino", "openvino-tflite"])
def test_check_finite_on_every_executor(case, isolate, zoo, tmp_path):
    path, kwargs, shape = _float_models(zoo, tmp_path)[case]
    with edgeaccel.load(path, strict=True, isolate=isolate, **kwargs) as model:
        assert model.executor.runtime == case.split("-")[0]
        good = np.ones(shape, np.float32)
        assert np.isfinite(model.run(good, check_finite=True)[0]).all()
        for bad in (np.nan, np.inf, -np.inf):
            x = good.copy()
            x[0, 1] = bad
            with pytest.raises(InputValueError, match="NaN or Inf"):
                model.run(x, check_finite=True)
            model.run(x)  # without the check the runtime answers, as runtime facts says
        huge = np.full(shape, 3e38, np.float32)  # finite input, overflowing output
        assert not np.isfinite(model.run(huge)[0]).all()
        with pytest.raises(OutputValueError, match="NaN or Inf"):
            model.run(huge, check_finite=True)


@pytest.mark.parametrize("name, kwargs", [
    ("mobilenet_v1_0.25_128_quant.tflite", {}),
    ("mobilenet_v1_0.25_128_quant.tflite", {"executor": "openvino"}),
    ("mobilenet_v2_1.0_224_quant.onnx", {}),
    ("openvino/mobilenet_v2_1.0_224_quant.xml", {}),
])
def test_wrong_dtype_is_refused_on_every_executor(name, kwargs):
    with edgeaccel.load(MODELS / name, **kwargs) as model:
        shape = model.inputs[0].shape
        for dtype in (np.float32, np.float64, np.int8, np.uint16):
            with pytest.raises(InputDTypeError, match="expects uint8"):
                model.run(np.zeros(shape, dtype))


RAW_ORT_STATIC = """
import sys, numpy as np, onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])  # default: ORT_ENABLE_ALL
s.run(None, {"x": np.ones((1, 16, 1, 8), np.float32)})
"""


def test_static_window_larger_than_its_input_is_refused(tmp_path):
    """The same crash without any dynamic dimension: a static H=1 under a 3x3 MaxPool. ORT at its default
    level dies with SIGFPE (checked in a child process); shape inference sees the empty output first."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, None, 3])])
    model = helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)  # valid as far as the checker knows
    path = tmp_path / "pool.onnx"
    onnx.save(model, str(path))
    raw = subprocess.run([sys.executable, "-c", RAW_ORT_STATIC, str(path)], capture_output=True, timeout=120)
    assert raw.returncode == -signal.SIGFPE
    with pytest.raises(edgeaccel.ModelValidationError, match="window larger than its input"):
        edgeaccel.load(path)


RAW_OPENVINO = """
import sys, numpy as np, openvino as ov
core = ov.Core()
compiled = core.compile_model(core.read_model(sys.argv[1]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
request = compiled.create_infer_request()
request.infer([np.zeros(compiled.inputs[0].shape, np.uint8)])
"""


@pytest.mark.slow
def test_an_index_computed_out_of_range_is_not_handed_to_a_fallback(tmp_path):
    """Fuzz seeds 92/93: a constant that movenet packs into its GATHER_ND indices, set to INT32_MAX. Validation
    cannot see the computed index. LiteRT fails cleanly at run(); OpenVINO, the run-time fallback, segfaults on
    the same input (checked in a child process). The error is the model's, so no fallback happens."""
    import numpy as np

    from tflite_edit import edit

    def corrupt(model, schema):
        tensor = next(t for t in model.subgraphs[0].tensors if t.name == b"Reshape_3")
        model.buffers[tensor.buffer].data = np.frombuffer(np.array([2**31 - 1], np.int32).tobytes(), np.uint8)

    path = edit(MODELS / "movenet_single_pose_lightning_ptq.tflite", tmp_path / "m.tflite", corrupt)
    raw = subprocess.run([sys.executable, "-c", RAW_OPENVINO, str(path)], capture_output=True, timeout=120)
    assert raw.returncode == -signal.SIGSEGV
    with edgeaccel.load(path) as model:
        with pytest.raises(edgeaccel.ModelValidationError, match="index out of range"):
            model.run(np.zeros(model.inputs[0].shape, np.uint8))
        assert model.fallbacks == () and model.executor.runtime == "litert"
