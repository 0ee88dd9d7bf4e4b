"""Every artifact of a bundle (or one model) on every executor that reads it, evaluated on one labelled dataset,
side by side, with each artifact's drop against the bundle's float reference in points of mAP (the gate of
``edgeaccel check --max-map-drop``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EdgeAccelError, InputError
from .dataset import Dataset
from .reader import read_dataset
from .evaluate import ValResult, evaluate

SCHEMA = "edgeaccel.val/1"


@dataclass
class ValRow:
    artifact: Path
    executor: str
    is_reference: bool = False
    result: ValResult | None = None
    error: str | None = None
    drop_against: str | None = None  # "<reference> on <executor>" the drop is measured from
    drop_map50_95: float | None = None  # points (0..100): reference's mAP50-95 minus this one's
    drop_map50: float | None = None

    def as_dict(self) -> dict:
        out = {"artifact": str(self.artifact), "executor": self.executor, "reference": self.is_reference}
        if self.result is not None:
            out.update({k: v for k, v in self.result.as_dict().items() if k not in ("model", "executor")})
        if self.error:
            out["error"] = self.error
        if self.drop_against is not None:
            out["drop_points"] = {"map50_95": _r(self.drop_map50_95), "map50": _r(self.drop_map50),
                                  "against": self.drop_against}
        return out


def _r(value):
    return None if value is None else round(value, 3)


@dataclass
class BundleVal:
    path: Path
    dataset: Dataset
    reference: Path | None
    rows: list[ValRow] = field(default_factory=list)

    def as_dict(self) -> dict:
        data = self.dataset
        return {"schema": SCHEMA, "path": str(self.path),
                "dataset": {"path": str(data.source), "format": data.format, "images": len(data.images),
                            "objects": len(data.annotations), "classes": {str(k): v for k, v in data.names.items()},
                            "notes": data.notes},
                "reference": None if self.reference is None else str(self.reference),
                "rows": [r.as_dict() for r in self.rows]}

    def table(self, library: bool = False) -> str:
        head = ["artifact", "executor", "mAP50-95", "mAP50"] + (["pycocotools 50-95", "50"] if library else []) \
            + ["images", "ms/image", "drop (points)"]
        lines = [head]
        for row in self.rows:
            name = row.artifact.name + (" (reference)" if row.is_reference else "")
            if row.result is None:
                lines.append([name, row.executor, "-", "-"] + (["-", "-"] if library else [])
                             + ["-", "-", f"error: {(row.error or '').splitlines()[0][:80]}"])
                continue
            r = row.result
            extra = [_pct(r.library.map50_95), _pct(r.library.map50)] if library and r.library else \
                (["-", "-"] if library else [])
            drop = "" if row.drop_map50_95 is None else f"{row.drop_map50_95:+.1f} / {row.drop_map50:+.1f}"
            lines.append([name, row.executor, _pct(r.map50_95), _pct(r.map50)] + extra
                         + [str(r.images), f"{r.ms_per_image:.1f}" if r.ms_per_image is not None else "-", drop])
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                         for line in lines)


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def validate_bundle(path: str | os.PathLike, dataset: Dataset | str | os.PathLike, *,
                    reference: str | os.PathLike | None = None, executors: list[str] | None = None,
                    progress: bool | None = False, **options) -> BundleVal:
    """Evaluate every artifact of ``path`` (a bundle folder or manifest, a folder of artifacts, or one model) on
    each executor in ``executors`` (default: every installed one that reads its format). The reference
    (``reference``, else the manifest's) is evaluated too and comes first; each other row's drop is measured
    against the reference on the same executor when it ran there, else against its first result. ``options``
    go to ``evaluate`` (conf, iou, labels, class_map, evaluator, max_images, images_dir, cache_dir, cache)."""
    from ..modelfiles import bundle
    from .. import formats
    from ..executors.registry import runtimes
    from ..loader import executor_class

    if options.get("evaluator") == "pycocotools":
        from .pycoco import require

        require()  # once, before any model runs, instead of an error in every row
    data = dataset if isinstance(dataset, Dataset) else read_dataset(dataset, options.pop("images_dir", None))
    options.pop("images_dir", None)
    data = data.limit(options.pop("max_images", None))
    found = bundle.resolve(path)
    ref_path = Path(reference) if reference else found.reference
    artifacts = list(found.artifacts)
    if ref_path is not None:
        artifacts = [formats.describe(ref_path)] + [a for a in artifacts if a.path.resolve() != ref_path.resolve()]
    known = runtimes()
    unknown = [e for e in executors or [] if e not in known]
    if unknown:
        raise InputError(f"no executor named {', '.join(unknown)}", hint=f"choose from {', '.join(known)}")
    usable = [n for n in known if (n in executors if executors else executor_class(n).installed())]
    report = BundleVal(Path(path), data, ref_path)
    for artifact, error in found.invalid:
        report.rows.append(ValRow(artifact, "-", error=error.message))
    for info in artifacts:
        is_ref = ref_path is not None and info.path.resolve() == ref_path.resolve()
        names = [n for n in usable if info.format in known[n].formats]
        if not names:
            report.rows.append(ValRow(info.path, "-", is_ref, error="no executor here reads this format"))
        for name in names:
            row = ValRow(info.path, name, is_ref)
            try:
                row.result = evaluate(info.path, data, executor=name, progress=progress, **options)
            except EdgeAccelError as exc:
                if isinstance(exc, InputError) and not _executor_side(exc):
                    raise  # the dataset or an option is wrong: every row would say the same
                row.error = exc.message
            report.rows.append(row)
    _drops(report)
    return report


def _executor_side(exc: EdgeAccelError) -> bool:
    from ..vision.errors import TaskError

    return isinstance(exc, TaskError)  # this artifact's outputs do not decode as detections


def _drops(report: BundleVal) -> None:
    # (row, its mAP50-95, its mAP50) of each evaluated reference
    references = [(r, r.result.map50_95, r.result.map50 or 0) for r in report.rows
                  if r.is_reference and r.result is not None and r.result.map50_95 is not None]
    if not references:
        return
    for row in report.rows:
        if row.is_reference or row.result is None or row.result.map50_95 is None:
            continue
        ref, ref_map50_95, ref_map50 = next((r for r in references if r[0].executor == row.executor), references[0])
        row.drop_against = f"{ref.artifact.name} on {ref.executor}"
        row.drop_map50_95 = 100 * (ref_map50_95 - row.result.map50_95)
        row.drop_map50 = 100 * (ref_map50 - (row.result.map50 or 0))


def map_drop(path: str | os.PathLike, dataset, max_drop: float, *, reference=None, executors=None,
             **options) -> tuple[BundleVal, list[str]]:
    """The gate of ``edgeaccel check --data DATASET --max-map-drop POINTS``: every artifact evaluated as by
    ``validate_bundle``; one failure line per artifact and executor whose mAP50-95 is more than ``max_drop``
    points below the reference's, or that could not be evaluated. Needs a reference (``reference=`` or the
    bundle manifest's)."""
    report = validate_bundle(path, dataset, reference=reference, executors=executors, **options)
    if report.reference is None:
        raise InputError(f"{path} names no float reference to measure the mAP drop against",
                         hint="pass --reference FLOAT_MODEL, or check a bundle written by edgeaccel convert")
    failed = []
    refs = [r for r in report.rows if r.is_reference]
    if not any(r.result is not None for r in refs):
        failed.append(f"the reference {report.reference.name} could not be evaluated: "
                      f"{'; '.join((r.error or '').splitlines()[0] for r in refs)}")
    for row in report.rows:
        where = f"{row.artifact.name} on {row.executor}"
        if row.error:
            failed.append(f"{where}: mAP not measured: {row.error.splitlines()[0]}")
        elif row.drop_map50_95 is not None and row.drop_map50_95 > max_drop and row.result is not None:
            # _drops gives a drop only to a row with an mAP50-95
            failed.append(f"{where}: mAP50-95 {100 * (row.result.map50_95 or 0.0):.1f} is "
                          f"{row.drop_map50_95:.1f} points below the reference's ({row.drop_against}); the bound "
                          f"is {max_drop:g}")
    return report, failed


def labelled_images(dataset: str | os.PathLike | None) -> Path:
    """The folder of a labelled dataset's images, for the comparisons of `check` that take a folder of images
    (the mAP gate reads the labels itself); InputError when ``dataset`` is not a labelled dataset."""
    from .dataset import dataset_kind

    if not dataset:
        raise InputError("--max-map-drop needs --data DATASET: a labelled dataset to measure mAP on",
                         hint="give a COCO JSON file, a YOLO data.yaml, or a folder with images/ and labels/")
    kind, why = dataset_kind(dataset)
    if kind is None:
        raise InputError(f"--max-map-drop needs --data to be a labelled dataset; {dataset} is {why}",
                         hint="give a COCO JSON file, a YOLO data.yaml, or a folder with images/ and labels/")
    folders = sorted({entry.path.parent for entry in read_dataset(dataset).images})
    return folders[0]
