"""Model conversion and quantization: one float model in, the artifacts each accelerator needs out, plus a
bundle manifest (``edgeaccel-bundle.yaml``) that ``edgeaccel.load`` reads, and the checks that prove each
artifact still gives the float model's answers.

One module per path; every converter is imported lazily, inside the functions that use it:

    sources.py          what was handed in (SavedModel, .keras/.h5, .onnx, .tflite), by content
    calibration.py      calibration samples from images / .npy / .npz, fitted to the model's inputs
    tf_source.py        TensorFlow model -> static-shaped SavedModel (TensorFlow: the `tensorflow` extra)
    tflite.py           -> TFLite float, dynamic-range, full-integer (int8/uint8/float I/O)
    tflite_to_onnx.py   float TFLite -> float ONNX (tf2onnx)
    onnx_quantize.py    float ONNX -> QDQ int8 ONNX (ONNX Runtime quantization, static, calibrated)
    float_islands.py    which nodes int8 would break (head, range-mismatched joins, --keep-float): kept float
    sensitivity.py      which quantized nodes cost too much at the outputs: kept float too
    onnx_dequantize.py  QDQ ONNX -> float ONNX (a float reference for a published int8 model)
    onnx_util.py        IR version the installed ONNX Runtime loads; save + checker
    openvino_ir.py      ONNX/TFLite -> OpenVINO IR (f32 weights unless asked)
    edgetpu.py          Edge TPU readiness report and compiler command line (never compiles)
    edgetpu_ops.py      the Edge TPU compiler's documented supported-operation list
    targets.py          the names --to takes
    pipeline.py         convert(): the order of the steps, the bundle and its manifest
    verify.py           check(): agreement, error, size and latency of each artifact against the reference

    from edgeaccel.convert import convert, check
    result = convert("model.keras", "tflite-int8,onnx-int8", "build/", calibration="images/")
    report = check("build/")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

_LAZY = {
    "convert": ("pipeline", "convert"),
    "check": ("verify", "check"),
    "readiness": ("edgetpu", "readiness"),
    "TARGETS": ("targets", "TARGETS"),
}

__all__ = ["TARGETS", "check", "convert", "readiness"]


def __getattr__(name: str):
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'edgeaccel.convert' has no attribute {name!r}") from None
    import importlib

    return getattr(importlib.import_module(f".{module_name}", __name__), attr)


if TYPE_CHECKING:
    from .verify import check
    from .edgetpu import readiness
    from .pipeline import convert
    from .targets import TARGETS
