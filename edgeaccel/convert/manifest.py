"""The bundle manifest a conversion writes beside its artifacts (bundle.SCHEMA_ID): what was made, from what,
with which tools, read back through the loader's own reader before the conversion counts as done."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..modelfiles import bundle
from .._version import __version__
from ..errors import ConversionError

if TYPE_CHECKING:
    from .result import Artifact, ConvertResult
    from .sources import Source


def write_manifest(result: ConvertResult, name: str, source: Source, labels: str | None,
                   reference_note: str, pipe=None) -> None:
    import yaml

    out = result.out
    doc: dict[str, Any] = {
        "schema": bundle.SCHEMA_ID,
        "name": name,
        "artifacts": [_manifest_entry(a, out, result.check_of(a.path)) for a in result.artifacts],
        "reference": result.reference.relative_to(out).as_posix(),
    }
    if result.calibration:
        doc["calibration"] = result.calibration.relative_to(out).as_posix()
    if result.holdout:
        doc["holdout"] = result.holdout.relative_to(out).as_posix()
    if result.split:
        doc["calibration_split"] = result.split
    if labels:
        doc["labels"] = labels
    described = pipe.to_dict(with_labels=False) if pipe is not None else {}
    if described:
        doc["pipeline"] = described
    doc["notes"] = (f"made by edgeaccel {__version__} convert from {source.path.name} ({source.kind.value}); "
                    f"reference: {reference_note}; tools: {_tool_versions()}")
    # flow style for the leaf lists and mappings: the sample names and check measures stay one block each
    result.manifest.write_text(yaml.safe_dump(doc, sort_keys=False, width=120, default_flow_style=None),
                               encoding="utf-8")
    written = bundle.read_manifest(result.manifest)  # the reader the loader uses must accept what we wrote
    if written.invalid:
        path, exc = written.invalid[0]
        raise ConversionError(f"the bundle's artifact {path.name} does not load: {exc.message}")


def _manifest_entry(artifact: Artifact, out: Path, result_check: dict | None = None) -> dict:
    entry: dict[str, Any] = {"path": artifact.path.relative_to(out).as_posix(), "note": artifact.note}
    if artifact.kept_float is not None:
        entry["kept_float"] = artifact.kept_float
    if result_check is not None:
        entry["check"] = result_check
    return entry


def _tool_versions() -> str:
    found = []
    for dist in ("tensorflow-cpu", "tensorflow", "tf2onnx", "onnx", "onnxruntime", "openvino"):
        try:
            found.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ", ".join(found)
