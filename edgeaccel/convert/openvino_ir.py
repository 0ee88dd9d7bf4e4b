"""ONNX or TFLite -> OpenVINO IR (.xml + .bin) with ``openvino.convert_model`` and ``openvino.save_model``.

Weights are kept at their own precision (``compress_to_fp16=False``): save_model's default halves float
weights to f16, which changes answers the way bf16 inference does (runtime facts); f16 is an opt-in. An IR made
from a QDQ int8 ONNX keeps int8 weights (OpenVINO turns each QDQ pair into a FakeQuantize).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ConversionError, RuntimeNotInstalledError, runtime_message

_NO_TRANSLATOR = re.compile(r"No translator found for (\S+) node")
_NO_CONVERSION_RULE = re.compile(r"No conversion rule found for operations?: ([^\n]+)")


def convert(src: Path, out_xml: Path, *, compress_to_fp16: bool = False) -> Path:
    try:
        import openvino as ov
    except ImportError as exc:
        raise RuntimeNotInstalledError(f"converting to OpenVINO IR needs openvino ({exc})",
                                       hint="pip install 'edgeaccel[openvino]'") from exc
    try:
        model = ov.convert_model(str(src))
    except Exception as exc:  # OpConversionFailure, GeneralFailure, RuntimeError
        message = runtime_message(exc)
        ops = sorted(set(_NO_TRANSLATOR.findall(message))
                     | {op.strip() for found in _NO_CONVERSION_RULE.findall(message) for op in found.split(",")})
        if ops:
            raise ConversionError(f"OpenVINO cannot convert {src.name}: no conversion for op {', '.join(ops)}",
                                  hint="replace the op with standard ones, or deploy this model with another "
                                  "runtime (ONNX Runtime, LiteRT)") from exc
        # OpenVINO's first line is a source location ("Check 'false' failed at ..."); the last says what failed
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        raise ConversionError(f"OpenVINO cannot convert {src.name}: {lines[-1] if lines else message}",
                              hint="run with --debug for OpenVINO's full message") from exc
    try:
        ov.save_model(model, str(out_xml), compress_to_fp16=compress_to_fp16)
    except Exception as exc:
        raise ConversionError(f"OpenVINO could not save {out_xml}: {runtime_message(exc)}") from exc
    return out_xml


def bin_path(xml: Path) -> Path:
    return xml.with_suffix(".bin")
