"""`import edgeaccel` is cheap and imports no runtime (nor numpy)."""

import json
import subprocess
import sys

RUNTIMES = ("onnxruntime", "openvino", "ai_edge_litert", "tflite_runtime", "tensorflow", "numpy", "yaml")


def test_import_loads_no_runtime():
    code = (
        "import sys, json, edgeaccel; "
        f"print(json.dumps([m for m in {RUNTIMES!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_public_api_names_resolve():
    import edgeaccel

    for name in edgeaccel.__all__:
        assert getattr(edgeaccel, name) is not None
    assert issubclass(edgeaccel.ModelError, ValueError)
    assert issubclass(edgeaccel.InputError, ValueError)
