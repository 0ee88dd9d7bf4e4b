"""TensorRT engines (``.engine`` / ``.plan`` / ``.trt``): recognized by their bytes, described from their header.

The layout read here is the one NVIDIA's own tool reads (NVIDIA/TensorRT samples/common/sampleEngines.cpp,
``printPlanVersion``, what ``trtexec --getPlanVersionOnly`` prints)::

    bytes 0-3    plan tag: uint32 little-endian 0x74727466, the bytes "ftrt"
    bytes 4-7    serialization version, uint32 little-endian; trtexec reads the version below only when it is 0
    bytes 24-27  major, minor, patch and build of the TensorRT that serialized the engine, one byte each

Anything else in the header is undocumented. So the TensorRT version is reported only for serialization
version 0, and the GPU an engine was built for (its compute capability) is never read from the file: it is
"unknown" until TensorRT itself deserializes the engine and says so. Nothing is guessed.

Ultralytics (ultralytics/engine/exporter.py, read back by nn/autobackend.py) writes its metadata before the
engine: a uint32 little-endian length N, N bytes of UTF-8 JSON (task, imgsz, names, ..., "dla" for a DLA
core), then the engine. Such files are engines too; the metadata is kept in the description.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelValidationError
from ..modelinfo import Format, ModelInfo

PLAN_TAG = b"ftrt"  # 0x74727466 little-endian
HEADER_BYTES = 28  # what the documented fields span
VERSION_AT = 24
NAMES = (".engine", ".plan", ".trt")  # what engines are called; the format is still read from the bytes
MAX_METADATA = 16 << 20  # a length prefix above this is not Ultralytics metadata
UNKNOWN = "unknown"
REBUILD_HINT = ("build the engine again from its ONNX model on the target (trtexec --onnx=m.onnx "
                "--saveEngine=m.engine, or edgeaccel convert --to tensorrt-f16), or pass the ONNX model itself")
GPU_UNKNOWN = ("unknown: the engine header names no GPU; TensorRT says which compute capability it needs when it "
               "deserializes the engine")


@dataclass(frozen=True)
class EngineHeader:
    """What the header of one engine says. ``offset``: where the engine starts in the file (after a wrapper's
    metadata); ``tensorrt_version``: "10.3.0.26", or None where the layout does not say."""

    offset: int
    serialization: int
    tensorrt_version: str | None
    metadata: dict | None = None  # Ultralytics' JSON, when the file carries it
    wrapper: str | None = None  # "ultralytics" when the engine follows Ultralytics' metadata


def engine_offset(buf) -> tuple[int, dict | None] | None:
    """(where the plan tag is, Ultralytics' metadata or None) when ``buf`` holds a TensorRT engine; None otherwise."""
    if bytes(buf[:4]) == PLAN_TAG:
        return 0, None
    if len(buf) < 8:
        return None
    length = struct.unpack_from("<I", buf, 0)[0]
    if not 2 <= length <= min(MAX_METADATA, len(buf) - 8) or bytes(buf[4 + length:8 + length]) != PLAN_TAG:
        return None
    try:
        metadata = json.loads(bytes(buf[4:4 + length]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return (4 + length, metadata) if isinstance(metadata, dict) else None


def looks_like_engine(buf) -> bool:
    return engine_offset(buf) is not None


def parse_header(buf, name: str = "the engine") -> EngineHeader:
    """The header of the engine in ``buf``; ModelValidationError when it is not one or is cut short."""
    found = engine_offset(buf)
    if found is None:
        raise ModelValidationError(f"{name} is not a TensorRT engine ({not_an_engine(buf)})",
                                   hint=REBUILD_HINT)
    offset, metadata = found
    if len(buf) < offset + HEADER_BYTES:
        raise ModelValidationError(
            f"{name} is a truncated TensorRT engine: {len(buf) - offset} bytes after the plan tag, fewer than the "
            f"{HEADER_BYTES} of its header", hint="the copy was cut short; copy or build the engine again")
    serialization = struct.unpack_from("<I", buf, offset + 4)[0]
    version = None
    if serialization == 0:
        version = ".".join(str(b) for b in bytes(buf[offset + VERSION_AT:offset + HEADER_BYTES]))
    return EngineHeader(offset, serialization, version, metadata, "ultralytics" if metadata is not None else None)


def not_an_engine(buf) -> str:
    """Why the bytes are not an engine, for a file named like one."""
    head = bytes(buf[:16])
    if not head:
        return "it is empty"
    return (f"it starts with {head.hex(' ')}, not the plan tag 'ftrt' (66 74 72 74) nor Ultralytics' metadata "
            "length and JSON before it")


def describe(path: Path, buf, digest: str) -> ModelInfo:
    """A ModelInfo of the engine. Its tensors are left empty: only TensorRT can read them (the executor lists
    them once it has deserialized the engine)."""
    header = parse_header(buf, path.name)
    details = {"tensorrt_version": header.tensorrt_version or UNKNOWN, "serialization_version": header.serialization,
               "gpu": GPU_UNKNOWN, "engine_offset": header.offset, "engine_bytes": len(buf) - header.offset,
               "note": "tensors read by TensorRT when it deserializes the engine"}
    if header.metadata is not None:
        details["wrapper"] = header.wrapper
        details["metadata"] = header.metadata
    return ModelInfo(path=path, format=Format.TENSORRT_ENGINE, inputs=(), outputs=(), size_bytes=len(buf),
                     digest=digest, details=details)

