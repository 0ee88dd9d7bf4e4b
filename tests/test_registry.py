"""The registry: built-in executor classes own their runtime's facts; plug-ins arrive through entry points,
shaped like built-ins, and a broken one is reported without breaking edgeaccel."""

from __future__ import annotations

import pytest

from edgeaccel.executors import registry
from edgeaccel.executors.device import DeviceRef
from edgeaccel.modelinfo import Format


def test_builtin_classes_say_formats_devices_how_and_extra():
    found = registry.runtimes()
    assert {"litert", "onnxruntime", "openvino", "tensorflow"} <= set(found)
    ort = found["onnxruntime"]
    assert ort.target("CUDA").provider == "CUDAExecutionProvider" and ort.kind_of("TensorRT:1") == "gpu"
    assert ort.install_hint("CUDA").startswith("pip install 'edgeaccel[gpu]'")
    assert ort.install_hint() == "pip install 'edgeaccel[onnx]'"  # the CPU build, as before
    assert found["openvino"].target("NPU").device_name == "NPU"
    assert found["openvino"].default_precision("NPU") == "f16"  # the NPU plugin refuses an f32 hint
    edgetpu = found["litert"].target("EdgeTPU:usb:0")
    assert edgetpu.delegate == "libedgetpu.so.1" and not edgetpu.planned
    assert found["litert"].device_kinds["EdgeTPU"] == "edgetpu"
    # planned devices are described but not offered to the selector: LiteRT's NPU accelerator
    assert found["litert"].target("NPU").planned and "NPU" not in found["litert"].devices
    assert found["litert"].reads(Format.EDGETPU_TFLITE, "EdgeTPU")
    assert not found["litert"].reads(Format.TFLITE, "EdgeTPU")
    assert found["openvino"].is_native(Format.OPENVINO_IR) and not found["openvino"].is_native(Format.TFLITE)


@pytest.mark.parametrize("text, base, index, bus", [
    ("CPU", "CPU", None, None), ("CUDA:1", "CUDA", 1, None), ("GPU.0", "GPU", 0, None),
    ("TensorRT:0", "TensorRT", 0, None), ("EdgeTPU:usb:0", "EdgeTPU", 0, "usb"), ("EdgeTPU:pci", "EdgeTPU", None, "pci"),
    ("Hailo8", "Hailo8", None, None),
])
def test_device_references_are_parsed_once(text, base, index, bus):
    ref = DeviceRef.parse(text)
    assert (ref.base, ref.index, ref.bus, str(ref)) == (base, index, bus, text)


@pytest.mark.parametrize("text", ["", "CUDA:x", "GPU.1.2", "EdgeTPU:usb:0:1", ":0"])
def test_a_malformed_device_reference_says_the_forms(text):
    with pytest.raises(ValueError, match="device|index"):
        DeviceRef.parse(text)


def test_no_runtime_names_outside_executors():
    """The selector, the probe and the scheduler name no runtime: what they know of one comes from its class.
    (That hardware/ never imports executors/ is in edgeaccel/_layers.py, checked by tests/test_layers.py, which
    also sees function-level and string imports.)"""
    import ast
    from pathlib import Path

    import edgeaccel

    root = Path(edgeaccel.__file__).parent
    names = ("litert", "onnxruntime", "openvino", "tensorflow", "LiteRT", "ONNX Runtime", "OpenVINO")
    for path in [root / "selection" / "selector.py", *(root / "hardware").glob("*.py"),
                 *(root / "scheduling").glob("*.py")]:
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef,
                ast.FunctionDef)) and n.body and isinstance(n.body[0], ast.Expr)}
        code = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                and id(n) not in docs]
        for text in code:
            assert not any(name in text.split() or text == name for name in names), f"{path.name}: {text!r}"
