"""Reading a model's pipeline (``describe_pipeline``, ``pipeline_of``) from the sources ``pipeline.py`` lists, in
its order: the caller's fields, a YAML beside the model, the bundle manifest, the model's own metadata
(edgeaccel's, Ultralytics', TFLite's) and a label file beside it. Apart from ``pipeline.py`` because it reads
the bundle a path belongs to, and the bundle validates its manifest's pipeline through ``pipeline.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .pipeline import (
    LABEL_FILES_NAMED,
    LABEL_FILES_SHARED,
    PIPELINE_KEY,
    TASKS,
    ULTRALYTICS_LETTERBOXED,
    ModelPipeline,
    overlay,
    parse_imgsz,
    validate,
)


def describe_pipeline(model: str | os.PathLike | Any, user: dict | None = None, bundle: Any = None) -> ModelPipeline:
    """The pipeline of a model file (or a ModelInfo): every source above, merged field by field; ``user``
    wins over all of them, ``bundle`` is an ``edgeaccel.modelfiles.bundle.ArtifactSet`` (its manifest's pipeline and
    labels). ConfigError names the source and field that is wrong."""
    from ..modelinfo import Format, ModelInfo

    if isinstance(model, ModelInfo):
        info = model
    else:
        from .bundle import resolve

        found = resolve(model)
        if not found.artifacts:
            raise found.invalid[0][1]
        info, bundle = found.artifacts[0], bundle or found
    layers: list[tuple[str, dict]] = []
    if user:
        layers.append(("user", validate({k: v for k, v in user.items() if v is not None}, "the given options")))
    path = Path(info.path)
    sidecar = path.with_name(f"{path.stem}.edgeaccel.yaml")
    if sidecar.is_file():
        layers.append((sidecar.name, _read_sidecar(sidecar)))
    manifest = getattr(bundle, "pipeline", None)
    if manifest:
        layers.append(("the bundle manifest", validate(manifest, "the bundle manifest's pipeline")))
    if getattr(bundle, "labels", None):
        layers.append((Path(bundle.labels).name, _label_file(bundle.labels)))
    fmt = info.format
    if fmt is Format.ONNX:
        from .labels import onnx_metadata

        meta = onnx_metadata(path)
        if meta.get(PIPELINE_KEY):
            try:
                data = json.loads(meta[PIPELINE_KEY])
            except ValueError as exc:
                raise ConfigError(f"the {PIPELINE_KEY} metadata entry is not JSON: {exc}", path=str(path)) from exc
            layers.append((f"metadata_props ({PIPELINE_KEY})", validate(data, f"{path.name} {PIPELINE_KEY}")))
        ultra = _ultralytics(meta, path.name)
        if ultra:
            layers.append(("metadata_props (Ultralytics)", ultra))
    elif fmt in (Format.TFLITE, Format.EDGETPU_TFLITE):
        layers.append(("TFLite metadata", _tflite(info)))
    engine_meta = info.details.get("metadata") if fmt is Format.TENSORRT_ENGINE else None
    if isinstance(engine_meta, dict):  # Ultralytics' JSON before a TensorRT engine
        ultra = _ultralytics(_as_text(engine_meta), path.name)
        if ultra:
            layers.append(("engine metadata (Ultralytics)", ultra))
    exported = path.parent / "metadata.yaml"  # Ultralytics' OpenVINO / TFLite / SavedModel export folders
    if fmt is not Format.ONNX and exported.is_file():
        ultra = _ultralytics(_read_export_yaml(exported), path.name)
        if ultra:
            layers.append(("metadata.yaml (Ultralytics)", ultra))
    beside = label_file_beside(path)
    if beside is not None:
        layers.append((beside.name, _label_file(beside)))
    return merge(layers)


def merge(layers: list[tuple[str, dict]]) -> ModelPipeline:
    """The first layer that sets a field gives it; labels bring their offset with them."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for source, data in layers:
        for key, value in data.items():
            if key == "labels_offset" or key in values:
                continue
            values[key] = value
            sources[key] = source
            if key == "labels":
                values["labels_offset"] = data.get("labels_offset", 0)
    return ModelPipeline(**values, sources=sources)


def _read_sidecar(path: Path) -> dict:
    from ..schema import load_yaml

    data = load_yaml(path) or {}
    data = data.get("pipeline", data) if isinstance(data, dict) else data
    if isinstance(data, dict) and isinstance(data.get("labels"), str) and (path.parent / data["labels"]).is_file():
        labels = _label_file(path.parent / data["labels"])
        return {**validate({k: v for k, v in data.items() if k != "labels"}, str(path)), **labels}
    return validate(data, str(path))


def _label_file(path: str | os.PathLike) -> dict:
    from .labels import read_label_file

    labels = read_label_file(path)
    return {"labels": labels.names, "labels_offset": labels.offset} if labels.names else {}


def label_file_beside(model_path: str | os.PathLike) -> Path | None:
    """The label file beside a model by the rule in this module's docstring, or None."""
    path = Path(model_path)
    stem = path.stem.removesuffix("_edgetpu")
    for pattern in (*LABEL_FILES_NAMED, *LABEL_FILES_SHARED):
        candidate = path.with_name(pattern.format(stem=stem))
        if candidate.is_file():
            return candidate
    return None


def _read_export_yaml(path: Path) -> dict:
    from ..schema import load_yaml

    try:
        data = load_yaml(path)
    except Exception:  # not ours to police: an unreadable export file is as good as none
        return {}
    return _as_text(data) if isinstance(data, dict) else {}


def _as_text(data: dict) -> dict[str, str]:
    """Values as the text ONNX metadata_props would hold (Python literals), keys as strings."""
    return {str(k): (v if isinstance(v, str) else repr(v)) for k, v in data.items()}


def _ultralytics(meta: dict, name: str) -> dict:
    """Ultralytics' export metadata: imgsz "[640, 640]", names "{0: 'person', ...}", task, stride, kpt_shape
    (strings in ONNX metadata_props; metadata.yaml's values are read as their Python literals)."""
    import ast

    from .labels import parse_names

    out: dict[str, Any] = {}
    if meta.get("imgsz"):
        try:
            out["imgsz"] = parse_imgsz(meta["imgsz"], f"{name} metadata_props", "imgsz")
        except ConfigError:
            pass  # an unreadable size is as good as none: the model's own shape or --imgsz decide
    if meta.get("names"):
        names = parse_names(meta["names"])
        if names:
            out["labels"] = names
    task = meta.get("task")
    if task in TASKS:
        out["task"] = task
    # detect/segment/pose exports letterbox; a classifier is resized and centre-cropped (it carries a stride too)
    if task in ULTRALYTICS_LETTERBOXED or (task is None and out.get("imgsz") and "stride" in meta):
        out["letterbox"] = True
    options = {}
    for key in ("stride", "kpt_shape"):
        if meta.get(key):
            try:
                options[key] = ast.literal_eval(meta[key])
            except (ValueError, SyntaxError):
                continue
    if options:
        out["decoder_options"] = options
    if meta.get("names") and "stride" in meta:
        out["decoder_options"] = {**options, "classes": len(out.get("labels") or {})}
    return out


def _tflite(info) -> dict:
    from .labels import tflite_packed_labels
    from .metadata import tflite_normalization

    out: dict[str, Any] = {}
    if info.inputs and info.inputs[0].dtype.kind == "f":
        found = tflite_normalization(info.path, 0)
        if found:
            out["normalize"] = found
    packed = tflite_packed_labels(info.path)
    if packed is not None and packed.names:
        out["labels"], out["labels_offset"] = packed.names, packed.offset
    return out


def pipeline_of(model: Any, user: dict | None = None) -> ModelPipeline:
    """The pipeline of a loaded Model (``model.pipeline``), a ModelInfo, or nothing (an empty one), with the
    ``user``'s fields (None values ignored) laid over it."""
    from ..modelinfo import ModelInfo

    base = getattr(model, "pipeline", None) if model is not None and not isinstance(model, ModelInfo) else None
    if not isinstance(base, ModelPipeline):
        base = describe_pipeline(model) if isinstance(model, ModelInfo) else ModelPipeline()
    given = {k: v for k, v in (user or {}).items() if v is not None}
    if not given:
        return base
    return overlay(base, validate(given, "the given options"), "user")
