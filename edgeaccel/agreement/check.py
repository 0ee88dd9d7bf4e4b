"""Task-level agreement for ``edgeaccel check``: the artifact's outputs and the float reference's on the same
samples are both decoded by the task (boxes, masks, keypoints, classes) and compared as results, pooled over
all samples (``edgeaccel.agreement.tasks.task_metrics``: an image where both find nothing adds nothing), and
gated: ``GATES``, on by default with ``DEFAULT_GATES``. Classification top-1 agreement is gated over the
clear-cut samples (the reference's winner leads its runner-up by more than 10% of its score): on a near tie a
flip says nothing about the artifact; with no clear-cut sample, over all of them. Segmentation mIoU is gated
over the classes that cover at least ``MIN_CLASS_SHARE`` of the pixels on either side (``miou_major``): a speck
of a class one side finds (784 pixels of a million, the same quantized DeepLab on LiteRT and OpenVINO) has an
IoU of 0.4 and would fail an artifact whose every pixel but 0.7% agrees; ``miou`` over every class is reported
beside it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..vision.errors import TaskError
from ..vision.preprocess import Frame
from ..vision.results import Result, SegmentResult

if TYPE_CHECKING:
    from ..vision.task import Task

# gate name -> (measure, "min" or "max"): the check options --min-precision, --min-recall, --min-miou,
# --max-keypoint-distance, --min-top1
GATES = {"min_precision": ("precision", "min"), "min_recall": ("recall", "min"), "min_miou": ("miou", "min"),
         "max_keypoint_distance": ("keypoint_distance", "max"), "min_top1": ("top1", "min")}

# What `check` (and convert's check) gates on when the task is known and no bound is given. keypoint_distance
# is in units of the reference person's size (OKS-style: 0.1 is a tenth of it). Working int8 artifacts
# measured here stay well inside them (docs/convert.md); scrambled weights or permuted class ids fall far outside.
DEFAULT_GATES = {"min_precision": 0.9, "min_recall": 0.9, "min_miou": 0.9, "max_keypoint_distance": 0.1,
                 "min_top1": 0.9}


MIN_CLASS_SHARE = 0.005  # a class gated by segmentation mIoU covers at least 0.5% of the pixels on one side


class TaskCheck:
    def __init__(self, reference_model, task: str | None, labels=None) -> None:
        from ..vision.task import make_task

        self.labels = labels
        self.expected: list[Result] = []
        made = make_task(reference_model, None if task in (None, "auto") else task, labels)
        if made is None:
            from ..vision.task import no_task_error

            raise no_task_error(reference_model)
        self.task: Task = made

    def decode(self, task, outputs_per_sample: list[list[np.ndarray]]) -> list[Result]:
        """The samples are already model inputs: results in the input's own pixels."""
        from .tasks import lenient

        frame = Frame(task.width, task.height, task.width, task.height, 1.0, 1.0)
        task = lenient(task)  # boxes near the threshold find their twins on the other side (agreement/tasks.py)
        return [task.postprocess(outputs, frame) for outputs in outputs_per_sample]

    def reference(self, outputs_per_sample: list[list[np.ndarray]]) -> list[Result]:
        """Decode the float reference's outputs once: what every artifact is compared with."""
        self.expected = self.decode(self.task, outputs_per_sample)
        return self.expected

    def measure(self, model, outputs_per_sample: list[list[np.ndarray]]) -> dict:
        """The artifact's results against the reference's, every measure pooled over the samples (None where
        nothing could be measured, e.g. no box on either side of any sample)."""
        from .tasks import task_metrics

        from ..vision.task import make_task

        try:
            task = make_task(model, self.task.name, self.labels)
        except TaskError as exc:
            raise TaskError(f"the artifact does not fit task {self.task.name}: {exc.message}") from exc
        if task is None:  # a named task is checked, not recognized: make_task raises rather than give None
            raise TaskError(f"the artifact does not fit task {self.task.name}")
        task.letterbox, task.conf, task.iou = self.task.letterbox, self.task.conf, self.task.iou
        got = self.decode(task, outputs_per_sample)
        measured = task_metrics(self.task.name, self.expected, got, conf=getattr(self.task, "conf", None))
        if self.task.name == "segment" and measured.get("class_iou"):
            measured["miou_major"] = _major_miou(measured["class_iou"], self.expected, got)
        # the figures and counts, one number (or None: not measured) each; per-class detail stays in the library
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in measured.items()
                if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))}


def _major_miou(class_iou: dict, reference: list[Result], got: list[Result]) -> float | None:
    """Mean IoU over the classes covering at least MIN_CLASS_SHARE of all pixels on either side."""
    masks = [[np.asarray(r.mask) for r in results if isinstance(r, SegmentResult)] for results in (reference, got)]
    total = sum(m.size for m in masks[0])
    major = [iou for c, iou in class_iou.items()
             if max(sum(int(np.count_nonzero(m == c)) for m in side) for side in masks) >= MIN_CLASS_SHARE * total]
    return float(np.mean(major)) if major else None


def gated_value(key: str, metrics: dict):
    """The figure a gate reads: top-1 over the clear-cut samples when there are any, else over all."""
    if key == "top1" and metrics.get("clear_cut_samples"):
        return metrics.get("top1_clear_cut")
    if key == "miou" and "miou_major" in metrics:
        return metrics["miou_major"]
    return metrics.get(key)


def task_failures(where: str, metrics: dict | None, gates: dict[str, float | None]) -> list[str]:
    out = []
    for gate, bound in gates.items():
        if bound is None or not metrics:
            continue
        key, kind = GATES[gate]
        if key not in metrics:
            continue
        value = gated_value(key, metrics)
        what = key.replace("_", " ")
        suffix = ""
        if key == "miou" and "miou_major" in metrics:
            suffix = f" (over the classes covering at least {MIN_CLASS_SHARE:.1%} of the pixels on one side)"
        if key == "top1":
            what = (f"top-1 agreement over {metrics['clear_cut_samples']} clear-cut samples"
                    if metrics.get("clear_cut_samples") else "top-1 agreement (no clear-cut sample: over all)")
        if value is None:  # nothing measured (no box on either side): not a pass, not a number to compare
            out.append(f"{where}: {what} could not be measured against the reference{suffix} (nothing to compare "
                       f"on these samples: give samples where the reference finds something, --data)")
            continue
        if (kind == "min" and value < bound) or (kind == "max" and value > bound):
            word = "below" if kind == "min" else "above"
            out.append(f"{where}: {what} {value:.4g} against the reference is {word} {bound:g}{suffix}")
    return out
