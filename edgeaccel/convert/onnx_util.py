"""ONNX files that the installed ONNX Runtime will load: the IR version a writer stamps is not always one the
runtime reads (runtime facts: onnx 1.23 writes IR 14, onnxruntime 1.31 loads at most IR 13)."""

from __future__ import annotations

import functools
from pathlib import Path

from ..errors import ConversionError, RuntimeNotInstalledError


def import_onnx():
    try:
        import onnx
    except ImportError as exc:
        raise RuntimeNotInstalledError(f"this conversion needs the onnx package ({exc})",
                                       hint="pip install 'edgeaccel[onnx]'") from exc
    return onnx


@functools.lru_cache(maxsize=1)
def max_ir_version() -> int:
    """The newest IR version the installed ONNX Runtime loads, found by loading a one-node model (a few ms).

    Probing beats a version table: ORT's limit moves with each release and is not exposed in its API."""
    onnx = import_onnx()
    try:
        import onnxruntime as ort
    except ImportError:
        return onnx.IR_VERSION  # nothing here will load it; the writer's default is as good as any
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    for ir in range(onnx.IR_VERSION, 6, -1):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=ir)
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            return ir
        except Exception:  # ORT raises its Fail class for "Unsupported model IR version"
            continue
    return 7


def min_ir_version(model) -> int:
    """The oldest IR version that can carry the model's default-domain opset (onnx.helper.VERSION_TABLE)."""
    from onnx import helper

    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=1)
    for _release, ir, ai_onnx, *_ in helper.VERSION_TABLE:
        if ai_onnx >= opset:
            return ir
    return helper.VERSION_TABLE[-1][1]


def fit_ir_version(model, path_for_messages: Path | str = "model") -> int:
    """Lower ``model.ir_version`` to what ORT loads, if the opset allows it; returns the version set."""
    limit = max_ir_version()
    if model.ir_version <= limit:
        return model.ir_version
    needed = min_ir_version(model)
    if needed > limit:
        opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        raise ConversionError(
            f"{Path(path_for_messages).name} uses ONNX opset {opset}, which needs IR version {needed}; "
            f"the installed onnxruntime loads IR {limit} at most",
            hint="export the model with a lower opset (e.g. 17), or upgrade onnxruntime")
    model.ir_version = limit
    return limit


def save(model, path: Path) -> Path:
    """Fit the IR version, write, and run the onnx checker on the file (it refuses models that crash runtimes)."""
    onnx = import_onnx()
    fit_ir_version(model, path)
    onnx.save(model, str(path))
    try:
        onnx.checker.check_model(str(path))
    except onnx.checker.ValidationError as exc:
        raise ConversionError(f"the ONNX model written to {path.name} does not pass the onnx checker: {exc}") from exc
    return path


def loadable(src: Path, dest: Path) -> Path:
    """``src`` if ONNX Runtime loads its IR version, else a copy at ``dest`` with the IR version lowered.

    Only the version stamp changes (when the opset allows it), so the copy is the same model. A model with
    external data is returned as it is: rewriting it would pull gigabytes into memory."""
    onnx = import_onnx()
    model = onnx.load(str(src), load_external_data=False)
    if model.ir_version <= max_ir_version() or _has_external_data(model):
        return src
    fit_ir_version(model, src)
    onnx.save(model, str(dest))
    return dest


def _has_external_data(model) -> bool:
    from onnx import TensorProto

    return any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer)
