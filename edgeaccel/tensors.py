"""Inputs checked against the model before any runtime sees them, (de)quantization, and the Outputs type.

The checks are precomputed per model so that a correct call costs a few attribute reads per input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .errors import (
    InputCountError,
    InputDTypeError,
    InputNameError,
    InputShapeError,
    InputValueError,
    OutputValueError,
)
from .modelinfo import Quantization, TensorSpec

# Dynamic dimensions below this are refused: ONNX Runtime kills the process with SIGFPE when a spatial
# dimension is smaller than a kernel (runtime facts), and a zero-sized dimension is never a real request.
DEFAULT_MIN_DYNAMIC_DIM = 1


class InputBinder:
    """Turns what the caller passed to run() into the list of arrays an executor takes."""

    def __init__(self, specs: Sequence[TensorSpec], min_dynamic_dims: Sequence[int] | None = None,
                 aliases: Mapping[str, int] | None = None) -> None:
        self.specs = tuple(specs)
        self.names = tuple(s.name for s in specs)
        self._index = {name: i for i, name in enumerate(self.names)}
        # other names of the same inputs (a TFLite signature's); a tensor's own name wins over an alias
        self._lookup = {**{a: i for a, i in (aliases or {}).items() if 0 <= i < len(self.names)}, **self._index}
        self._dtypes = tuple(s.dtype for s in specs)
        self._shapes = tuple(s.shape for s in specs)
        self._static = tuple(not s.is_dynamic for s in specs)
        self._unranked = tuple(s.unranked for s in specs)
        # string inputs are object arrays to edgeaccel; the runtimes also take numpy's str_ and bytes_ arrays
        self._strings = tuple(s.dtype == np.dtype(object) for s in specs)
        self._min_dims = tuple(min_dynamic_dims or [DEFAULT_MIN_DYNAMIC_DIM] * len(specs))

    def bind(self, inputs: Any, quantize: bool = False, check_finite: bool = False) -> list[np.ndarray]:
        arrays = self._arrange(inputs)
        for i, array in enumerate(arrays):
            if type(array) is not np.ndarray:
                array = arrays[i] = _as_array(array, self.names[i])
            if array.dtype != self._dtypes[i] and not (self._strings[i] and array.dtype.kind in "SU"):
                array = arrays[i] = self._convert(i, array, quantize)
            if array.shape != self._shapes[i] and (self._static[i] or not self._fits(i, array.shape)):
                raise self._shape_error(i, array.shape)
            if not array.flags.c_contiguous:
                arrays[i] = np.ascontiguousarray(array)
            if check_finite and array.dtype.kind in "fc" and not np.isfinite(array).all():
                raise InputValueError(
                    f"input {self._label(i)} holds NaN or Inf",
                    hint="runtimes return confident-looking answers for NaN input; clean the input first",
                )
        return arrays

    def _arrange(self, inputs: Any) -> list:
        n = len(self.specs)
        if isinstance(inputs, Mapping):
            lookup = self._lookup
            unknown = [k for k in inputs if k not in lookup]
            if unknown:
                also = sorted(set(lookup) - set(self.names))
                raise InputNameError(
                    f"no input named {unknown[0]!r}; the model's inputs are {list(self.names)}"
                    + (f" (or by signature name {also})" if also else ""),
                    hint="pass a dict keyed by the names in model.inputs, or a list in that order",
                )
            if len(lookup) == n:  # no aliases: the common case
                missing = [name for name in self.names if name not in inputs]
                if missing:
                    raise InputCountError(f"missing input {missing[0]!r}; the model needs {list(self.names)}")
                return [inputs[name] for name in self.names]
            arranged: list = [_MISSING] * n
            for key, value in inputs.items():
                i = lookup[key]
                if arranged[i] is not _MISSING:
                    raise InputNameError(f"input {self.names[i]!r} is given twice (by its name and an alias)")
                arranged[i] = value
            missing = [self.names[i] for i, value in enumerate(arranged) if value is _MISSING]
            if missing:
                raise InputCountError(f"missing input {missing[0]!r}; the model needs {list(self.names)}")
            return arranged
        if isinstance(inputs, (list, tuple)) and not (n == 1 and _is_number_list(inputs)):
            if len(inputs) != n:
                raise InputCountError(
                    f"got {len(inputs)} inputs, the model takes {n}: {list(self.names)}",
                    hint="pass one array per model input, in the order of model.inputs, or a dict by name",
                )
            return list(inputs)
        if n != 1:
            raise InputCountError(
                f"got one array, the model takes {n} inputs: {list(self.names)}",
                hint="pass a list in the order of model.inputs, or a dict by name",
            )
        return [inputs]

    def _convert(self, i: int, array: np.ndarray, quantize: bool) -> np.ndarray:
        spec = self.specs[i]
        if quantize and array.dtype.kind == "f" and spec.quantization is not None and spec.dtype.kind in "iu":
            return quantize_array(array, spec.quantization, spec.dtype)
        hint = f"convert it with x.astype(np.{spec.dtype})"
        if array.dtype.kind == "f" and spec.quantization is not None and spec.dtype.kind in "iu":
            hint = (f"the input is quantized ({spec.quantization}); pass quantize=True to quantize float values "
                    f"with the model's own parameters, or {hint}")
        raise InputDTypeError(f"input {self._label(i)} expects {spec.dtype}, got {array.dtype}", hint=hint)

    def _fits(self, i: int, shape: tuple[int, ...]) -> bool:
        want = self._shapes[i]
        low = self._min_dims[i]
        if self._unranked[i]:  # the model declares no shape: any rank, every dimension dynamic
            return all(d >= low for d in shape)
        if len(shape) != len(want):
            return False
        return all(d == w if w is not None else d >= low for d, w in zip(shape, want, strict=True))

    def _shape_error(self, i: int, shape: tuple[int, ...]) -> InputShapeError:
        want = self._shapes[i]
        dims = "x".join("?" if d is None else str(d) for d in want)
        if self._unranked[i]:
            dims = "of any rank"
        hint = None
        if len(shape) + 1 == len(want) and want[0] in (1, None) and tuple(shape) == tuple(want[1:]):
            hint = "add the batch dimension: x[np.newaxis]"
        elif len(shape) == len(want) and sorted(shape) == sorted(d for d in want if d is not None):
            hint = "the dimensions are in another order (NCHW vs NHWC?); transpose the array"
        elif not self._static[i]:
            hint = f"dynamic dimensions (?) must be at least {self._min_dims[i]}"
        return InputShapeError(f"input {self._label(i)} expects shape {dims}, got {'x'.join(map(str, shape))}",
                               hint=hint)

    def _label(self, i: int) -> str:
        return repr(self.names[i]) if self.names[i] else f"#{i}"


_MISSING = object()


def aliases(details: Mapping, role: str) -> dict[str, int]:
    """Other names of a model's inputs or outputs (role "inputs"/"outputs") by position: the names a TFLite
    signature runner uses, from ModelInfo.details["signature"]."""
    signature = details.get("signature") if details else None
    found = signature.get(role) if isinstance(signature, Mapping) else None
    return {str(k): int(v) for k, v in found.items()} if isinstance(found, Mapping) else {}


def _is_number_list(value: Sequence) -> bool:
    return len(value) > 0 and isinstance(value[0], (int, float, list, tuple))


def _as_array(value: Any, name: str) -> np.ndarray:
    try:
        return np.asarray(value)
    except Exception as exc:
        raise InputDTypeError(f"input {name!r} is a {type(value).__name__}, not an array",
                              hint="pass numpy arrays") from exc


def quantize_array(values: np.ndarray, q: Quantization, dtype: np.dtype) -> np.ndarray:
    """real -> integer with the model's own parameters: round(x / scale) + zero_point, clipped to the dtype."""
    if not q.per_tensor:
        raise InputDTypeError("quantize=True supports per-tensor quantized inputs only; this one is per-axis",
                              hint="quantize the input yourself with the per-axis scales in model.inputs")
    info = np.iinfo(dtype)
    scaled = np.rint(np.asarray(values, np.float32) / np.float32(q.scale[0])) + q.zero_point[0]
    return np.clip(scaled, info.min, info.max).astype(dtype)


def dequantize_array(values: np.ndarray, q: Quantization) -> np.ndarray:
    """integer -> real: scale * (q - zero_point), float32; per-axis parameters broadcast along their axis."""
    scale = np.asarray(q.scale, np.float32)
    zero = np.asarray(q.zero_point, np.float32)
    if not q.per_tensor and values.ndim:
        shape = [1] * values.ndim
        shape[q.axis or 0] = -1
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return (values.astype(np.float32) - zero) * scale


# Sizes given to dynamic dimensions when nothing else says how large they are (calibration, `run` without an
# input). 1 is a real size only for the batch: a spatial dimension of 1 is smaller than most kernels (ONNX
# Runtime dies with SIGFPE on that, runtime facts) and a sequence of 1 token exercises almost nothing.
DYNAMIC_BATCH = 1
DYNAMIC_IMAGE_SIDE = 224  # the common classifier input; every stride-32 backbone accepts it
DYNAMIC_LENGTH = 16  # tokens, time steps, features
TOKEN_IDS = 64  # integer inputs draw ids from 0..TOKEN_IDS-1: negative or large ids break embedding lookups


def concrete_shape(spec: TensorSpec) -> list[int]:
    """A size for every dimension of ``spec``: the fixed ones as declared, dynamic ones by their role: the
    batch 1, the height and width of an image (a 1- or 3-channel rank-4 input) 224, any other 16."""
    if spec.unranked:
        return [DYNAMIC_BATCH, DYNAMIC_LENGTH]
    shape = list(spec.shape)
    image_axes: tuple[int, ...] = ()
    if len(shape) == 4 and shape[3] in (1, 3):
        image_axes = (1, 2)
    elif len(shape) == 4 and shape[1] in (1, 3):
        image_axes = (2, 3)
    sizes = []
    for axis, dim in enumerate(shape):
        if dim is not None:
            sizes.append(dim)
        elif axis == 0 and len(shape) > 1:
            sizes.append(DYNAMIC_BATCH)
        elif axis in image_axes:
            sizes.append(DYNAMIC_IMAGE_SIDE)
        else:
            sizes.append(DYNAMIC_LENGTH)
    return sizes


def random_array(spec: TensorSpec, rng: np.random.Generator, shape: Sequence[int] | None = None) -> np.ndarray:
    """Seeded data a model can take: uint8 0..255 and int8 -128..127 (pixels, quantized values); wider
    integers are ids from 0 (token ids, indices: ``TOKEN_IDS``), except masks (all ones) and token types
    (zeros) by their names; bools 0/1; floats in [0, 1). Dynamic dimensions get ``concrete_shape``."""
    shape = list(shape if shape is not None else concrete_shape(spec))
    if spec.dtype.kind in "iu":
        info = np.iinfo(spec.dtype)
        if info.bits <= 8 or spec.quantization is not None:
            low, high = max(info.min, -128), min(info.max, 255)
            return rng.integers(low, high, size=shape, endpoint=True).astype(spec.dtype)
        name = spec.name.lower()
        if "mask" in name:
            return np.ones(shape, spec.dtype)
        if "type" in name or "segment" in name:
            return np.zeros(shape, spec.dtype)
        return rng.integers(0, TOKEN_IDS, size=shape).astype(spec.dtype)
    if spec.dtype.kind == "b":
        return rng.integers(0, 1, size=shape, endpoint=True).astype(bool)
    if spec.dtype.kind == "f":
        return rng.random(shape, dtype=np.float32).astype(spec.dtype)
    raise InputDTypeError(f"input {spec.name!r} is {spec.dtype}; random data cannot be made for it",
                          hint="give real inputs (a .npy file)")


def check_outputs_finite(arrays: Sequence[np.ndarray], names: Sequence[str]) -> None:
    for array, name in zip(arrays, names, strict=True):
        if isinstance(array, (list, tuple)):  # an ONNX sequence output: its arrays
            check_outputs_finite(array, [name] * len(array))
            continue
        if array.dtype.kind in "fc" and not np.isfinite(array).all():
            raise OutputValueError(f"output {name!r} holds NaN or Inf",
                                   hint="check the input range and preprocessing; the model diverged")


class Outputs(tuple):
    """The outputs of one run, in the model's order: index by position or by output name.

    ``a, b = model.run(x)``, ``out[0]``, ``out["scores"]``, ``out.as_dict()``.
    """

    __slots__ = ()
    _names: tuple[str, ...] = ()
    _index: dict[str, int] = {}
    _by_executor: dict[str, type] = {}
    # which executor produced these outputs ("litert:CPU", "openvino:CPU@bf16"): a class attribute of the
    # labelled subclass (``labelled``), so that a tuple carries it without a per-result dict
    executor: str | None = None

    @classmethod
    def for_names(cls, names: Sequence[str], aliases: Mapping[str, int] | None = None) -> type[Outputs]:
        """``aliases``: other names by position (a TFLite signature's 'output_0'); the outputs' own names win."""
        index = {a: i for a, i in (aliases or {}).items() if 0 <= i < len(names)}
        index.update((n, i) for i, n in enumerate(names))
        return type("Outputs", (cls,), {"__slots__": (), "_names": tuple(names), "_index": index,
                                        "_by_executor": {}})

    @classmethod
    def labelled(cls, executor: str | None) -> type[Outputs]:
        """This class with ``executor`` set (one subclass per executor name, made once)."""
        if executor is None or executor == cls.executor:
            return cls
        found = cls._by_executor.get(executor)
        if found is None:
            found = cls._by_executor.setdefault(
                executor, type("Outputs", (cls,), {"__slots__": (), "executor": executor}))
        return found

    def __getitem__(self, key):
        if isinstance(key, str):
            try:
                key = self._index[key]
            except KeyError:
                raise KeyError(f"no output named {key!r}; the outputs are {list(self._names)}") from None
        return tuple.__getitem__(self, key)

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def as_dict(self) -> dict[str, np.ndarray]:
        return dict(zip(self._names, self, strict=True))

    def __repr__(self) -> str:
        parts = ", ".join(f"{n!r}: {a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray)
                          else f"{n!r}: {type(a).__name__} of {len(a)}" if isinstance(a, (list, tuple))
                          else f"{n!r}: {type(a).__name__}" for n, a in zip(self._names, self, strict=True))
        return f"Outputs({parts})"
