"""The conversion tools import each converter when a conversion needs it, never when they are imported:
`edgeaccel convert --help` must not pay for TensorFlow (seconds, 1.3 GB), nor `edgeaccel run` for any of it."""

import json
import subprocess
import sys

HEAVY = ("tensorflow", "tf2onnx", "onnx", "onnxruntime", "openvino", "keras")


def test_importing_the_converters_loads_no_runtime():
    code = (
        "import sys, json; import edgeaccel.convert.pipeline, edgeaccel.convert.verify, edgeaccel.cli; "
        "edgeaccel.cli.build_parser(); "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
