"""TensorFlow -> TFLite: float, dynamic-range and full-integer post-training quantization.

- float: the graph as it is, float32 weights and math (the reference the others are checked against).
- dynamic: int8 weights, float activations (no calibration); about 4x smaller, CPU only.
- int8: int8 weights and activations, ranges measured on a representative dataset; builtin int8 kernels only
  (``TFLITE_BUILTINS_INT8``), so an op without one is an error rather than a silent float island, and the I/O
  type is int8 or uint8 (what the Edge TPU and integer-only NPUs take) or float (a QUANTIZE/DEQUANTIZE pair at
  the edges, for callers that feed float).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ConversionError
from .calibration import CalibrationSet
from .tf_source import StaticModel, import_tensorflow, no_interpreter_deprecation

MODES = ("float", "dynamic", "int8")
# tflite-int8 is integer-only (TFLITE_BUILTINS_INT8, what the Edge TPU and integer NPUs need): the converter
# has no float island to offer there (the QuantizationDebugger's denylisted nodes need float kernels, i.e.
# TFLITE_BUILTINS, which those accelerators cannot run). The note says so, since the ONNX targets do keep one.
FLOAT_ISLANDS_NOTE = ("; integer-only: no op kept float (the TFLite converter keeps an op float only with a float "
                      "kernel, which integer-only accelerators lack), so a detection head is quantized too: check its "
                      "detections, or use onnx-int8 / openvino-int8, which keep the head in float")
IO_TYPES = ("int8", "uint8", "float")

_UNSUPPORTED_OP = re.compile(r"'(tf\.\w+)' op is neither a custom op nor a flex op")
_NO_INT8_KERNEL = re.compile(r"[Qq]uantization not yet supported for op: '?(\w+)'?")
_FAILED_LEGALIZE = re.compile(r"failed to legalize operation '(\w+\.\w+)'")


def convert(model: StaticModel, mode: str, out: Path, calibration: CalibrationSet | None = None,
            io_type: str = "int8") -> Path:
    """Write ``out`` (a .tflite) from ``model``; raises ConversionError naming the op that cannot be converted."""
    if mode not in MODES:
        raise ConversionError(f"unknown TFLite mode {mode!r}; choose one of {', '.join(MODES)}")
    tf = import_tensorflow()
    converter = tf.lite.TFLiteConverter.from_saved_model(str(model.saved_model))
    if mode in ("dynamic", "int8"):
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if mode == "int8":
        if io_type not in IO_TYPES:
            raise ConversionError(f"unknown I/O type {io_type!r}; choose one of {', '.join(IO_TYPES)}")
        if calibration is None or not len(calibration):
            raise ConversionError("full-integer quantization (tflite-int8) needs calibration data",
                                  hint="pass --calibration with ~100 representative inputs (images or .npy)")
        converter.representative_dataset = _representative(calibration)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        io = {"int8": tf.int8, "uint8": tf.uint8, "float": tf.float32}[io_type]
        converter.inference_input_type = io
        converter.inference_output_type = io
    try:
        with no_interpreter_deprecation():
            data = converter.convert()
    except Exception as exc:  # ConverterError, RuntimeError from the calibrator, ValueError on bad datasets
        raise _conversion_error(exc, mode) from exc
    out.write_bytes(data)
    return out


def _representative(calibration: CalibrationSet):
    names = [s.name for s in calibration.specs]

    def dataset():
        # A dict keyed by signature input name: unambiguous when the model has several inputs.
        for sample in calibration.samples:
            yield dict(zip(names, sample, strict=True))

    return dataset


def _conversion_error(exc: Exception, mode: str) -> ConversionError:
    text = str(exc)
    ops = sorted(set(_UNSUPPORTED_OP.findall(text)))
    if ops:
        return ConversionError(
            f"TensorFlow Lite has no builtin kernel for {', '.join(ops)}",
            hint="replace that op in the model with ones TFLite has (see the TFLite op compatibility guide); "
            "Select TF ops would need the TensorFlow runtime on the device, which no edge executor here has")
    ops = sorted(set(_NO_INT8_KERNEL.findall(text)) | set(_FAILED_LEGALIZE.findall(text)))
    if ops and mode == "int8":
        return ConversionError(
            f"full-integer quantization failed: no int8 kernel for {', '.join(ops)}",
            hint="use --to tflite-dynamic (int8 weights, float math), or replace the op; "
            "integer-only accelerators cannot run it either")
    first = next((line.strip() for line in text.splitlines() if "error" in line.lower()), text.strip()[:500])
    return ConversionError(f"the TFLite converter failed ({mode}): {first}",
                           hint="run with --debug for TensorFlow's full message")
