"""What a conversion made: each artifact and the whole result (``edgeaccel convert --json``, schema
``edgeaccel.convert/1``); the manifest writer and the converter both read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import edgetpu, openvino_ir


@dataclass
class Artifact:
    target: str
    path: Path
    size_bytes: int
    note: str
    kept_float: list[dict] | None = None  # int8 artifacts: [{node, op, why}] left in float; None: not int8

    def as_dict(self) -> dict:
        found = {"target": self.target, "path": str(self.path), "bytes": self.size_bytes, "note": self.note}
        if self.kept_float is not None:
            found["kept_float"] = self.kept_float
        return found


@dataclass
class ConvertResult:
    out: Path
    manifest: Path
    reference: Path
    artifacts: list[Artifact] = field(default_factory=list)
    calibration: Path | None = None
    calibration_samples: int = 0
    holdout: Path | None = None
    holdout_samples: int = 0
    split: dict | None = None  # the manifest's calibration_split: rule, calibrated, held_out (sample names)
    reference_note: str = ""
    edgetpu: list[edgetpu.EdgeTpuReport] = field(default_factory=list)
    checks: dict[Path, dict] = field(default_factory=dict)  # artifact -> its post-conversion check
    check_note: str = ""  # why artifacts were not checked, or on what
    task: str | None = None  # the vision task the check decoded the outputs with

    def check_of(self, path: Path) -> dict | None:
        """The post-conversion check of the artifact at ``path`` (None: not checked)."""
        return next((c for p, c in self.checks.items() if p.resolve() == Path(path).resolve()), None)

    def as_dict(self) -> dict:
        return {
            "schema": "edgeaccel.convert/1",
            "out": str(self.out), "manifest": str(self.manifest), "reference": str(self.reference),
            "reference_note": self.reference_note,
            "reference_bytes": artifact_bytes(self.reference),
            "calibration": str(self.calibration) if self.calibration else None,
            "calibration_samples": self.calibration_samples,
            "holdout": str(self.holdout) if self.holdout else None,
            "holdout_samples": self.holdout_samples,
            "calibration_split": self.split,
            "check_note": self.check_note,
            "task": self.task,
            "artifacts": [{**a.as_dict(), "check": self.check_of(a.path)} for a in self.artifacts],
            "edgetpu": [r.as_dict() for r in self.edgetpu],
        }


def artifact_bytes(path: Path) -> int:
    """An artifact's bytes on disk: an OpenVINO IR counts its .bin weights too."""
    size = path.stat().st_size
    if path.suffix == ".xml" and openvino_ir.bin_path(path).is_file():
        size += openvino_ir.bin_path(path).stat().st_size
    return size
