"""ONNX validation before a runtime reads the file: external data confined to the model's folder, and
``onnx.checker`` with full_check where the ``onnx`` package is installed (it refuses, for one, the one-input
Conv that makes OpenVINO's read_model segfault).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from ..errors import MEMORY_HINT, ModelLoadError, ModelValidationError, looks_out_of_memory
from .onnx import OnnxModel

log = logging.getLogger("edgeaccel.formats")


def check(path: Path, model: OnnxModel) -> tuple[tuple[Path, ...], bool]:
    """Validate; return the external data files the model reads (all inside its folder), and whether shape
    inference found every sliding-window operator's input with static spatial dimensions (see
    ``static_windows``)."""
    extra = _external_files(path, model)
    _check_graph(model)
    static_windows = _full_check(path, shapeless_io=any(v.dims is None for v in (*model.inputs, *model.outputs)))
    return extra, static_windows


def _external_files(path: Path, model: OnnxModel) -> tuple[Path, ...]:
    folder = path.resolve().parent
    files = []
    for location in sorted(model.external_locations):
        if not location or any(ord(c) < 32 for c in location):
            # a NUL makes every path call raise ValueError; no real file is named like that
            _refuse(f"external data location {location!r} is empty or holds control characters")
        candidate = Path(location)
        if candidate.is_absolute() or ".." in candidate.parts:
            _refuse(f"external data location {location!r} leaves the model's folder")
        resolved = (folder / candidate).resolve()
        if folder not in resolved.parents:
            _refuse(f"external data {location!r} resolves to {resolved}, outside {folder} (a symlink?)")
        if not resolved.is_file():
            raise ModelValidationError(
                f"the ONNX model reads external data from {location!r}, which is missing next to {path.name}",
                hint="copy the model together with its external data files",
            )
        files.append(resolved)
    for init in model.initializers.values():
        if not init.external:
            continue
        for key in ("offset", "length"):
            value = init.external.get(key, "0")
            if not value.isdigit():
                _refuse(f"initializer {init.name!r} has external data {key}={value!r}")
    return tuple(files)


def _refuse(message: str) -> None:
    raise ModelValidationError(
        f"ONNX model refused: {message}",
        hint="external data must be stored beside the model, by a relative path inside its folder",
    )


def _check_graph(model: OnnxModel) -> None:
    """Every name the top-level graph reads must be defined in it: a dangling name crashes some runtimes."""
    if not model.outputs:
        raise ModelValidationError("the ONNX graph declares no outputs", hint="export the model again")
    defined = {v.name for v in model.inputs} | set(model.initializers) | {""}
    for node in model.nodes:
        defined.update(node.outputs)
    for index, node in enumerate(model.nodes):
        if not node.op_type:
            raise ModelValidationError(f"ONNX node {index} has no op_type", hint="export the model again")
        missing = [name for name in node.inputs if name not in defined]
        if missing:
            raise ModelValidationError(
                f"ONNX node {index} ({node.op_type}) reads {missing[0]!r}, which nothing in the graph defines",
                hint="the model is corrupted; export it again",
            )
    for out in model.outputs:
        if out.name not in defined:
            raise ModelValidationError(f"ONNX graph output {out.name!r} is produced by no node")


# A single tensor above this, as shape inference sees it, is not an edge model: it is a request for gigabytes.
MAX_TENSOR_BYTES = 4 << 30
_ELEM_BYTES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 14: 8, 15: 16, 16: 2,
               17: 1, 18: 1, 19: 1, 20: 1, 21: 1, 22: 1, 23: 1}


def _check_inferred_sizes(path: Path, model=None) -> bool:
    """Shape inference with data propagation (constants such as a ConstantOfShape's shape are followed) and a
    cap on every tensor it sizes. Measured: ConstantOfShape([100000, 100000]) passes the checker and makes ORT
    and OpenVINO allocate 40 GB at load; without an address-space limit that ends with the OOM killer.
    ``model``: the ModelProto to infer on (the file's, read again, by default)."""
    import onnx
    from onnx import shape_inference

    try:
        if model is None:
            model = onnx.load(os.fspath(path), load_external_data=False)
        inferred = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as exc:  # inference is a second opinion here; the checker already passed the model
        log.info("shape inference failed on %s (%s); sizes left to the runtime", path.name, exc)
        return False
    graph = inferred.graph
    static_windows = _check_windows(graph) and not any(_window_ops(f.node) for f in inferred.functions)
    for value in (*graph.input, *graph.value_info, *graph.output):
        tensor_type = value.type.tensor_type
        if not tensor_type.HasField("shape"):
            continue
        count = 1
        for dim in tensor_type.shape.dim:
            count *= dim.dim_value if dim.HasField("dim_value") and dim.dim_value > 0 else 1
        size = count * _ELEM_BYTES.get(tensor_type.elem_type, 1)
        if size > MAX_TENSOR_BYTES:
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor_type.shape.dim]
            raise ModelValidationError(
                f"ONNX model refused: tensor {value.name!r} would be {dims} = {size / 2**30:.1f} GiB, above the "
                f"{MAX_TENSOR_BYTES >> 30} GiB cap",
                hint="a constant in the model asks the runtime for an absurd allocation; the file is corrupted or "
                "hostile",
            )
    return static_windows


# Sliding-window operators: ORT's NCHWc kernels (ORT_ENABLE_ALL) divide by an output extent, so a window
# larger than its input kills the process with SIGFPE (measured: MaxPool k=3 s=2 on a static H=1, 16 channels).
_WINDOW_OPS = frozenset({"Conv", "ConvInteger", "QLinearConv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"})


def _dims(value) -> list[int | None] | None:
    """A value's inferred dimensions (None where symbolic or unknown), or None when its rank is unknown."""
    tensor_type = value.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]


def _window_ops(nodes) -> bool:
    """True when these nodes, or graphs nested in them (If, Loop, Scan bodies), hold a sliding-window operator."""
    for node in nodes:
        if node.op_type in _WINDOW_OPS:
            return True
        for attribute in node.attribute:
            for graph in (*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs):
                if _window_ops(graph.node):
                    return True
    return False


def _check_windows(graph) -> bool:
    """Refuse a window larger than its input; return whether every window operator's input has static
    spatial dimensions (ONNX Runtime may then run at ORT_ENABLE_ALL, as it does by default: runtime facts, the
    SIGFPE needs a spatial input smaller than the window, which a static input checked here cannot become)."""
    shapes = {value.name: _dims(value) for value in (*graph.input, *graph.value_info, *graph.output)}
    static = True
    for node in graph.node:
        if node.op_type not in _WINDOW_OPS or not node.output:
            if any(attribute.HasField("g") or attribute.graphs for attribute in node.attribute) \
                    and _window_ops([node]):
                static = False  # inside a subgraph: not followed here
            continue
        dims = shapes.get(node.output[0]) or []
        if any(d is not None and d <= 0 for d in dims[2:]):
            raise ModelValidationError(
                f"ONNX model refused: {node.op_type} {node.name or node.output[0]!r} has a window larger than "
                f"its input (output {dims}): ONNX Runtime divides by that extent and dies with SIGFPE",
                hint="the model's kernel, stride or input size is wrong for this input size; export it again",
            )
        inputs = shapes.get(node.input[0]) if node.input else None
        if inputs is None or len(inputs) < 3 or any(d is None for d in inputs[2:]):
            static = False
    return static


def _windows_proven(graph) -> bool:
    """Every window operator of the graph has known spatial input dimensions and a positive output extent, and
    none hides in a subgraph or function."""
    shapes = {value.name: _dims(value) for value in (*graph.input, *graph.value_info, *graph.output)}
    for node in graph.node:
        if node.op_type not in _WINDOW_OPS:
            if _window_ops([node]):
                return False
            continue
        inputs = shapes.get(node.input[0]) if node.input else None
        outputs = shapes.get(node.output[0]) if node.output else None
        for dims in (inputs, outputs):
            if dims is None or len(dims) < 3 or any(d is None or d <= 0 for d in dims[2:]):
                return False
    return True


class WindowGuard:
    """For a model whose window operators see dynamic spatial sizes: whether ORT_ENABLE_ALL is safe for one
    set of input shapes. runtime facts: at that level a spatial input smaller than a window kills the process with
    SIGFPE. Shape inference with the inputs' real shapes proves it safe (every window's input size known, every
    output extent positive) or does not; the verdict is kept per shape set."""

    MAX_VERDICTS = 256

    def __init__(self, path: Path, input_names) -> None:
        import threading

        import onnx

        self._onnx = onnx
        self._path = path
        self._names = list(input_names)
        self._proto: Any = None  # the onnx.ModelProto, read on first use (onnx is imported lazily)
        self._verdicts: dict[tuple, bool] = {}
        self._lock = threading.Lock()

    def safe(self, shapes: tuple) -> bool:
        verdict = self._verdicts.get(shapes)
        if verdict is None:
            with self._lock:
                verdict = self._verdicts.get(shapes)
                if verdict is None:
                    verdict = self._judge(shapes)
                    if len(self._verdicts) >= self.MAX_VERDICTS:
                        self._verdicts.clear()
                    self._verdicts[shapes] = verdict
        return verdict

    def _judge(self, shapes: tuple) -> bool:
        from onnx import shape_inference

        try:
            if self._proto is None:
                self._proto = self._onnx.load(os.fspath(self._path), load_external_data=False)
            model = self._onnx.ModelProto()
            model.CopyFrom(self._proto)
            given = dict(zip(self._names, shapes, strict=True))
            for value in model.graph.input:
                if value.name in given and value.type.HasField("tensor_type"):
                    shape = value.type.tensor_type.shape
                    shape.ClearField("dim")
                    for d in given[value.name]:
                        shape.dim.add().dim_value = int(d)
            inferred = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
            return _windows_proven(inferred.graph) and not any(_window_ops(f.node) for f in inferred.functions)
        except Exception as exc:  # not proven: the caller takes the safe path
            log.info("window sizes of %s not proven for %s: %s", self._path.name, shapes, exc)
            return False


def _full_check(path: Path, shapeless_io: bool = False) -> bool:
    try:
        import onnx  # noqa: F401  (the `onnx` extra)
        from onnx import checker
    except ImportError:
        log.info("onnx is not installed: %s validated structurally only (install edgeaccel[onnx])", path.name)
        return False
    inferred_on = None
    try:
        try:
            if shapeless_io:
                _check_in_two_parts(path)
            else:
                checker.check_model(os.fspath(path), full_check=True)
        except Exception as exc:
            if "existing shape differ" not in str(exc):
                raise
            # A shape the file declares for an intermediate or output tensor contradicts what inference
            # computes. ONNX Runtime and OpenVINO treat such declarations as hints and run the model
            # (measured: a Relu output declared [2, 5] or [6] for a [2, 3] input); stale declarations are
            # what graph edits leave behind. Checked again without them: every other error still refuses.
            log.info("%s declares shapes that inference contradicts (%s); checked without them", path.name,
                     str(exc).strip().splitlines()[-1][:200])
            inferred_on = _check_in_two_parts(path, drop_declared_shapes=True)
    except Exception as exc:  # checker raises ValidationError, InferenceError and others
        if looks_out_of_memory(exc):  # measured under an address-space limit: std::bad_alloc, not a bad model
            raise ModelLoadError(f"could not check {path.name}: the ONNX checker ran out of memory",
                                 hint=MEMORY_HINT) from exc
        text = str(exc).strip().splitlines()
        raise ModelValidationError(
            f"ONNX checker refused {path.name}: {text[0] if text else type(exc).__name__}",
            hint="the model is invalid ONNX; re-export it (onnx.checker.check_model(path, full_check=True) "
            "shows the full report)",
        ) from exc
    return _check_inferred_sizes(path, inferred_on)


def _check_in_two_parts(path: Path, drop_declared_shapes: bool = False):
    """What ``check_model(path, full_check=True)`` does, in its two parts, for the valid models it refuses:
    - graph inputs or outputs that declare no shape: the checker insists on one ("Field 'shape' of 'type' is
      required but missing"), but an unknown rank is valid ONNX that ONNX Runtime and OpenVINO load (ONNX
      GraphSurgeon writes such graphs). The structural check runs on a copy given empty shapes there;
    - ``drop_declared_shapes``: the shapes declared for intermediate values and graph outputs (not their types)
      are left out of the strict shape inference, which then checks the graph from its inputs and constants.
    Returns the ModelProto inference ran on."""
    import onnx
    from onnx import checker, helper, shape_inference

    model = onnx.load(os.fspath(path), load_external_data=False)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for value in (*copy.graph.input, *copy.graph.output):
        if value.type.HasField("tensor_type") and not value.type.tensor_type.HasField("shape"):
            value.type.tensor_type.shape.SetInParent()
    for tensor in copy.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            # Checked from bytes, the checker would look for external data in the working directory; its
            # files were checked by _external_files (relative, inside the model's folder, regular files). The
            # structural check reads no values, so a one-element stand-in keeps its name and type.
            tensor.ClearField("external_data")
            tensor.data_location = onnx.TensorProto.DEFAULT
            del tensor.dims[:]
            tensor.raw_data = b"\0" * helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    checker.check_model(copy, full_check=False)
    if drop_declared_shapes:
        for value in (*model.graph.value_info, *model.graph.output):
            if value.type.HasField("tensor_type"):
                value.type.tensor_type.ClearField("shape")
    shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    return model
