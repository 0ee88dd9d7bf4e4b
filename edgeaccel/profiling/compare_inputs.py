"""The inputs a quantized model and its float origin are compared on: the same real values fed to each.

Samples are made for the float model's inputs (calibration samples of a bundle, images preprocessed as
``edgeaccel run`` does, ``.npy``/``.npz`` files, numpy arrays, or seeded random data) and then fitted to the
quantized model's: quantized with its input's own scale and zero point where it takes integers, laid out
NHWC/NCHW where the two formats differ.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..convert import calibration as calib_mod
from ..errors import ConversionError, InputDTypeError, InputError, InputShapeError, ModelError
from ..modelinfo import ModelInfo, TensorSpec
from ..tensors import concrete_shape, dequantize_array, quantize_array, random_array

RANDOM_SEED = 0


def float_samples(inputs, f_info: ModelInfo, q_info: ModelInfo, calibration: Path | None, samples: int,
                  normalize: str | None) -> tuple[list[list[np.ndarray]], str]:
    """Samples for the float model's inputs, at most ``samples``, and where they came from."""
    from ..modelfiles.describe import describe_pipeline

    specs = f_info.inputs
    pipeline = describe_pipeline(f_info)  # a dynamic-size float model is fed images at its declared size
    if inputs is None and calibration is not None:  # "random" asks for random data even then
        loaded = _load(calibration, specs, normalize, samples, pipeline)
        return loaded, f"{len(loaded)} calibration samples in bundle ({calibration.name})"
    asked_random = _is_random(inputs)
    if inputs is None or asked_random:
        why = "as asked" if asked_random else "no inputs given and no calibration samples in a bundle"
        return _random(f_info, q_info, samples), (
            f"{samples} random inputs (seed {RANDOM_SEED}) in the quantized input's range, {why}; errors on "
            f"random data can differ from those on real data")
    items = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if not items:
        raise InputError("an empty list of inputs was given", hint="pass images, .npy files or arrays, or None")
    out: list[list[np.ndarray]] = []
    kinds: set[str] = set()
    for item in items:
        if len(out) >= samples:
            break
        if isinstance(item, (str, os.PathLike)):
            path = Path(item)
            kinds.add("images" if path.suffix.lower() in calib_mod.IMAGE_SUFFIXES else
                      "folders" if path.is_dir() else f"{path.suffix} files")
            # a folder of 1000 images: the first
            out.extend(_load(path, specs, normalize, samples - len(out), pipeline))
        else:
            kinds.add("arrays")
            out.extend(_from_arrays(item, specs))
    out = out[:samples]
    what = " and ".join(sorted(kinds))
    return out, f"{len(out)} samples from {len(items)} {what}" if len(items) != len(out) else f"{len(out)} {what}"


def _is_random(inputs) -> bool:
    """``"random"`` (or ``["random"]``, as ``--input random`` arrives) asks for seeded random data."""
    if isinstance(inputs, (list, tuple)) and len(inputs) == 1:
        inputs = inputs[0]
    return isinstance(inputs, str) and inputs.strip().lower() == "random"


def fit_to(sample: list[np.ndarray], f_specs: Sequence[TensorSpec], q_specs: Sequence[TensorSpec],
           order: list[int], cross_layout: str | None) -> list[np.ndarray]:
    """A float model's sample as the quantized model's feeds (``order[k]``: the float input feeding q input k)."""
    feeds = []
    for k, spec in enumerate(q_specs):
        array = sample[order[k]]
        array = _layout(array, spec, cross_layout)
        if not spec.unranked and (array.ndim != len(spec.shape) or
                                  any(w is not None and a != w for a, w in zip(array.shape, spec.shape, strict=True))):
            f_spec = f_specs[order[k]]
            raise ModelError(f"the float model's input {f_spec.name!r} takes {_dims(f_spec.shape)}, the quantized "
                             f"model's {spec.name!r} {_dims(spec.shape)}: they are not one model",
                             hint="compare a quantized model with the float model it was made from")
        feeds.append(_dtype(array, spec, f_specs[order[k]]))
    return feeds


def _dims(shape) -> str:
    return "x".join("?" if d is None else str(d) for d in shape) or "scalar"


def input_order(f_specs: Sequence[TensorSpec], q_specs: Sequence[TensorSpec]) -> list[int]:
    """For each quantized input, the float input that feeds it: by name (converters add 'serving_default_'
    and ':0'), else by position."""
    if len(f_specs) != len(q_specs):
        raise ModelError(f"the quantized model takes {len(q_specs)} inputs, the float model {len(f_specs)}: they "
                         f"are not one model", hint="compare a quantized model with the float model it was made from")
    f_names = [_base(s.name) for s in f_specs]
    order = []
    for k, spec in enumerate(q_specs):
        base = _base(spec.name)
        order.append(f_names.index(base) if f_names.count(base) == 1 else k)
    return order if sorted(order) == list(range(len(order))) else list(range(len(q_specs)))


def _base(name: str) -> str:
    name = name.split(":")[0]
    return name.removeprefix("serving_default_")


def _load(path: Path, specs, normalize, max_samples, pipeline=None) -> list[list[np.ndarray]]:
    try:
        return calib_mod.load(path, specs, normalize=normalize, max_samples=max_samples, pipeline=pipeline).samples
    except ConversionError as exc:  # its messages name the file and the input; say they are compare inputs
        raise InputError(exc.message.replace("calibration data", "compare input"), hint=exc.hint) from exc


def _from_arrays(item, specs) -> list[list[np.ndarray]]:
    """One array (one sample, or N stacked on the batch axis) for a single-input model; a list or dict of
    arrays, one per input, for a model with several."""
    if len(specs) == 1 and isinstance(item, np.ndarray):
        return [[s] for s in _split(item, specs[0])]
    if isinstance(item, dict):
        missing = [s.name for s in specs if s.name not in item]
        if missing:
            raise InputError(f"the input arrays have no entry for {missing}",
                             hint=f"key them by {[s.name for s in specs]}")
        item = [item[s.name] for s in specs]
    if not isinstance(item, (list, tuple)) or len(item) != len(specs):
        raise InputError(f"the float model takes {len(specs)} inputs ({', '.join(s.name for s in specs)}); give "
                         f"each sample as a list or dict of {len(specs)} arrays",
                         hint="or pass an .npz keyed by input name")
    split = [_split(np.asarray(a), s) for a, s in zip(item, specs, strict=True)]
    if len({len(s) for s in split}) != 1:
        raise InputError("the input arrays hold different sample counts per input")
    return [list(parts) for parts in zip(*split, strict=True)]


def _split(array: np.ndarray, spec: TensorSpec) -> list[np.ndarray]:
    want = spec.shape
    fits = len(array.shape) == len(want) and all(w is None or a == w for a, w in zip(array.shape, want, strict=True))
    if fits:
        return [array]
    if (len(array.shape) == len(want) and want and want[0] in (1, None)
            and all(w is None or a == w for a, w in zip(array.shape[1:], want[1:], strict=True))):
        return [array[i:i + 1] for i in range(array.shape[0])]
    dims = "x".join("?" if d is None else str(d) for d in want)
    raise InputShapeError(f"an input array has shape {list(array.shape)}; input {spec.name!r} takes {dims}",
                          hint="give one sample of that shape, or N samples stacked on the first axis")


def _random(f_info: ModelInfo, q_info: ModelInfo, samples: int) -> list[list[np.ndarray]]:
    """Seeded data that both models take: where the quantized input is integer, real values drawn uniformly
    over the range its scale and zero point can represent (the range the quantizer chose for the input)."""
    rng = np.random.default_rng(RANDOM_SEED)
    order = input_order(f_info.inputs, q_info.inputs)
    q_for = {order[k]: spec for k, spec in enumerate(q_info.inputs)}
    out = []
    for _ in range(samples):
        sample = []
        for i, spec in enumerate(f_info.inputs):
            q = q_for[i]
            if spec.dtype.kind == "f" and q.dtype.kind in "iu" and q.quantization and q.quantization.per_tensor:
                info = np.iinfo(q.dtype)
                ends = dequantize_array(np.array([info.min, info.max]), q.quantization)
                sample.append(rng.uniform(ends[0], ends[1], concrete_shape(spec)).astype(spec.dtype))
            else:
                sample.append(random_array(spec, rng))
        out.append(sample)
    return out


def _layout(array: np.ndarray, spec: TensorSpec, cross_layout: str | None) -> np.ndarray:
    want = tuple(spec.shape)
    if array.ndim != 4 or not cross_layout or len(want) != 4:
        return array
    fits = all(w is None or a == w for a, w in zip(array.shape, want, strict=True))
    if fits:
        return array
    moved = array.transpose(0, 2, 3, 1) if cross_layout == "q_nhwc" else array.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(moved)


def _dtype(array: np.ndarray, spec: TensorSpec, f_spec: TensorSpec) -> np.ndarray:
    if array.dtype == spec.dtype:
        return array
    if array.dtype.kind == "f" and spec.dtype.kind in "iu" and spec.quantization is not None:
        if not spec.quantization.per_tensor:
            raise InputDTypeError(f"the quantized model's input {spec.name!r} is quantized per axis; the float "
                                  f"sample cannot be quantized for it here", hint="pass the quantized inputs as .npy")
        return quantize_array(array, spec.quantization, spec.dtype)
    if array.dtype.kind == "f" and spec.dtype.kind == "f":
        return array.astype(spec.dtype)
    raise InputDTypeError(f"the float model's input {f_spec.name!r} is {f_spec.dtype}, the quantized model's "
                          f"{spec.name!r} is {spec.dtype} with no quantization parameters: the same values cannot "
                          f"be fed to both", hint="compare models that take the same kind of input")
