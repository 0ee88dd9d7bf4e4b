"""No raw runtime log reaches a user of the Python API: LiteRT's XNNPACK INFO line and ONNX Runtime's [E:/[W:
lines stay off stderr, while edgeaccel's own messages (and anything else on fd 2) still get through."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import MODELS

pytestmark = pytest.mark.shared


@pytest.mark.slow
def test_loading_and_running_prints_no_runtime_log(tmp_path):
    code = f"""
import sys
import numpy as np, edgeaccel
m = edgeaccel.load({str(MODELS / 'mobilenet_v1_0.25_128_quant.tflite')!r}, selection=edgeaccel.SelectionOptions(calibrate=False), runtime=edgeaccel.RuntimeOptions(cache=False))
m.run(np.zeros((1, 128, 128, 3), np.uint8))
m = edgeaccel.load({str(MODELS / 'mobilenet_v2_1.0_224_quant.onnx')!r}, selection=edgeaccel.SelectionOptions(calibrate=False), runtime=edgeaccel.RuntimeOptions(cache=False))
m.run(np.zeros((1, 224, 224, 3), np.uint8))
print("still here", file=sys.stderr)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "XNNPACK" not in out.stderr and "[W:onnxruntime" not in out.stderr and "[E:onnxruntime" not in out.stderr
    assert out.stderr.strip() == "still here"


def test_other_native_output_during_the_first_interpreter_is_passed_on(capfd):
    import os

    from edgeaccel.native_log import filtered_native_stderr

    with filtered_native_stderr():
        os.write(2, b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\nsomething else\n")
    assert capfd.readouterr().err == "something else\n"
