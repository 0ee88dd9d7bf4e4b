"""The artifacts ``edgeaccel convert --to`` can make, what each needs, and its file name in the bundle."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConversionError
from .sources import SourceKind


@dataclass(frozen=True)
class Target:
    name: str
    suffix: str  # file name after the model's name: f"{name}{suffix}"
    needs_calibration: bool
    sources: frozenset[SourceKind]  # what it can be made from
    what: str  # one line for --help and the bundle note

    def filename(self, model_name: str) -> str:
        return f"{model_name}{self.suffix}"


_TF = frozenset({SourceKind.SAVEDMODEL, SourceKind.KERAS})
_ANY = frozenset(SourceKind)

TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("tflite-float", "_float.tflite", False, _TF, "TFLite, float32 weights and math"),
    Target("tflite-dynamic", "_dynamic.tflite", False, _TF,
           "TFLite, dynamic-range quantization: int8 weights, float activations"),
    Target("tflite-int8", "_int8.tflite", True, _TF,
           "TFLite, full-integer post-training quantization (int8 weights and activations)"),
    Target("onnx-float", "_float.onnx", False, _ANY, "ONNX, float32"),
    Target("onnx-int8", "_int8.onnx", True, _ANY,
           "ONNX, static QDQ quantization by ONNX Runtime (int8 per-channel weights, uint8 activations)"),
    Target("openvino", "_float.xml", False, _ANY, "OpenVINO IR of the reference model, weights kept as they are"),
    Target("openvino-int8", "_int8.xml", True, _ANY, "OpenVINO IR from the int8 QDQ ONNX model (int8 weights)"),
    # built on this machine's NVIDIA GPU, for it alone (an engine runs only on its GPU and TensorRT version)
    Target("tensorrt-f16", "_f16.engine", False, _ANY, "TensorRT engine of the float ONNX model, f16 enabled"),
    Target("tensorrt-int8", "_int8.engine", True, _ANY, "TensorRT engine of the int8 QDQ ONNX model"),
)}
TENSORRT_TARGETS = ("tensorrt-f16", "tensorrt-int8")
INT8_ONNX_TARGETS = ("onnx-int8", "openvino-int8", "tensorrt-int8")  # made from the one QDQ int8 ONNX model


def parse(spec: str | list[str]) -> list[Target]:
    """'tflite-int8,onnx-int8' (or a list of such strings) -> Targets, in the order given, without repeats."""
    names = [n.strip() for part in ([spec] if isinstance(spec, str) else spec) for n in part.split(",") if n.strip()]
    if not names:
        raise ConversionError("no target given", hint=f"--to takes a comma-separated list of: {', '.join(TARGETS)}")
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        raise ConversionError(f"unknown target {unknown[0]!r}", hint=f"choose from: {', '.join(TARGETS)}")
    return [TARGETS[n] for n in dict.fromkeys(names)]
