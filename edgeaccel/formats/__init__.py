"""Model formats: detected from the bytes (never the file name), validated, described as ModelInfo.

``describe(path)`` is the one entry point. It refuses a broken file with a ModelError before any runtime
sees it, because every runtime we measured can crash its host process on one (docs/runtime-facts.md).
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import threading
from pathlib import Path
from typing import Protocol

from ..digest import digest as content_digest
from ..errors import EdgeAccelError, ModelValidationError, UnsupportedFormatError
from ..modelinfo import Format, ModelInfo
from . import tflite, tflite_checks


class ModelNotFoundError(UnsupportedFormatError, FileNotFoundError):
    """The model path does not exist. Still an UnsupportedFormatError for callers that caught that before; also a
    FileNotFoundError, which is what a missing file is."""


# The ONNX, OpenVINO IR and TensorRT engine readers (and the XML parser) are imported when a file is not TFLite:
# `edgeaccel run model.tflite` does not pay for them in peak memory (tests/test_run_lean.py holds it to that).

__all__ = ["describe", "detect_format", "Format"]

_HEAD = 4096


def detect_format(path: str | os.PathLike) -> Format:
    """The format of the model at ``path``, from its content. Raises UnsupportedFormatError with what it saw."""
    path = Path(path)
    if path.is_dir():
        if (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file():
            return Format.SAVEDMODEL
        raise UnsupportedFormatError(
            f"{path} is a folder without saved_model.pb",
            hint="pass a model file (.tflite, .onnx, an OpenVINO .xml, a TensorRT .engine) or a TensorFlow SavedModel "
            "folder",
        )
    with _open(path) as buf:
        return _sniff(path, buf)


class ValidationMemo(Protocol):
    """Remembers the description of models that passed validation, by content hash, so that loading the
    same bytes again skips parsing and checking them (the ONNX full checker alone costs ~0.1 s). The hash
    covers every byte of the model file and of an IR's .bin, so no other file can pass as one remembered."""

    def recall(self, digest: str, path: Path) -> ModelInfo | None: ...

    def remember(self, info: ModelInfo) -> None: ...


def describe(path: str | os.PathLike, memo: ValidationMemo | None = None) -> ModelInfo:
    """Read, validate and describe the model at ``path``."""
    path = Path(path)
    fmt = detect_format(path)
    if fmt is Format.SAVEDMODEL:
        return ModelInfo(path=path, format=fmt, inputs=(), outputs=(), details={"note": "read by TensorFlow"})
    with _open(path) as buf:
        digest = content_digest(buf)
        if fmt is Format.OPENVINO_IR:  # its weights are in the .bin: an IR's .xml is the same for every weight set
            digest = with_companions(digest, [path.with_suffix(".bin")])
        known = memo.recall(digest, path) if memo else None
        if known is not None:
            return known
        if fmt in (Format.TFLITE, Format.EDGETPU_TFLITE):
            info = _describe_tflite(path, buf, digest)
        elif fmt is Format.ONNX:
            info = _describe_onnx(path, buf, digest)
            if info.extra_files:  # external data: known once the model is read
                info = dataclasses.replace(info, digest=with_companions(digest, info.extra_files))
        elif fmt is Format.TENSORRT_ENGINE:
            from . import tensorrt

            info = tensorrt.describe(path, buf, digest)
        else:
            info = _describe_ir(path, buf, digest)
    if memo:
        memo.remember(info)
    return info


def with_companions(digest: str, files) -> str:
    """A model's digest that covers the files it reads its weights from (an IR's .bin, ONNX external data), which
    every cache keyed by the digest (measurements, calibration, compiled models, the validation memo) must tell
    apart: two fine-tuned exports of one network have the same .xml and different .bin. The files' bytes are
    hashed (~600 MB/s); one that is missing adds nothing (validation says it is missing)."""
    from ..digest import blake2b

    h = blake2b(digest.encode(), digest_size=32)
    for extra in files:
        try:
            h.update(_file_digest(Path(extra)).encode())
        except (OSError, EdgeAccelError):  # missing, unreadable, empty: validation reports it
            continue
    return h.hexdigest()


_FILE_DIGESTS: dict[tuple, str] = {}  # (device, inode, size, mtime_ns, ctime_ns) -> digest, for this process
_FILE_DIGESTS_MAX = 64
_FILE_DIGESTS_LOCK = threading.Lock()


def _file_digest(path: Path) -> str:
    """A weights file's digest, hashed once a process while the file is unchanged: a load that describes its
    model more than once (a reference and its artifacts, Ray's shipping) pays ~1.7 s a GB once. ctime changes
    with any write, and a copy made with its times kept has another inode."""
    st = path.stat()
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _FILE_DIGESTS_LOCK:
        known = _FILE_DIGESTS.get(key)
    if known is None:
        with _open(path) as data:
            known = content_digest(data)
        with _FILE_DIGESTS_LOCK:
            if len(_FILE_DIGESTS) >= _FILE_DIGESTS_MAX:
                _FILE_DIGESTS.pop(next(iter(_FILE_DIGESTS)))
            _FILE_DIGESTS[key] = known
    return known


class _open:
    """Map a model file read-only (no copy of a large file); empty files get a clear error."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self):
        try:
            self._file = open(self.path, "rb")
        except FileNotFoundError:
            raise ModelNotFoundError(f"model file not found: {self.path}",
                                     hint="check the path (a relative path starts from the current folder)") from None
        except IsADirectoryError:
            raise UnsupportedFormatError(f"{self.path} is a folder, not a model file") from None
        except OSError as exc:
            raise UnsupportedFormatError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        size = os.fstat(self._file.fileno()).st_size
        if size == 0:
            self._file.close()
            raise UnsupportedFormatError(f"{self.path} is empty (0 bytes)", hint="the download or copy failed")
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        return self._map

    def __exit__(self, *exc) -> None:
        try:
            self._map.close()
        except BufferError:
            # A validation error's traceback can still hold numpy views of the map; it is unmapped when they go.
            pass
        self._file.close()


def _sniff(path: Path, buf) -> Format:
    head = bytes(buf[:_HEAD])
    if tflite.looks_like_tflite(head):
        # The Edge TPU compiler renames nothing: its body is one custom op whose name is in the file.
        return Format.EDGETPU_TFLITE if buf.find(tflite.EDGETPU_CUSTOM_OP.encode()) >= 0 else Format.TFLITE
    from . import onnx as onnx_format, openvino_ir, tensorrt

    if openvino_ir.looks_like_ir(head):
        return Format.OPENVINO_IR
    if onnx_format.looks_like_onnx(buf):
        return Format.ONNX
    if tensorrt.looks_like_engine(buf):
        return Format.TENSORRT_ENGINE
    cut = _truncated_onnx(buf)
    if cut:
        raise ModelValidationError(f"{path.name} is a truncated ONNX model: {cut}",
                                   hint="the download or copy was cut short; fetch or export the model again")
    if path.suffix.lower() in tensorrt.NAMES:  # named like an engine, and not one: say so, not "not a model"
        raise ModelValidationError(f"{path.name} is named like a TensorRT engine but is not one "
                                   f"({tensorrt.not_an_engine(buf)})", hint=tensorrt.REBUILD_HINT)
    raise UnsupportedFormatError(
        f"{path.name} is not a TFLite, ONNX, OpenVINO IR model or TensorRT engine ({_what_it_looks_like(head)})",
        hint="edgeaccel reads the format from the file's content, not its name; check that the file is a model",
    )


def _truncated_onnx(buf) -> str | None:
    """What ran past the end, when the bytes start as an ONNX ModelProto (ir_version first, as every exporter
    writes it, then only ModelProto fields) and stop inside a field; None otherwise."""
    from . import protobuf as pb

    seen = []
    try:
        for number, wire, value in pb.fields(buf):
            seen.append((number, wire, value))
            if len(seen) >= 4:
                break
        return None
    except pb.ProtobufError as exc:
        first = seen[0] if seen else None
        if first is None or first[:2] != (1, pb.VARINT) or not 1 <= first[2] <= 64:
            return None
        if any(n not in range(1, 21) for n, _, _ in seen):
            return None
        return str(exc)


def _what_it_looks_like(head: bytes) -> str:
    sample = head[:64]
    if sample.startswith(b"\x89PNG") or sample.startswith(b"\xff\xd8\xff"):
        return "it is an image"
    if sample.startswith(b"PK\x03\x04"):
        return "it is a zip archive; unpack it first"
    if sample.startswith(b"<"):
        return "it is XML/HTML but not an OpenVINO IR <net>"
    try:
        text = sample.decode("utf-8")
    except UnicodeDecodeError:
        return f"first bytes: {sample[:16].hex(' ')}"
    if text.isprintable() or all(c.isprintable() or c.isspace() for c in text):
        return f"it is text starting {text[:40]!r}"
    return f"first bytes: {sample[:16].hex(' ')}"


def _describe_tflite(path: Path, buf, digest: str) -> ModelInfo:
    model = tflite.parse(buf)
    tflite_checks.check(model, data=buf)
    sg = model.primary
    custom = model.custom_ops
    fmt = Format.EDGETPU_TFLITE if tflite.EDGETPU_CUSTOM_OP in custom else Format.TFLITE
    quantized = any(t.quantization is not None and t.type in (3, 9, 7) for t in sg.tensors)
    return ModelInfo(
        path=path,
        format=fmt,
        inputs=tuple(tflite.tensor_spec(sg.tensors[i]) for i in sg.inputs),
        outputs=tuple(tflite.tensor_spec(sg.tensors[i]) for i in sg.outputs),
        operators=tuple(sorted(set(model.opcodes))),
        custom_ops=custom,
        size_bytes=len(buf),
        digest=digest,
        details={"tflite_version": model.version, "subgraphs": len(model.subgraphs), "quantized": quantized,
                 "signature": tflite.signature_aliases(model)},
    )


def _describe_onnx(path: Path, buf, digest: str) -> ModelInfo:
    from . import onnx as onnx_format, onnx_checks

    model = onnx_format.parse(buf)
    extra, static_windows = onnx_checks.check(path, model)
    inputs, outputs = onnx_format.tensor_specs(buf, model)
    ops = sorted({n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}" for n in model.nodes})
    quantized = any(n.op_type in ("QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul")
                    for n in model.nodes)
    return ModelInfo(
        path=path,
        format=Format.ONNX,
        inputs=inputs,
        outputs=outputs,
        operators=tuple(ops),
        custom_ops=tuple(sorted({f"{n.domain}.{n.op_type}" for n in model.nodes
                                 if n.domain not in ("", "ai.onnx", "ai.onnx.ml", "com.microsoft")})),
        size_bytes=len(buf),
        digest=digest,
        extra_files=extra,
        details={"ir_version": model.ir_version, "opsets": model.opsets, "producer": model.producer,
                 "quantized": quantized, "static_windows": static_windows},
    )


def _describe_ir(path: Path, buf, digest: str) -> ModelInfo:
    from . import openvino_ir

    model = openvino_ir.parse(bytes(buf))
    bin_path = path.with_suffix(".bin")
    if model.constants:
        if not bin_path.is_file():
            raise ModelValidationError(
                f"the OpenVINO IR {path.name} needs its weights file {bin_path.name}, which is missing",
                hint="keep the .xml and .bin of one export side by side",
            )
        openvino_ir.check_weights(model, bin_path.stat().st_size)
    return ModelInfo(
        path=path,
        format=Format.OPENVINO_IR,
        inputs=model.inputs,
        outputs=model.outputs,
        operators=model.layer_types,
        size_bytes=len(buf) + (bin_path.stat().st_size if bin_path.is_file() else 0),
        digest=digest,
        extra_files=(bin_path,) if bin_path.is_file() else (),
        details={"ir_version": model.version,
                 "quantized": any(t in model.layer_types for t in ("FakeQuantize", "FakeConvert"))},
    )
