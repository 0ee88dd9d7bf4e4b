"""What a model is, as read from its bytes: format, tensors, quantization, operators.

These are plain frozen dataclasses with no runtime behind them, so the selector can reason about a model
without loading it anywhere.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


class Format(str, enum.Enum):
    TFLITE = "tflite"
    EDGETPU_TFLITE = "edgetpu-tflite"  # a TFLite file whose body is an edgetpu-custom-op
    ONNX = "onnx"
    OPENVINO_IR = "openvino-ir"
    SAVEDMODEL = "savedmodel"
    TENSORRT_ENGINE = "tensorrt-engine"  # a serialized TensorRT engine (.engine / .plan), bound to GPU and version

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Quantization:
    """Affine quantization: real = scale * (q - zero_point). Per-tensor when ``axis`` is None."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None = None

    @property
    def per_tensor(self) -> bool:
        return self.axis is None and len(self.scale) == 1

    def __str__(self) -> str:
        if self.per_tensor:
            return f"scale={self.scale[0]:.6g} zero_point={self.zero_point[0]}"
        return f"per-axis({self.axis}) x{len(self.scale)}"


@dataclass(frozen=True)
class TensorSpec:
    """One model input or output. A ``None`` dimension is dynamic; ``unranked``: the model declares no shape at
    all (an ONNX graph input or output without one), so any rank is accepted and ``shape`` is ()."""

    name: str
    shape: tuple[int | None, ...]
    dtype: np.dtype
    quantization: Quantization | None = None
    unranked: bool = False

    @property
    def is_dynamic(self) -> bool:
        return self.unranked or any(d is None for d in self.shape)

    def __str__(self) -> str:
        dims = "any shape" if self.unranked else "x".join("?" if d is None else str(d) for d in self.shape) or "scalar"
        q = f" ({self.quantization})" if self.quantization else ""
        return f"{self.name}: {self.dtype} {dims}{q}"


@dataclass(frozen=True)
class ModelInfo:
    """A model as described by its own file. ``path`` is the main file (the .xml for OpenVINO IR)."""

    path: Path
    format: Format
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    operators: tuple[str, ...] = ()  # distinct operator names, sorted
    custom_ops: tuple[str, ...] = ()
    size_bytes: int = 0
    digest: str = ""  # BLAKE2b-256 of the file's bytes, and of its weights files (formats.with_companions)
    extra_files: tuple[Path, ...] = ()  # weights (.bin), ONNX external data
    details: dict = field(default_factory=dict, compare=False)  # format-specific facts (opset, producer, ...)

    def to_dict(self) -> dict:
        """JSON-ready; ``from_dict`` restores it (the validation memo keeps descriptions this way)."""
        return {"path": str(self.path), "format": self.format.value,
                "inputs": [_spec_dict(t) for t in self.inputs], "outputs": [_spec_dict(t) for t in self.outputs],
                "operators": list(self.operators), "custom_ops": list(self.custom_ops),
                "size_bytes": self.size_bytes, "digest": self.digest,
                "extra_files": [str(p) for p in self.extra_files], "details": self.details}

    @classmethod
    def from_dict(cls, data: dict) -> ModelInfo:
        return cls(Path(data["path"]), Format(data["format"]), tuple(_spec(t) for t in data["inputs"]),
                   tuple(_spec(t) for t in data["outputs"]), tuple(data["operators"]), tuple(data["custom_ops"]),
                   int(data["size_bytes"]), data["digest"], tuple(Path(p) for p in data["extra_files"]),
                   dict(data["details"]))

    @property
    def quantized(self) -> bool:
        """True when the model's tensors carry integer quantization (its I/O or its body)."""
        return bool(self.details.get("quantized")) or any(t.quantization for t in (*self.inputs, *self.outputs))

    @property
    def is_dynamic(self) -> bool:
        return any(t.is_dynamic for t in self.inputs)

    @property
    def needs_edgetpu(self) -> bool:
        return self.format is Format.EDGETPU_TFLITE


def _spec_dict(t: TensorSpec) -> dict:
    q = t.quantization
    return {"name": t.name, "shape": list(t.shape), "dtype": str(t.dtype), "unranked": t.unranked,
            "quantization": None if q is None else {"scale": list(q.scale), "zero_point": list(q.zero_point),
                                                    "axis": q.axis}}


def _spec(d: dict) -> TensorSpec:
    q = d["quantization"]
    quant = None if q is None else Quantization(tuple(q["scale"]), tuple(q["zero_point"]), q["axis"])
    return TensorSpec(d["name"], tuple(d["shape"]), np.dtype(d["dtype"]), quant, bool(d.get("unranked", False)))
