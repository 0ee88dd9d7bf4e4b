"""Encoded images as KServe v2 ``BYTES`` tensors, for a model with a vision task: what tritonclient sends for
``InferInput("image", [1], "BYTES")`` with ``set_data_from_numpy(np.array([jpeg_bytes], dtype=object))``.

Each element of the input is one image; the answer is one ``BYTES`` output, ``result``, holding each image's
result JSON (schema edgeaccel.vision/1). Raw bytes (HTTP's binary extension, gRPC's raw contents) are the
protocol's serialization: per element a 4-byte little-endian length, then the bytes. JSON ``data`` strings and
gRPC ``bytes_contents`` are the image bytes base64-encoded (JSON) or as they are (gRPC)."""

from __future__ import annotations

import base64
import binascii
import json
import struct
from typing import Any

from .errors import ServeError

RESULT = "result"  # the output a task request answers with
MAX_IMAGES = 64  # images in one request: each is decoded and run, so a request of thousands is refused


def split_bytes(raw: bytes | memoryview, where: str) -> list[bytes]:
    """The elements of a serialized BYTES tensor."""
    raw, items, at = memoryview(raw), [], 0
    while at < len(raw):
        if at + 4 > len(raw):
            raise ServeError(400, f"{where}: BYTES data ends inside an element's 4-byte length")
        (size,) = struct.unpack_from("<I", raw, at)
        at += 4
        if at + size > len(raw):
            raise ServeError(400, f"{where}: a BYTES element of {size} bytes goes past the {len(raw)} bytes sent")
        items.append(bytes(raw[at:at + size]))
        at += size
    return items


def join_bytes(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


def from_json_strings(data: Any, where: str) -> list[bytes]:
    values = data if isinstance(data, list) else [data]
    images = []
    for value in values:
        if not isinstance(value, str):
            raise ServeError(400, f"{where}: BYTES data in JSON is a list of base64 strings, one per image")
        try:
            images.append(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            raise ServeError(400, f"{where}: a BYTES string is not base64; encode each image with base64, or "
                                  "send it as binary data (tritonclient's binary_data=True)") from None
    return images


def check_count(images: list[bytes], shape: Any, where: str) -> list[bytes]:
    if not images:
        raise ServeError(400, f"{where} holds no image: send one or more encoded images (JPEG, PNG)")
    if len(images) > MAX_IMAGES:
        raise ServeError(400, f"{where} holds {len(images)} images; send at most {MAX_IMAGES} a request")
    count = declared_count(shape)
    if count is not None and count != len(images):
        raise ServeError(400, f"{where}: shape {list(shape)} says {count} images, the data holds {len(images)}")
    return images


def declared_count(shape: Any) -> int | None:
    """How many images a BYTES input's shape says it holds (None when the shape is not a list of whole numbers)."""
    if not (isinstance(shape, (list, tuple)) and shape and all(isinstance(d, int) for d in shape)):
        return None
    count = 1
    for d in shape:
        count *= d
    return count


def result_bytes(results: list[dict]) -> list[bytes]:
    return [json.dumps(r, separators=(",", ":")).encode() for r in results]
