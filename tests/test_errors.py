"""Every runtime exception type arrives as an edgeaccel error with a message and a hint. Validation is
bypassed here on purpose (executors are handed files it would refuse) to test the conversion itself."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from conftest import MODELS
from edgeaccel import formats
from edgeaccel.errors import EdgeAccelError, InferenceError, ModelLoadError, runtime_message
from edgeaccel.executors.base import ExecutorOptions
from tflite_edit import edit

pytestmark = pytest.mark.shared


def unchecked(source, path):
    """The description of ``source`` pointing at ``path``: how a runtime would see a file nobody checked."""
    return dataclasses.replace(formats.describe(source), path=path)


def test_non_utf8_tensor_names_are_load_errors_not_unicode_errors(tmp_path):
    def rename(model, schema):
        model.subgraphs[0].tensors[int(model.subgraphs[0].outputs[0])].name = b"out\xff\xfe"

    source = MODELS / "split_concat.tflite"
    path = edit(source, tmp_path / "names.tflite", rename)
    from edgeaccel.executors.litert import LiteRTExecutor
    from edgeaccel.executors.openvino import OpenVINOExecutor

    with pytest.raises(ModelLoadError, match="cannot describe its tensors") as err:
        LiteRTExecutor(unchecked(source, path), "CPU", ExecutorOptions())
    assert isinstance(err.value.__cause__, UnicodeDecodeError) and err.value.hint
    try:
        OpenVINOExecutor(unchecked(source, path), "CPU", ExecutorOptions()).close()
    except EdgeAccelError as exc:  # OpenVINO may replace the name instead of raising; either way no raw error
        assert exc.message


def test_onnx_runtime_exception_classes_are_converted(tmp_path):
    import onnx

    from edgeaccel.executors.onnxruntime import OnnxRuntimeExecutor
    from edgeaccel.fuzzing import onnx_zoo

    source = tmp_path / "mlp.onnx"
    onnx.save(onnx_zoo.mlp(), str(source))
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07\x12\xff\xff\xff" + bytes(range(256)))
    with pytest.raises(ModelLoadError, match="ONNX Runtime failed to load") as err:
        OnnxRuntimeExecutor(unchecked(source, garbage), "CPU", ExecutorOptions())
    assert type(err.value.__cause__).__name__ in ("InvalidProtobuf", "Fail") and err.value.hint

    bad_graph = onnx_zoo.mlp()
    bad_graph.graph.node[2].op_type = "NoSuchOp"
    onnx.save(bad_graph, str(tmp_path / "bad.onnx"))
    with pytest.raises(EdgeAccelError, match="NoSuchOp") as err:
        OnnxRuntimeExecutor(unchecked(source, tmp_path / "bad.onnx"), "CPU", ExecutorOptions())
    assert type(err.value.__cause__).__name__ in ("InvalidGraph", "Fail", "NotImplemented")

    executor = OnnxRuntimeExecutor(formats.describe(source), "CPU", ExecutorOptions())
    with pytest.raises(InferenceError, match="INVALID_ARGUMENT") as err:
        executor.run([np.zeros((2, 16), np.float64)])  # past the Model's dtype guard
    assert type(err.value.__cause__).__name__ == "InvalidArgument"
    executor.close()


def test_empty_runtime_messages_get_words():
    assert runtime_message(RuntimeError("")) == "builtins.RuntimeError with no message"

    class Unprintable(Exception):
        def __str__(self):
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad")

    assert "Unprintable" in runtime_message(Unprintable())


OUT_OF_MEMORY = """
import resource, sys
import numpy as np, edgeaccel
from ai_edge_litert.interpreter import Interpreter
import onnxruntime, openvino
size = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
limit = size + (24 << 20)  # what is mapped now, plus too little for the model
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    kwargs = {"executor": sys.argv[2]}
    with edgeaccel.load(sys.argv[1], strict=True, **kwargs) as m:
        m.run([np.zeros(s.shape, s.dtype) for s in m.inputs])
    print("loaded")
except edgeaccel.EdgeAccelError as e:
    print("edgeaccel", type(e).__name__, "|", repr(str(e)))
except BaseException as e:
    print("raw", type(e).__name__, e)
"""


@pytest.mark.parametrize("name, executor, says", [
    # LiteRT's words depend on which allocation failed (XNNPACK "failed to reshape", or nothing at all)
    ("deeplabv3_mnv2_dm05_pascal_quant.tflite", "litert", "LiteRT failed to load"),
    # (OpenVINO's answer, or the ONNX checker's before it: both std::bad_alloc; ONNX Runtime alone loads this
    # model within the headroom, so it has no case here)
    ("mobilenet_v2_1.0_224_quant.onnx", "openvino", "could not get memory"),
])
@pytest.mark.slow
def test_running_out_of_memory_at_load_is_an_edgeaccel_error(name, executor, says):
    out = subprocess.run([sys.executable, "-c", OUT_OF_MEMORY, str(MODELS / name), executor],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("edgeaccel"), line
    assert says in line
