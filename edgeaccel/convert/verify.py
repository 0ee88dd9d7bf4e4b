"""``edgeaccel check``: every artifact of a bundle against its float reference, on every executor that runs it.

For each (artifact, executor): agreement with the reference on the calibration samples (top-1 agreement for a
classifier, max and mean absolute error of every output after dequantizing), file size against the
reference's, and latency. Artifacts and references are opened through ``edgeaccel.load(path, executor=...)``,
exactly as an application would open them; one model is open at a time, and timing starts after a pause, so that
a runtime's threads still busy with the previous model (ONNX Runtime's spin after a run, where a caller's
session_config turns its stop off: runtime facts) do not slow the next one.

The reference runs on the executor ``edgeaccel.load`` picks for it, at its own precision (f32 for float math):
never bf16, which would make the reference itself drift.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..modelfiles import bundle
from .. import formats
from ..errors import ConversionError, EdgeAccelError, NoExecutorError
from ..modelinfo import Format, ModelInfo
from . import calibration as calib_mod
from . import edgetpu

log = logging.getLogger("edgeaccel.check")

DEFAULT_RUNS = 20
_SPIN_PAUSE_S = 0.05  # lets another runtime's worker threads go idle before a timed block


@dataclass
class Row:
    artifact: Path
    format: str
    executor: str | None
    size_bytes: int
    size_ratio: float | None  # reference bytes / artifact bytes: 4.0 means four times smaller
    is_reference: bool = False
    samples: int = 0
    top1_agreement: float | None = None
    max_abs_error: float | None = None
    mean_abs_error: float | None = None
    rel_error: float | None = None  # worst output's ||artifact - reference|| / ||reference|| over the samples
    latency_ms: dict | None = None
    error: str | None = None
    load_failed: bool = False  # the executor could not open the artifact (another device may): not held against it
    task_metrics: dict | None = None  # --task: agreement of decoded results (edgeaccel.agreement.tasks)
    task_error: str | None = None  # it ran, but its outputs could not be decoded as the reference's task

    def as_dict(self) -> dict:
        return {"artifact": str(self.artifact), "format": self.format, "executor": self.executor,
                "reference": self.is_reference, "bytes": self.size_bytes, "size_ratio": _round(self.size_ratio, 3),
                "samples": self.samples, "top1_agreement": _round(self.top1_agreement, 4),
                "max_abs_error": _round(self.max_abs_error, 6), "mean_abs_error": _round(self.mean_abs_error, 6),
                "rel_error": _round(self.rel_error, 6), "latency_ms": self.latency_ms, "error": self.error,
                "task_metrics": self.task_metrics, "task_error": self.task_error}


@dataclass
class CheckReport:
    source: Path
    reference: Path
    reference_executor: str
    data: str
    samples: int
    classifier: bool
    rows: list[Row] = field(default_factory=list)
    edgetpu: list[edgetpu.EdgeTpuReport] = field(default_factory=list)
    task: str | None = None  # the vision task whose decoded results were compared (--task)
    data_kind: str = "given"  # "held-out", "calibration" (no held-out set: said in notes) or "given" (--data)
    notes: list[str] = field(default_factory=list)  # what the reader must know about how it was checked

    def row(self, artifact: str | Path, executor: str | None = None) -> Row:
        """The row of an artifact (by path or file name), on ``executor`` or its first."""
        name = Path(artifact).name
        for r in self.rows:
            if r.artifact.name == name and (executor is None or (r.executor or "").split(":")[0] == executor):
                return r
        raise KeyError(f"no row for {name} on {executor or 'any executor'}")

    def as_dict(self) -> dict:
        return {"schema": "edgeaccel.check/1", "source": str(self.source), "reference": str(self.reference),
                "reference_executor": self.reference_executor, "data": self.data, "samples": self.samples,
                "data_kind": self.data_kind, "notes": list(self.notes),
                "classifier": self.classifier, "task": self.task, "rows": [r.as_dict() for r in self.rows],
                "edgetpu": [r.as_dict() for r in self.edgetpu]}

    def table(self) -> str:
        head = ("artifact", "executor", "size", "vs reference", "top-1" if self.classifier else "", "rel err",
                "max err", "mean err", "p50 ms")
        lines = [[r.artifact.name + (" (ref)" if r.is_reference else ""), r.executor or "-", _mb(r.size_bytes),
                  size_vs_reference(r.size_ratio), _fmt(r.top1_agreement, "{:.1%}") if self.classifier else "",
                  _fmt(r.rel_error, "{:.3g}"), _fmt(r.max_abs_error, "{:.4g}"), _fmt(r.mean_abs_error, "{:.4g}"),
                  _fmt((r.latency_ms or {}).get("p50"), "{:.3f}")] for r in self.rows]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *lines, strict=True)]
        out = ["  ".join(str(x).ljust(w) for x, w in zip(head, widths, strict=True)).rstrip()]
        for r, cells in zip(self.rows, lines, strict=True):
            out.append("  ".join(str(x).ljust(w) for x, w in zip(cells, widths, strict=True)).rstrip())
            if r.task_metrics:
                out.append(f"    {self.task}: " + ", ".join(f"{k} {_fmt(v, '{:.4g}')}"
                                                              for k, v in r.task_metrics.items()))
            if r.task_error:
                out.append(f"    {self.task}: {r.task_error}")
            if r.error:
                out.append(f"    error: {r.error.splitlines()[0]}")
        return "\n".join(out)


def check(path: str | os.PathLike, *, reference: str | os.PathLike | None = None,
          data: str | os.PathLike | None = None, normalize: str | None = None,
          executors: list[str] | None = None, runs: int = DEFAULT_RUNS, warmup: int = 2,
          max_samples: int | None = None, cache_dir: str | os.PathLike | None = None,
          cache: bool = True, task: str | None = "auto", labels=None,
          imgsz: int | tuple[int, int] | str | None = None, letterbox: bool | None = None) -> CheckReport:
    """Check the bundle (or model) at ``path``; ``reference`` and ``data`` override the manifest's.
    Samples: ``data``, else the bundle's held-out samples (never used to calibrate), else its calibration
    samples, which the report's ``notes`` then say. ``runs=0`` skips the latency.
    ``cache_dir``/``cache`` are edgeaccel.load's (compiled models; ``cache=False`` keeps nothing).
    ``task``: "auto" (the default: the bundle's or model's metadata, else recognized from the outputs; none
    recognized is a note, not an error), "detect", "segment", "pose", "classify", or None / "none" for raw
    tensors only: every output is decoded as that vision task and the results compared, pooled over the
    samples (precision/recall of boxes, mIoU, keypoint distance, top-1) in ``task_metrics``.
    Images in ``data`` are fed the way the reference's pipeline says (``edgeaccel.modelfiles.pipeline``: the
    bundle manifest's, the model's metadata...), ``imgsz`` and ``letterbox`` overriding it; the pipeline's
    task is the one "auto" decodes."""
    from ..executors.registry import runtimes
    from ..selection.failed_artifacts import RECHECKING
    from ..loader import executor_class
    from ..loader import load as plain_load
    from ..options import RuntimeOptions, SelectionOptions

    def load(path, executor: str | None = None, device: str | None = None):  # strict: a failure is the row's
        token = RECHECKING.set(True)  # each artifact is opened alone on purpose: no "pinned a failed one" warning
        try:
            return plain_load(path, executor=executor, device=device, selection=SelectionOptions(strict=True),
                              runtime=RuntimeOptions(cache_dir=cache_dir, cache=cache))
        finally:
            RECHECKING.reset(token)

    found = bundle.resolve(path)
    ref_path = Path(reference) if reference else found.reference
    if ref_path is None:
        raise ConversionError(f"{path} names no float reference to check against",
                              hint="pass --reference FLOAT_MODEL, or check a bundle written by edgeaccel convert")
    data_path, data_kind, notes = _samples_to_check(path, data, found)
    if task == "none":
        task = None
    # the reference runs on the CPU: exact and the same on every machine (a GPU's TF32 or a provider that
    # cannot load there would make it neither); one no CPU executor reads runs where it can, said in the notes
    try:
        opened = load(ref_path, device="CPU")
    except NoExecutorError:
        opened = load(ref_path)
        notes.append(f"the reference has no CPU executor here: it ran on {opened.executor.name}")
    with opened as ref_model:
        from ..modelfiles.describe import describe_pipeline, pipeline_of

        ref_executor = ref_model.executor.name
        if found.pipeline or found.labels:  # the bundle's description is the reference's too
            ref_model._pipeline = describe_pipeline(ref_model.info, bundle=found)
        pipeline = pipeline_of(ref_model, {"imgsz": imgsz, "letterbox": letterbox})
        samples = calib_mod.load(data_path, ref_model.inputs, normalize=normalize, max_samples=max_samples,
                                 pipeline=pipeline)
        expected = [_as_float(ref_model.run(sample, dequantize=True)) for sample in samples.samples]
        task_check = _task_check(ref_model, task, labels, notes)
        if task_check is not None:
            task_check.reference(expected)
    classifier = _is_classifier(expected[0][0])
    ref_info = formats.describe(ref_path)
    report = CheckReport(Path(path), ref_path, ref_executor, samples.source, len(samples), classifier,
                         task=task_check.task.name if task_check else None, data_kind=data_kind, notes=notes)
    artifacts = [ref_info] + [a for a in found.artifacts if a.path.resolve() != ref_path.resolve()]
    for artifact, error in [(p, e) for p, e in found.invalid]:
        report.rows.append(Row(artifact, "?", None, 0, None, error=error.message))
    known = runtimes()
    # Runtimes asked for by name are measured even when missing (the row says why); otherwise only those
    # installed here: a machine without OpenVINO is not a failed check.
    usable = [n for n in known if (n in executors if executors else executor_class(n).installed())]
    for info in artifacts:
        names = [n for n in usable if info.format in known[n].formats]
        if not names:
            report.rows.append(Row(info.path, info.format.value, None, info.size_bytes,
                                   _ratio(ref_info, info), info is ref_info,
                                   error="no executor here reads this format"))
        for name in names:
            report.rows.append(_measure(info, name, ref_info, samples, expected, classifier, runs, warmup, load,
                                        task_check))
        if info.format is Format.TFLITE and info is not ref_info:
            report.edgetpu.append(edgetpu.readiness(info.path))
    return report


def _samples_to_check(path, data, found: bundle.ArtifactSet) -> tuple[Path, str, list[str]]:
    """--data, else the held-out samples, else (saying so) the calibration samples."""
    if data:
        return Path(data), "given", []
    if found.holdout is not None:
        return found.holdout, "held-out", []
    if found.calibration is not None:
        return found.calibration, "calibration", [
            "no held-out samples in this bundle (made before convert held samples back, or from a single "
            "calibration sample): compared on the calibration samples the artifacts were quantized on, which "
            "flatters them; pass --data with other samples"]
    raise ConversionError(f"{path} carries no samples to compare on",
                          hint="pass --data with images or a .npy of inputs")


def _task_check(ref_model, task: str | None, labels, notes: list[str]):
    """The task comparison, or None: with task "auto", a model no task fits is gated on raw tensors, noted."""
    if task is None:
        return None
    from ..agreement.check import TaskCheck
    from ..vision.errors import TaskError

    try:
        return TaskCheck(ref_model, task, labels)
    except TaskError as exc:
        if task != "auto":
            raise
        notes.append(f"no vision task recognized ({exc.message.split(': ', 1)[-1]}): gated on the outputs' "
                     "relative error only; pass --task to decode them")
        return None


def _measure(info: ModelInfo, executor: str, ref_info: ModelInfo, samples, expected, classifier: bool,
             runs: int, warmup: int, load, task_check=None) -> Row:
    row = Row(info.path, info.format.value, executor, info.size_bytes, _ratio(ref_info, info),
              is_reference=info is ref_info)
    try:
        model = load(info.path, executor=executor)
    except EdgeAccelError as exc:
        row.error, row.load_failed = exc.message, True
        return row
    with model:
        row.executor = model.executor.name
        try:
            got = [_as_float(model.run(_fit(sample, model), quantize=True, dequantize=True))
                   for sample in samples.samples]
            _compare(row, got, expected, classifier)
            if task_check is not None:
                try:
                    row.task_metrics = task_check.measure(model, got)
                except EdgeAccelError as exc:  # it ran, but what it answered is not the task's results
                    row.task_error = (f"its outputs do not decode as {task_check.task.name} results like the "
                                      f"reference's: {exc.message.splitlines()[0]}")
            if runs > 0:
                row.latency_ms = _latency(model, _fit(samples.samples[0], model), runs, warmup)
        except EdgeAccelError as exc:
            row.error = exc.message
    return row


def _fit(sample: list[np.ndarray], model) -> list[np.ndarray]:
    """The reference's sample for this artifact: same values; float inputs of a float artifact keep their
    dtype, and float inputs of a quantized artifact are quantized by Model.run(quantize=True)."""
    fitted = []
    for array, spec in zip(sample, model.inputs, strict=True):
        if array.dtype != spec.dtype and array.dtype.kind == "f" and spec.dtype.kind == "f":
            array = array.astype(spec.dtype)
        fitted.append(array)
    return fitted


def _compare(row: Row, got: list[list[np.ndarray]], expected: list[list[np.ndarray]], classifier: bool) -> None:
    """The row's figures through ``agreement.tensors`` (``ErrorSums`` per output, pooled over samples)."""
    from ..agreement.tensors import ErrorSums

    row.samples = len(got)
    sums: dict[int, ErrorSums] = {}
    agree = 0
    for outs, refs in zip(got, expected, strict=True):
        if len(outs) != len(refs):
            raise ConversionError(f"{row.artifact.name} has {len(outs)} outputs, the reference {len(refs)}")
        for k, (out, ref) in enumerate(zip(outs, refs, strict=True)):
            if out.size != ref.size:
                raise ConversionError(f"{row.artifact.name}: an output has {out.size} values, the reference's "
                                      f"{ref.size}")
            sums.setdefault(k, ErrorSums()).add(ref, out)
        if classifier:
            agree += int(np.argmax(outs[0]) == np.argmax(refs[0]))
    row.max_abs_error = max((e.max_abs for e in sums.values()), default=0.0)
    row.mean_abs_error = sum(e.abs_sum for e in sums.values()) / max(sum(e.count for e in sums.values()), 1)
    row.rel_error = max((e.rel_l2 for e in sums.values()), default=0.0)
    row.top1_agreement = agree / len(got) if classifier and got else None


# The default gate for every output kind: an artifact whose outputs stray from the float reference's by more
# than this relative (L2) error fails `edgeaccel check`. An int8 artifact that works stays well below it; a
# broken one (an int8 detector whose box outputs were quantized away: max error 2.6e4) is orders of magnitude
# above.
DEFAULT_MAX_REL_ERROR = 0.25


def failures(report: CheckReport, max_rel_error: float | None = DEFAULT_MAX_REL_ERROR,
             min_top1: float | None = None, task_gates: dict[str, float | None] | None = None) -> list[str]:
    """One line per failed gate of each (artifact, executor): an error, a relative error above
    ``max_rel_error`` (every output kind), and, when the report compared a vision task, its task-level
    measures past their bounds: ``task_gates`` (``edgeaccel.agreement.check.GATES``: min_precision, min_recall,
    min_miou, max_keypoint_distance, min_top1) over ``edgeaccel.agreement.check.DEFAULT_GATES`` for those not
    given (None). Without a task, ``min_top1`` (when given) gates a classifier's raw top-1 agreement."""
    return [line for row in report.rows for line in row_failures(report, row, max_rel_error, min_top1, task_gates)]


def effective_task_gates(min_top1: float | None = None, task_gates: dict[str, float | None] | None = None) -> dict:
    """The task gates in force: the defaults, overridden by the bounds given."""
    from ..agreement.check import DEFAULT_GATES

    given = {k: v for k, v in (task_gates or {}).items() if v is not None}
    if min_top1 is not None:
        given["min_top1"] = min_top1
    return {**DEFAULT_GATES, **given}


def row_failures(report: CheckReport, row: Row, max_rel_error: float | None = DEFAULT_MAX_REL_ERROR,
                 min_top1: float | None = None, task_gates: dict[str, float | None] | None = None) -> list[str]:
    where = f"{row.artifact.name} on {row.executor or 'no executor'}"
    if row.error:
        return [f"{where} failed: {row.error.splitlines()[0]}"]
    out = []
    if max_rel_error is not None and row.rel_error is not None and not row.rel_error <= max_rel_error:
        out.append(f"{where}: relative error {row.rel_error:.3g} against the reference is above "
                   f"{max_rel_error:g} (max abs error {row.max_abs_error:.4g})")
    if report.task and row.task_error:
        out.append(f"{where}: {row.task_error}")
    elif report.task:
        from ..agreement.check import task_failures

        out += task_failures(where, row.task_metrics, effective_task_gates(min_top1, task_gates))
    elif (min_top1 is not None and report.classifier and row.top1_agreement is not None
          and row.top1_agreement < min_top1):
        out.append(f"{where}: top-1 agreement {row.top1_agreement:.1%} is below {min_top1:.1%}")
    return out


def verdicts(report: CheckReport, max_rel_error: float | None = DEFAULT_MAX_REL_ERROR,
             task_gates: dict[str, float | None] | None = None) -> dict[Path, dict]:
    """Per artifact (the reference left out), what ``convert`` records in the manifest: ``passed`` (False when
    any executor that ran it failed a gate; None when none ran it here), the worst measures over those
    executors, the samples and task, and the reason. An executor that cannot load the artifact is noted, not
    held against it: another device may read it."""
    by_artifact: dict[Path, list[Row]] = {}
    for row in report.rows:
        if not row.is_reference:
            by_artifact.setdefault(row.artifact, []).append(row)
    out = {}
    for artifact, rows in by_artifact.items():
        ran = [r for r in rows if not r.load_failed]  # one that loaded and then failed to run or answer fails
        entry: dict = {"passed": None, "data": report.data_kind, "samples": report.samples}
        if report.task:
            entry["task"] = report.task
        if not ran:
            entry["reason"] = "not checked here: " + "; ".join(
                f"{r.executor or 'no executor'}: {(r.error or 'failed to load').splitlines()[0]}" for r in rows)
            out[artifact] = entry
            continue
        lines = [line for r in ran for line in row_failures(report, r, max_rel_error, None, task_gates)]
        entry["passed"] = not lines
        entry["executors"] = [r.executor for r in ran]
        entry.update(_worst(ran))
        entry["reason"] = "; ".join(lines) if lines else ""
        out[artifact] = entry
    return out


def _worst(rows: list[Row]) -> dict:
    """The worst value of each measure over the executors: the highest error or distance, the lowest agreement."""
    from ..agreement.check import GATES, gated_value

    worst: dict = {"rel_error": _round(max(r.rel_error or 0.0 for r in rows), 6)}
    kinds = {key: kind for key, kind in GATES.values()}
    for key, kind in kinds.items():
        values = [gated_value(key, r.task_metrics) for r in rows if r.task_metrics]
        values = [v for v in values if v is not None]
        if values:
            worst[key] = _round(max(values) if kind == "max" else min(values), 6)
    return worst


def size_vs_reference(ratio: float | None) -> str:
    """"4.00x smaller" / "2.50x larger" / "same": a ratio below 1 is a larger file, never "0.40x smaller"."""
    if ratio is None:
        return "-"
    if abs(ratio - 1) < 0.005:
        return "same"
    return f"{ratio:.2f}x smaller" if ratio > 1 else f"{1 / ratio:.2f}x larger"


def _latency(model, sample, runs: int, warmup: int) -> dict:
    time.sleep(_SPIN_PAUSE_S)
    for _ in range(warmup):
        model.run(sample, quantize=True)
    times = []
    for _ in range(max(1, runs)):
        start = time.perf_counter()
        model.run(sample, quantize=True)
        times.append(time.perf_counter() - start)
    ms = np.asarray(times) * 1e3
    p50, p90 = np.percentile(ms, [50, 90])
    return {"p50": round(float(p50), 4), "p90": round(float(p90), 4), "runs": len(times)}


def _as_float(outputs) -> list[np.ndarray]:
    return [np.asarray(o, dtype=np.float32) if np.asarray(o).dtype.kind in "fiub" else np.asarray(o)
            for o in outputs]


def _is_classifier(first_output: np.ndarray) -> bool:
    """One score vector per input: (C,) or (1, C) with C >= 2."""
    shape = first_output.shape
    return (len(shape) == 1 and shape[0] >= 2) or (len(shape) == 2 and shape[0] == 1 and shape[1] >= 2)


def _ratio(ref: ModelInfo, info: ModelInfo) -> float | None:
    return ref.size_bytes / info.size_bytes if info.size_bytes else None


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


def _fmt(value, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def _mb(size: int) -> str:
    return f"{size / 1e6:.2f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"
