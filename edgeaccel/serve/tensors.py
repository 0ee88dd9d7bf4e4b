"""Protocol tensors to and from numpy: the datatype names of the Open Inference Protocol, JSON ``data`` (flat
or nested, row-major) and raw little-endian bytes (HTTP's binary tensor extension, gRPC's raw contents).

String tensors (BYTES) are not model inputs here: no model an edge runtime runs here takes them; a request with
one gets a 400 saying so, except encoded images for a model with a vision task (image_tensors.py)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import ServeError

DATATYPES = {
    "BOOL": np.dtype(np.bool_), "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64), "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16), "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
}
NAMES = {dtype: name for name, dtype in DATATYPES.items()}
MAX_DIMS = 16
# parameters of protocol extensions this server does not serve: ignoring them would answer something other than
# what the client asked for (tritonclient's class_count, set_shared_memory), so they are refused, saying so
UNSERVED = {"classification": "the classification extension is not served: request the output tensor itself and "
                              "take its top scores on the client",
            "shared_memory_region": "the shared-memory extension is not served: send the tensor in the request"}


def datatype_of(dtype: np.dtype) -> str:
    """The protocol's name for a numpy dtype ("BYTES" for strings and objects)."""
    return NAMES.get(np.dtype(dtype), "BYTES")


def dtype_of(datatype: Any, where: str) -> np.dtype:
    dtype = DATATYPES.get(datatype) if isinstance(datatype, str) else None
    if dtype is None:
        if datatype == "BYTES":
            raise ServeError(400, f"{where}: BYTES (string) tensors are not served; send a numeric tensor (encoded "
                                  "images as BYTES go to a model with a vision task: edgeaccel serve --task)")
        raise ServeError(400, f"{where}: datatype {datatype!r} is not one of {', '.join(DATATYPES)}")
    return dtype


def refuse_unserved(parameters: Any, where: str) -> None:
    """400 for a tensor's parameter that asks for an extension this server does not serve."""
    for key, why in UNSERVED.items():
        if key in parameters:
            raise ServeError(400, f"{where}: {why}")


def check_shape(shape: Any, where: str) -> tuple[int, ...]:
    if (not isinstance(shape, (list, tuple)) or len(shape) > MAX_DIMS
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise ServeError(400, f"{where}: shape must be a list of at most {MAX_DIMS} non-negative integers, "
                              f"got {shape!r}")
    return tuple(int(d) for d in shape)


def from_json(data: Any, datatype: str, shape: Any, where: str) -> np.ndarray:
    """JSON values as the datatype's array; a 400 for values the datatype would silently change: strings,
    true/false in a numeric tensor, fractions or out-of-range numbers in an integer one (numpy truncates 0.7 to
    0 and wraps 300 to 44), and NaN, infinity or a number beyond the float type's range (check_finite)."""
    dtype = dtype_of(datatype, where)
    dims = check_shape(shape, where)
    try:
        given = np.asarray(data)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ServeError(400, f"{where}: 'data' is not a list of numbers nested as the shape ({exc})") from None
    kind = given.dtype.kind
    if kind not in "biuf":
        raise ServeError(400, f"{where}: 'data' does not hold {datatype} values only (a string, an object, or a "
                              "whole number beyond 64 bits is in it); send a flat or nested list of numbers")
    if kind == "b" and dtype.kind != "b":
        raise ServeError(400, f"{where}: 'data' holds true/false, and {datatype} takes numbers: send 1 and 0")
    if dtype.kind in "iu" and given.size:
        if kind == "f":
            check_finite(given, where, datatype)
            if not np.array_equal(given, np.trunc(given)):
                fraction = float(given[given != np.trunc(given)].flat[0])
                raise ServeError(400, f"{where}: 'data' holds fractions such as {fraction!r}, and {datatype} takes "
                                      "whole numbers (pixels 0..255, not 0..1?)")
        info = np.iinfo(dtype)
        low, high = given.min(), given.max()
        if low < info.min or high > info.max:
            raise ServeError(400, f"{where}: 'data' holds {low if low < info.min else high}, outside {datatype}'s "
                                  f"range {info.min}..{info.max}")
    with np.errstate(over="ignore", invalid="ignore"):  # beyond the type's range becomes inf: refused below
        array = given.astype(dtype, copy=False)
    if dtype.kind == "f":
        check_finite(array, where, datatype)
    if array.size != math.prod(dims):
        raise ServeError(400, f"{where}: 'data' holds {array.size} values, shape {list(dims)} needs "
                              f"{math.prod(dims)}")
    return array.reshape(dims)


def check_finite(array: np.ndarray, where: str, datatype: str) -> None:
    """A 400 for NaN or infinity in a float tensor: every runtime runs on them without complaint and answers
    NaNs or a confident, normal-looking result (OpenVINO turned an all-NaN input into an ordinary softmax).
    Two reductions (NaN propagates through min and max), no temporary array."""
    if array.size and not (np.isfinite(array.min()) and np.isfinite(array.max())):
        raise ServeError(400, f"{where}: the tensor holds NaN or infinity (or a number beyond {datatype}'s "
                              "range); send finite values, with missing data "
                              "filled in as the model was trained")


def from_bytes(raw: bytes | memoryview, datatype: str, shape: Any, where: str) -> np.ndarray:
    dtype = dtype_of(datatype, where)
    dims = check_shape(shape, where)
    need = math.prod(dims) * dtype.itemsize
    if len(raw) != need:
        raise ServeError(400, f"{where}: {len(raw)} bytes of tensor data, {datatype} of shape {list(dims)} needs "
                              f"{need}")
    array = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False).reshape(dims)
    if dtype.kind == "f":
        check_finite(array, where, datatype)
    return array


def to_bytes(array: np.ndarray) -> bytes:
    array = np.asarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return np.ascontiguousarray(array).tobytes()


def to_view(array: np.ndarray) -> memoryview:
    """The array's raw little-endian bytes, without copying them where it is already contiguous and
    little-endian (HTTP joins them into its body: one copy instead of two)."""
    array = np.asarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8).data


def to_json(array: np.ndarray) -> list:
    return np.asarray(array).ravel().tolist()
