"""One logical model as several artifacts (m.tflite, m_edgetpu.tflite, m.onnx, an IR): a list of files, a
folder, or a small manifest (``edgeaccel-bundle.yaml``) that ``edgeaccel convert`` writes.

Manifest, schema ``edgeaccel.bundle/1``; paths are relative to the manifest's folder and may not leave it::

    schema: edgeaccel.bundle/1
    name: mobilenet_v2
    artifacts:
      - path: mobilenet_v2_int8.tflite
      - path: mobilenet_v2_int8_edgetpu.tflite
      - path: mobilenet_v2_int8.onnx
        note: QDQ, calibrated on 200 images
    reference: mobilenet_v2_float.tflite    # optional: the float original, what accuracy is checked against
    labels: labels.txt                      # optional
    calibration: calibration.npy            # optional: the samples the int8 artifacts were calibrated on
    holdout: holdout.npy                    # optional: samples held back from calibration, what `check` uses
    calibration_split: {rule: ..., calibrated: [names], held_out: [names]}   # optional: which sample went where
    pipeline:                               # optional: how images feed it (edgeaccel.modelfiles.pipeline)
      task: detect
      imgsz: [640, 640]
      letterbox: true

An artifact entry may carry ``check: {passed: true|false, reason: ..., <metrics>}``, what ``edgeaccel convert``
measured against the reference on the held-out samples: ``edgeaccel.load`` leaves an artifact whose check
failed out of the selection, with the reason, unless it is pinned (loaded alone, or the only one ``executor=``
reads), which warns.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import formats
from ..errors import ConfigError, EdgeAccelError, ModelError, UnsupportedFormatError
from ..modelinfo import ModelInfo
from ..schema import Field, load_yaml, validate

log = logging.getLogger("edgeaccel.bundle")

MANIFEST = "edgeaccel-bundle.yaml"
SCHEMA_ID = "edgeaccel.bundle/1"
MANIFEST_SCHEMA = {
    "schema": Field(str, required=True, choices=(SCHEMA_ID,)),
    "name": Field(str),
    "artifacts": Field([{"path": Field(str, required=True), "note": Field(str),
                         # int8 artifacts: the nodes convert left in float, and why
                         "kept_float": Field([{"node": Field(str, required=True), "op": Field(str),
                                               "why": Field(str)}]),
                         # what convert's check measured on the held-out samples (edgeaccel.selection.failed_artifacts)
                         "check": Field(dict)}], required=True),
    "reference": Field(str),
    "labels": Field(str),
    "calibration": Field(str),
    "holdout": Field(str),
    "calibration_split": Field({"rule": Field(str), "calibrated": Field([str]), "held_out": Field([str])}),
    "notes": Field(str),
    "pipeline": Field(dict),  # checked field by field by edgeaccel.modelfiles.pipeline.validate
}


@dataclass
class ArtifactSet:
    """The artifacts of one model, those that failed validation (kept with their reason), and the extras."""

    name: str
    artifacts: list[ModelInfo] = field(default_factory=list)
    invalid: list[tuple[Path, EdgeAccelError]] = field(default_factory=list)
    reference: Path | None = None
    labels: Path | None = None
    calibration: Path | None = None
    holdout: Path | None = None
    notes: dict[Path, str] = field(default_factory=dict)
    pipeline: dict | None = None  # the manifest's pipeline mapping (edgeaccel.modelfiles.pipeline)
    checks: dict[Path, dict] = field(default_factory=dict)  # artifact -> the manifest's check entry
    pinned: bool = False  # one model file named by the caller (not a folder, list or manifest)

    def failed_check(self, path: Path) -> str | None:
        """Why the artifact at ``path`` failed its recorded check, or None (passed, or never checked)."""
        entry = self.checks.get(Path(path))
        if not entry or entry.get("passed") is not False:
            return None
        return str(entry.get("reason") or "it failed the check against the float reference")


def resolve(source: str | os.PathLike | Sequence[str | os.PathLike],
            memo: formats.ValidationMemo | None = None) -> ArtifactSet:
    """A model file, a folder of artifacts, a manifest, or a list of files -> the artifacts, each validated."""
    if isinstance(source, (list, tuple)):
        if not source:
            raise UnsupportedFormatError("an empty list of models was given")
        paths = [Path(p) for p in source]
        return one_model(_describe_all(paths[0].stem, paths, strict=True, memo=memo), "list")
    path = Path(source)  # type: ignore[arg-type]  # lists and tuples went above; Path() refuses other sequences
    if path.is_dir():
        if (path / MANIFEST).is_file():
            return read_manifest(path / MANIFEST, memo)
        if (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file():
            return ArtifactSet(path.name, [formats.describe(path)])
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        found = _describe_all(path.name, files, strict=False, memo=memo)
        if not found.artifacts and not found.invalid:
            raise UnsupportedFormatError(f"the folder {path} holds no model file",
                                         hint="put .tflite/.onnx/.xml artifacts in it, or an edgeaccel-bundle.yaml")
        return one_model(found, f"folder {path}")
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return read_manifest(path, memo)
    found = ArtifactSet(path.stem, [formats.describe(path, memo)], pinned=True)
    found.checks = _sibling_check(path)
    return found


def _sibling_check(path: Path) -> dict[Path, dict]:
    """The check a bundle's manifest beside ``path`` recorded for it: a failed artifact loaded alone (pinned)
    still runs, but the loader warns. A manifest that cannot be read is no reason to refuse the file."""
    manifest = path.parent / MANIFEST
    if not manifest.is_file():
        return {}
    try:
        data = load_yaml(manifest)
        validate(data, MANIFEST_SCHEMA, str(manifest))
    except ConfigError as exc:
        log.debug("not reading the check of %s from %s: %s", path.name, manifest, exc)
        return {}
    for entry in data["artifacts"]:
        if (path.parent / entry["path"]).resolve() == path.resolve() and entry.get("check"):
            return {path: dict(entry["check"])}
    return {}


def read_manifest(path: Path, memo: formats.ValidationMemo | None = None) -> ArtifactSet:
    data = load_yaml(path)
    validate(data, MANIFEST_SCHEMA, str(path))
    folder = path.parent
    result_paths = [_inside(folder, entry["path"], path, f"artifacts[{i}].path")
                    for i, entry in enumerate(data["artifacts"])]
    found = _describe_all(data.get("name") or folder.name, result_paths, strict=False, memo=memo)
    for i, (entry, p) in enumerate(zip(data["artifacts"], result_paths, strict=True)):
        if entry.get("note"):
            found.notes[p] = entry["note"]
        if entry.get("check"):
            if not isinstance(entry["check"].get("passed"), (bool, type(None))):
                raise ConfigError("check.passed must be true, false or null", path=str(path),
                                  key=f"artifacts[{i}].check.passed")
            found.checks[p] = dict(entry["check"])
    for key in ("reference", "labels", "calibration", "holdout"):
        if data.get(key):
            setattr(found, key, _inside(folder, data[key], path, key))
    if data.get("pipeline"):
        from .pipeline import validate as validate_pipeline

        validate_pipeline(data["pipeline"], f"{path}:pipeline")  # a wrong field fails the load, named
        found.pipeline = data["pipeline"]
    if not found.artifacts and found.invalid:
        raise found.invalid[0][1]
    return found


def _inside(folder: Path, relative: str, manifest: Path, key: str) -> Path:
    candidate = Path(relative)
    resolved = (folder / candidate).resolve()
    if candidate.is_absolute() or folder.resolve() not in resolved.parents:
        raise ConfigError(f"{relative!r} leaves the bundle's folder", path=str(manifest), key=key,
                          hint="keep every artifact beside the manifest")
    return folder / candidate


def _describe_all(name: str, paths: list[Path], strict: bool, memo=None) -> ArtifactSet:
    found = ArtifactSet(name)
    for p in paths:
        try:
            found.artifacts.append(formats.describe(p, memo))
        except UnsupportedFormatError as exc:
            if strict:
                raise
            log.debug("skipping %s: %s", p, exc.message)  # a README or labels file in a model folder
            if p.suffix.lower() in (".tflite", ".onnx", ".xml"):
                found.invalid.append((p, exc))
        except ModelError as exc:
            if strict and len(paths) == 1:
                raise
            found.invalid.append((p, exc))
    return found


def one_model(found: ArtifactSet, what: str) -> ArtifactSet:
    """The artifacts of a folder or list, checked to be one model: the same number of inputs and outputs, and
    input shapes that agree (a dynamic dimension agrees with any size; NCHW and NHWC twins agree, their sizes
    being the same) and the same output sizes. Unrelated models side by side are refused, with their
    signatures, instead of the first one running and another "falling back" on inputs it cannot take."""
    groups: list[list[ModelInfo]] = []
    for info in found.artifacts:
        for group in groups:
            if _same_signature(group[0], info):
                group.append(info)
                break
        else:
            groups.append([info])
    if len(groups) <= 1:
        return found
    lines = [f"  - {', '.join(i.path.name for i in group)}: {_signature(group[0])}" for group in groups[:8]]
    if len(groups) > 8:
        lines.append(f"  ... and {len(groups) - 8} more")
    raise ModelError(f"the {what} holds {len(groups)} different models, not the artifacts of one:\n"
                     + "\n".join(lines),
                     hint="pass one model file, or give a folder/list only the artifacts of one model "
                     "(m.tflite, m_edgetpu.tflite, m.onnx, an IR of it)")


def _same_signature(a: ModelInfo, b: ModelInfo) -> bool:
    if not a.inputs and not a.outputs or not b.inputs and not b.outputs:  # SavedModel: read by TensorFlow
        return True
    if len(a.inputs) != len(b.inputs) or len(a.outputs) != len(b.outputs):
        return False
    if not all(_dims_agree(x.shape, y.shape) for x, y in zip(a.inputs, b.inputs, strict=True)):
        return False
    return sorted(_size(t.shape) for t in a.outputs) == sorted(_size(t.shape) for t in b.outputs)


def _dims_agree(x, y) -> bool:
    if len(x) != len(y):
        return False
    known_x = sorted(d for d in x if d is not None)
    known_y = sorted(d for d in y if d is not None)
    if None not in x and None not in y:
        return known_x == known_y  # equal, or the same dimensions in another layout
    return all(d1 is None or d2 is None or d1 == d2 for d1, d2 in zip(x, y, strict=True)) or known_x == known_y


def _size(shape) -> int:
    """Elements in a tensor of that shape; -1 for a dynamic one (sortable beside the known sizes)."""
    if any(d is None for d in shape):
        return -1
    n = 1
    for d in shape:
        n *= d
    return n


def _signature(info: ModelInfo) -> str:
    def dims(t) -> str:
        return "x".join("?" if d is None else str(d) for d in t.shape) or "scalar"

    return (f"inputs {', '.join(dims(t) for t in info.inputs)}; outputs {', '.join(dims(t) for t in info.outputs)}")
