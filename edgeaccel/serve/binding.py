"""A request's inputs checked against the model it is for, before any executor runs: names, dtypes, and every
dimension that any of the model's executors fixes (a 400 saying what the model takes, never a runtime's error
after fallbacks)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ServeError, from_edgeaccel
from .tensors import datatype_of


def bind(served: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The request's inputs as the model's executors take them, in order; a ServeError (400) for a name, dtype
    or shape that no executor of the model would take, before any of them runs."""
    specs = {t.name: t for t in served.model.inputs}
    unknown = [k for k in inputs if k not in specs]
    if unknown:
        raise ServeError(400, f"model '{served.name}' has no input '{unknown[0]}'; its inputs are "
                              f"{list(specs)} (GET /v2/models/{served.name} for their shapes)")
    for key, array in inputs.items():
        want = specs[key].dtype
        if array.dtype != want:
            raise ServeError(400, f"input '{key}' of model '{served.name}' is {datatype_of(want)}, the request "
                                  f"sent {datatype_of(array.dtype)}")
    try:
        arrays = served.binder.bind(inputs)
    except Exception as exc:
        raise from_edgeaccel(exc, served.name) from None
    for spec, array, fixed in zip(served.model.inputs, arrays, served.fixed, strict=True):
        check_fixed(served, spec.name, array.shape, fixed)
    if served.shape_check is not None:
        why = served.shape_check.problem({s.name: a.shape for s, a in zip(served.model.inputs, arrays, strict=True)})
        if why:
            shapes = ", ".join(f"{spec.name} {'x'.join(map(str, array.shape))}"
                               for spec, array in zip(served.model.inputs, arrays, strict=True))
            raise ServeError(400, f"model '{served.name}' cannot take inputs of these shapes ({shapes}): {why} "
                                  f"(GET /v2/models/{served.name} for its inputs)")
    return arrays



def fixed_dims(model: Any) -> tuple[tuple[int | None, ...] | None, ...]:
    """Per input, the dimensions any executor of the model fixes. The model's own inputs are its first
    executor's: an ONNX twin may leave H and W dynamic where the .tflite fixes them, and a request of the wrong
    size would then pass the binder and fail inside a runtime (a 500, or fallbacks) instead of a 400 here."""
    shapes: list[list[int | None] | None] = [None if t.unranked else list(t.shape) for t in model.inputs]
    for slot in getattr(model, "slots", ()):
        for i, spec in enumerate(getattr(slot.executor, "inputs", ())[:len(shapes)]):
            if spec.unranked:
                continue
            if shapes[i] is None:
                shapes[i] = list(spec.shape)
            elif len(shapes[i]) == len(spec.shape):
                shapes[i] = [d if d is not None else o for d, o in zip(shapes[i], spec.shape, strict=True)]
    return tuple(None if s is None else tuple(s) for s in shapes)


def check_fixed(served: Any, name: str, shape: tuple, fixed: tuple | None) -> None:
    if fixed is None or len(fixed) != len(shape):
        return  # the binder checked the rank against the model's inputs
    first = 1 if served.batcher is not None else 0  # rows of a batched model: the batcher's to count
    for axis in range(first, len(shape)):
        if fixed[axis] is not None and shape[axis] != fixed[axis]:
            want = "x".join("?" if d is None else str(d) for d in fixed)
            raise ServeError(400, f"input '{name}' of model '{served.name}' has shape "
                                  f"{'x'.join(map(str, shape))}; the model takes {want} (dimension {axis} must be "
                                  f"{fixed[axis]}: GET /v2/models/{served.name} for its inputs)")
