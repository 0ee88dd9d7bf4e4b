"""Our own check of a request's shape for an ONNX model with dynamic input dimensions, before any executor runs.

A dynamic dimension passes the binder at any size, and the runtimes then disagree about a size the graph cannot
take: ONNX Runtime refuses it at run, OpenVINO answered a MatMul of mismatched width and a 2x2 input to a 3x3 Conv
with confident zeros, no error. ONNX's own shape inference, run with the request's concrete shapes, finds both:
it raises on incompatible dimensions, and a zero-sized intermediate tensor means an input smaller than a kernel.
Each distinct shape is inferred once (a small cache); models without dynamic inputs never come here."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

log = logging.getLogger("edgeaccel.serve")
CACHED_SHAPES = 64


class OnnxShapeCheck:
    def __init__(self, path: Path) -> None:
        import onnx

        self._proto = onnx.load(str(path), load_external_data=False)
        self.name = path.name
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple, str | None] = OrderedDict()

    def problem(self, shapes: dict[str, tuple[int, ...]]) -> str | None:
        """Why these input shapes cannot run through the graph, or None."""
        key = tuple(sorted(shapes.items()))
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return self._seen[key]
        why = self._infer(shapes)
        with self._lock:
            self._seen[key] = why
            while len(self._seen) > CACHED_SHAPES:
                self._seen.popitem(last=False)
        return why

    def _infer(self, shapes: dict[str, tuple[int, ...]]) -> str | None:
        import onnx
        from onnx import shape_inference

        model = onnx.ModelProto()
        model.CopyFrom(self._proto)
        for graph_input in model.graph.input:
            shape = shapes.get(graph_input.name)
            dims = graph_input.type.tensor_type.shape.dim
            if shape is None or len(dims) != len(shape):
                continue
            for dim, size in zip(dims, shape, strict=True):
                dim.Clear()
                dim.dim_value = int(size)
        try:
            inferred = shape_inference.infer_shapes(model, strict_mode=True)
        except shape_inference.InferenceError as exc:
            return " ".join(str(exc).split())[:400]
        except Exception as exc:  # an operator ONNX cannot infer: no verdict, the runtimes decide
            log.debug("shape inference of %s gave no verdict: %s", self.name, exc)
            return None
        for value in list(inferred.graph.value_info) + list(inferred.graph.output):
            dims = value.type.tensor_type.shape.dim
            if any(d.HasField("dim_value") and d.dim_value == 0 for d in dims):
                sizes = "x".join(str(d.dim_value) if d.HasField("dim_value") else "?" for d in dims)
                return (f"tensor '{value.name}' inside the model would be {sizes}: an input is smaller than a "
                        "kernel or window of the graph")
        return None


def onnx_check_for(model: Any, fixed: tuple) -> OnnxShapeCheck | None:
    """A check for the model's ONNX artifact when an input keeps a dynamic dimension (None otherwise)."""
    if not any(dims is None or None in dims for dims in fixed):
        return None
    for slot in getattr(model, "slots", ()):
        artifact = getattr(getattr(slot.executor, "model", None), "path", None)
        if artifact is not None and Path(artifact).suffix.lower() == ".onnx":
            try:
                return OnnxShapeCheck(Path(artifact))
            except Exception as exc:  # unreadable here: the runtimes loaded it, so they decide
                log.debug("no ONNX shape check for %s: %s", artifact, exc)
                return None
    return None
