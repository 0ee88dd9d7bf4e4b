"""What the user handed to ``edgeaccel convert``: a TensorFlow SavedModel folder, a Keras file (.keras zip or
legacy HDF5), an ONNX file or a TFLite file. Told apart by content, like every model edgeaccel reads."""

from __future__ import annotations

import enum
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import formats
from ..errors import ConversionError, UnsupportedFormatError
from ..modelinfo import Format, ModelInfo

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_ZIP_MAGIC = b"PK\x03\x04"


class SourceKind(str, enum.Enum):
    SAVEDMODEL = "savedmodel"
    KERAS = "keras"
    ONNX = "onnx"
    TFLITE = "tflite"

    @property
    def is_tensorflow(self) -> bool:
        return self in (SourceKind.SAVEDMODEL, SourceKind.KERAS)


@dataclass(frozen=True)
class Source:
    path: Path
    kind: SourceKind
    name: str  # stem for the artifacts' file names
    info: ModelInfo | None = None  # for ONNX and TFLite sources, described (and validated) by edgeaccel.formats


def identify(path: str | os.PathLike) -> Source:
    path = Path(path)
    if path.is_dir():
        if (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file():
            return Source(path, SourceKind.SAVEDMODEL, path.name or "model")
        raise ConversionError(f"{path} is a folder without saved_model.pb",
                              hint="pass a TensorFlow SavedModel folder, a .keras/.h5 file, an .onnx or a .tflite")
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except FileNotFoundError:
        raise ConversionError(f"model not found: {path}") from None
    except OSError as exc:
        raise ConversionError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if head.startswith(_HDF5_MAGIC):
        return Source(path, SourceKind.KERAS, path.stem)
    if head.startswith(_ZIP_MAGIC):
        if _is_keras_zip(path):
            return Source(path, SourceKind.KERAS, path.stem)
        raise ConversionError(f"{path.name} is a zip archive but not a Keras model (no config.json inside)",
                              hint="unpack it, or save the model with model.save('model.keras')")
    try:
        info = formats.describe(path)
    except UnsupportedFormatError as exc:
        raise ConversionError(f"cannot convert {path.name}: {exc.message}",
                              hint="convert reads a SavedModel folder, .keras/.h5, .onnx or .tflite") from exc
    if info.format is Format.ONNX:
        return Source(path, SourceKind.ONNX, path.stem, info)
    if info.format is Format.TFLITE:
        return Source(path, SourceKind.TFLITE, path.stem, info)
    if info.format is Format.EDGETPU_TFLITE:
        raise ConversionError(f"{path.name} is already compiled for the Edge TPU (one edgetpu-custom-op body)",
                              hint="convert its CPU twin, the .tflite before edgetpu_compiler")
    raise ConversionError(f"{path.name} is an OpenVINO IR, the end of a conversion, not a start",
                          hint="convert the model the IR was made from (ONNX, TFLite or TensorFlow)")


def _is_keras_zip(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            return "config.json" in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False
