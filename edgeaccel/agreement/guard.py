"""The one place that decides "does candidate B agree with reference A on this model" (``judge``), for
calibration, ``tune`` and background switching. Thresholds live in ``Thresholds``, validated once.

Decision rules::

    outputs matched by name (or position)? ---- no ----------------------------------> refuse
        | yes
    any output: changed shape, NaN/Inf where the reference is finite? -- yes --------> refuse
        | no
    task known? ---- no -------------------------------------------------------------> tensor verdict
        | yes                                                   (every output within tolerance of its range
        |                                                        or 2 quantization steps; top-1 kept on
        |                                                        clear-cut class-score rows)
    the reference's outputs decode as the task? -- no ---> tensor verdict (and why)
        | yes
    the candidate's decode? -- no -----------------------------------------------------> refuse
        | yes
    the task's figures measurable on these samples? -- no --> tensor verdict (and why: e.g. no box on either
        | yes                                                  side of any sample, no clear-cut class)
    every figure within its threshold? -- yes --> admit;  no --> refuse (the first figure that failed)

Why the task decides when it is known: a detector's raw output joins pixel coordinates (0..640) and class
scores (0..1), so "2.42% of the output range" is 15 pixels or a whole score step; OpenVINO bf16 passed
calibration that way while one photo got 7 boxes instead of 6. What the user sees is the decoded result,
so that is what is judged, pooled over every sample (``agreement.tasks``).

Default thresholds (``Thresholds``), per task:
- detect: precision and recall of IoU-matched boxes >= 0.95 (at most about one box in twenty appears,
  vanishes or changes class), and the matched boxes' mean |score difference| <= ``tolerance`` (0.05: a
  score moving by a twentieth of 0..1 moves boxes across the confidence threshold);
- segment: mIoU >= 0.90 over the classes either side finds (a speck of a class counts as much as the dog);
- pose: mean keypoint distance <= 0.10 of the person's size (OKS-style; runtimes that only round differently
  measure about 0.02 on MoveNet, OpenVINO int8 moving keypoints by 0.2-0.4 of the image is far beyond it) and
  pose recall and precision >= 0.95;
- classify: top-1 agreement >= 0.95 over the clear-cut samples (a near tie may flip on rounding alone);
- no task: the tensor verdict at ``tolerance`` (``SelectionOptions(accuracy_tolerance=)``, 0.05 of each output's range).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..errors import ConfigError
from ..modelinfo import TensorSpec
from .tensors import DEFAULT_TOLERANCE, Agreement, compare_outputs, summary, tensor_verdict

GUARD_VERSION = "guard/2"  # the rules below; part of calibration's cache key (older measurements judged otherwise)

# the task kinds recognized from outputs alone with enough confidence to judge on (a distinctive layout); a
# plain [1, N] score vector or an H x W map may be anything, so those need the task named or declared
CONFIDENT_KINDS = frozenset({"yolov8", "yolov5", "nms-in-graph", "ssd-postprocess", "ssd-anchors", "keypoints",
                             "multipose", "yolo-seg", "yolo-pose", "ssd-mediapipe", "landmarks"})


@dataclass(frozen=True)
class Thresholds:
    """What "agrees" means; see the module's docstring for why each default is what it is."""

    tolerance: float = DEFAULT_TOLERANCE  # tensor verdict: share of each output's range; detect: score error
    min_precision: float = 0.95
    min_recall: float = 0.95
    min_miou: float = 0.90
    max_keypoint_distance: float = 0.10  # mean, in units of the reference person's size
    min_pose_recall: float = 0.95
    min_top1: float = 0.95  # over the clear-cut samples

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"agreement threshold {name} must be a number, not {value!r}", key=name)
            if name == "tolerance" and not value > 0:
                raise ConfigError(f"accuracy tolerance {value!r} must be above 0", key="accuracy_tolerance",
                                  hint="a share of each output's range: 0.05 allows 5%")
            if name.startswith("min_") and not 0 <= value <= 1:
                raise ConfigError(f"agreement threshold {name}={value!r} is outside 0..1", key=name,
                                  hint="precision, recall, mIoU and top-1 are shares: 0.95 means 95%")
            if name.startswith("max_") and value < 0:
                raise ConfigError(f"agreement threshold {name}={value!r} is negative", key=name)

    def gates(self, task: str) -> list[tuple[str, str, float]]:
        """(figure, "min" or "max", bound) that ``task``'s result must meet."""
        return {"detect": [("precision", "min", self.min_precision), ("recall", "min", self.min_recall),
                           ("mean_score_error", "max", self.tolerance)],
                "segment": [("miou", "min", self.min_miou)],
                "pose": [("keypoint_distance", "max", self.max_keypoint_distance),
                         ("pose_recall", "min", self.min_pose_recall),
                         ("pose_precision", "min", self.min_pose_recall)],
                "classify": [("top1_clear_cut", "min", self.min_top1)]}[task]


def judged_on_task(task, named: bool = False) -> bool:
    """Whether calibration should judge on ``task`` (a vision Task): the caller named it, the model's metadata
    declares it (Ultralytics' ``task``), or its outputs have a distinctive layout (``CONFIDENT_KINDS``)."""
    if task is None:
        return False
    return named or task.declared or task.kind in CONFIDENT_KINDS


def judge(reference_outputs: Sequence[Sequence[np.ndarray]], candidate_outputs: Sequence[Sequence[np.ndarray]],
          ref_specs: Sequence[TensorSpec], got_specs: Sequence[TensorSpec], task=None,
          thresholds: Thresholds | None = None) -> Agreement:
    """Does the candidate agree with the reference? ``*_outputs[i][j]``: output j of sample i (the samples
    are model inputs: results are decoded in input pixels). ``task``: the reference's ``vision.Task``, or None
    for the tensor verdict alone. The metrics hold the tensor figures always, and the task's when judged on
    it (``judged_on``: "task" or "tensors")."""
    limits = thresholds or Thresholds()
    compared = compare_outputs(reference_outputs, candidate_outputs, ref_specs, got_specs, limits.tolerance)
    if task is None:
        return _on_tensors(compared, limits, "")
    if not compared.pairs or compared.broken:
        verdict = tensor_verdict(compared, limits.tolerance)
        return Agreement(False, verdict.why, {**verdict.metrics, "judged_on": "tensors", "task": task.name})
    try:
        expected = _decode(task, reference_outputs, None)
    except Exception as exc:  # the reference itself does not decode: the task cannot judge here
        return _on_tensors(compared, limits, f"the reference's outputs do not decode as {task.name} "
                                             f"({type(exc).__name__}: {_first_line(exc)})")
    try:
        got = _decode(task, candidate_outputs, [(j, got_specs[j]) for _, j in compared.pairs])
    except Exception as exc:  # garbage in the candidate's outputs that the decoder chokes on: not agreement
        metrics = {**summary(compared), "judged_on": "task", "task": task.name}
        return Agreement(False, f"its outputs do not decode as {task.name} ({type(exc).__name__}: "
                                f"{_first_line(exc)})", metrics)
    from .tasks import task_metrics

    figures = task_metrics(task.name, expected, got, conf=getattr(task, "conf", None))
    gates = limits.gates(task.name)
    if not figures.get("measured") or all(figures.get(key) is None for key, _, _ in gates):
        return _on_tensors(compared, limits, _unmeasured(task.name, figures), figures)
    metrics = {**summary(compared), "judged_on": "task", "task": task.name,
               "task_metrics": {k: round(v, 6) if isinstance(v, float) else v for k, v in figures.items()},
               "thresholds": {key: bound for key, _, bound in gates}}
    failures = [f for f in (_failure(task.name, key, kind, bound, figures) for key, kind, bound in gates) if f]
    if failures:
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return Agreement(False, failures[0] + more, metrics)
    return Agreement(True, "accurate: " + _described(task.name, figures), metrics)


def _on_tensors(compared, limits: Thresholds, why_not_task: str, figures: dict | None = None) -> Agreement:
    verdict = tensor_verdict(compared, limits.tolerance)
    metrics = {**verdict.metrics, "judged_on": "tensors"}
    if figures is not None:
        metrics["task_metrics"] = {k: v for k, v in figures.items() if not isinstance(v, dict)}
    why = f"{verdict.why} ({why_not_task}: judged on raw outputs)" if why_not_task else verdict.why
    return Agreement(verdict.ok, why, metrics)


def _decode(task, outputs: Sequence[Sequence[np.ndarray]], candidate: list[tuple[int, TensorSpec]] | None):
    """Each sample's result in input pixels. A candidate's outputs are put in the reference's order and
    dequantized with its own specs (a quantized twin's scales are not the reference's)."""
    from ..vision.preprocess import Frame

    from .tasks import lenient

    frame = Frame(task.width, task.height, task.width, task.height, 1.0, 1.0)
    task = lenient(task)  # boxes near the threshold find their twins on the other side (tasks.py)
    if candidate is None:
        return [task.postprocess(list(sample), frame) for sample in outputs]
    twin = task.with_outputs(spec for _, spec in candidate)
    return [twin.postprocess([sample[j] for j, _ in candidate], frame) for sample in outputs]


def _failure(task: str, key: str, kind: str, bound: float, figures: dict) -> str | None:
    value = figures.get(key)
    if value is None:
        if key == "precision" and figures.get("boxes") == 0:
            return f"{task}: it found no box where the reference found {figures.get('reference_boxes')}"
        if key == "recall" and figures.get("reference_boxes") == 0:
            return f"{task}: it found {figures.get('boxes')} boxes where the reference found none"
        if key in ("pose_recall", "pose_precision", "keypoint_distance"):
            return (f"{task}: no pose matched the reference's ({figures.get('poses')} poses against "
                    f"{figures.get('reference_poses')})")
        return None  # not measurable on these samples (e.g. no clear-cut class): another figure decides
    if (kind == "min" and value >= bound) or (kind == "max" and value <= bound):
        return None
    word = "below" if kind == "min" else "above"
    detail = ""
    if task == "detect":
        detail = (f" ({figures['matched']} of {figures['reference_boxes']} reference boxes matched, "
                  f"{figures['boxes']} found, over {figures['samples']} samples)")
    return f"{task} {key.replace('_', ' ')} {value:.3g} against the reference is {word} {bound:g}{detail}"


def _unmeasured(task: str, figures: dict) -> str:
    if task == "detect":
        return f"no box on either side of any of the {figures.get('samples')} samples"
    if task == "pose":
        return "no confident pose on either side"
    if task == "classify":
        return "no clear-cut sample to judge top-1 on"
    return f"nothing to measure {task} on"


def _described(task: str, f: dict) -> str:
    n = f.get("samples")
    if task == "detect":
        return (f"detect precision {f['precision']:.3f}, recall {f['recall']:.3f}, mean score error "
                f"{f['mean_score_error'] or 0:.3g} over {f['reference_boxes']} reference boxes on {n} samples")
    if task == "segment":
        return f"segment mIoU {f['miou']:.3f}, pixel agreement {f['pixel_agreement']:.3f} on {n} samples"
    if task == "pose":
        return (f"pose keypoint distance {f['keypoint_distance']:.3g} of the person's size "
                f"({f['keypoint_distance_image']:.3g} of the image) over {f['keypoints']} keypoints on {n} samples")
    return f"classify top-1 {f['top1_clear_cut']:.3f} on {f['clear_cut_samples']} clear-cut of {n} samples"


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return text.splitlines()[0][:200] if text else ""
