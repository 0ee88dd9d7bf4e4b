"""Intermediate tensors of a model, captured on a real runtime: every activation the graph computes, read back
as float values (quantized ones dequantized with their own scale and zero point), with the graph around them.

One tap per runtime, each in its own module and imported only when asked for:

    taps_litert.py       LiteRT Interpreter(experimental_preserve_all_tensors=True), get_tensor per tensor
    taps_onnxruntime.py  ONNX Runtime with every intermediate value added as a graph output
    taps_openvino.py     OpenVINO with outputs added on the ops (model.add_outputs)

A tap describes the graph as ``TapTensor`` records in execution order: what produced each tensor, which
non-constant tensors that op read, and whether the op only re-encodes its input (quantize, dequantize,
fake-quantize): the compare step groups those with the value they carry. Constants (weights, biases, shape
tensors) are not activations and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError, UnsupportedModelError
from ..modelinfo import Format, ModelInfo, TensorSpec

# The runtime that reads each format best; a tap on another runtime is asked for by name.
DEFAULT_RUNTIME = {Format.TFLITE: "litert", Format.ONNX: "onnxruntime", Format.OPENVINO_IR: "openvino"}
# OpenVINO reads TFLite too, but its TFLite frontend keeps few tensor names and its FakeQuantize ops there
# give integers, not real values: a TFLite model is tapped on LiteRT only.
RUNTIME_FORMATS = {"litert": (Format.TFLITE,), "onnxruntime": (Format.ONNX,),
                   "openvino": (Format.OPENVINO_IR, Format.ONNX)}


@dataclass(frozen=True)
class TapTensor:
    id: str  # how the runtime reads it back: unique within the graph
    name: str | None  # the tensor's name in the model; None where the runtime gives it none
    op_type: str  # the op that produced it, "input" for a graph input
    shape: tuple[int, ...]
    inputs: tuple[str, ...] = ()  # ids of the non-constant tensors that op read
    passthrough: bool = False  # a quantize/dequantize/fake-quantize op made it: its input's value, re-encoded
    readable: bool = True  # float, or integer with quantization parameters: a real value comes back


@dataclass
class Tap:
    """A model opened for capture. ``run`` returns {tensor id: float32 array} for every readable tensor."""

    runtime: str
    info: ModelInfo
    tensors: list[TapTensor] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.info.inputs

    def run(self, feeds: list[np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Tap:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def runtime_for(info: ModelInfo, asked: str | None) -> str:
    """The runtime a tap of ``info`` runs on: ``asked`` if it reads the format, else the format's own."""
    if info.format is Format.EDGETPU_TFLITE:
        raise UnsupportedModelError(f"{info.path.name} is compiled for the Edge TPU: its body is one custom op, "
                                    f"so no intermediate tensor can be read",
                                    hint="compare the CPU model it was compiled from (the .tflite without _edgetpu)")
    if asked is not None and asked not in RUNTIME_FORMATS:
        raise ModelError(f"no per-layer capture for executor {asked!r}",
                         hint=f"choose one of {', '.join(sorted(RUNTIME_FORMATS))}")
    if asked is not None and info.format in RUNTIME_FORMATS[asked]:
        return asked
    if info.format not in DEFAULT_RUNTIME:
        raise UnsupportedModelError(f"{info.path.name} is a {info.format.value} model; per-layer capture reads "
                                    f".tflite, .onnx and OpenVINO IR", hint="convert it first (edgeaccel convert)")
    return DEFAULT_RUNTIME[info.format]


def dequantize(values: np.ndarray, scales, zero_points, axis: int) -> np.ndarray:
    """integer -> real with per-tensor or per-axis parameters (LiteRT's quantization_parameters layout)."""
    scales = np.asarray(scales, np.float32)
    zeros = np.asarray(zero_points, np.float32)
    if scales.size > 1 and values.ndim:
        shape = [1] * values.ndim
        shape[axis] = -1
        scales, zeros = scales.reshape(shape), zeros.reshape(shape)
    return (values.astype(np.float32) - zeros) * scales


def as_float(values) -> np.ndarray | None:
    """A captured value as float32, or None when it carries no real number (strings, bools, indices)."""
    array = np.asarray(values)
    if array.dtype.kind != "f":
        return None
    return array.astype(np.float32, copy=False)
