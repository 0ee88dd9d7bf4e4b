"""Task-level agreement for ``edgeaccel check``: the artifact's outputs and the float reference's on the same
samples are both decoded by the task (boxes, masks, keypoints, classes) and compared as results, pooled over
all samples, and gated (``GATES``, on by default with ``DEFAULT_GATES``).

Pooled, not averaged per image: detection precision is all matched boxes over all the artifact's boxes, recall
over all the reference's, so that an image where both find nothing adds nothing (averaged per image it scored
1.0 and hid the images where boxes were lost); segmentation IoU is each class's intersection over its union
summed over the samples; keypoint distance is the mean over every keypoint of every sample. Classification
top-1 agreement is counted over the clear-cut samples only, those whose reference leads its runner-up by at
least ``CLEAR_MARGIN`` in probability: on a near tie, a flip says nothing about the artifact."""

from __future__ import annotations

import numpy as np

from .agreement import detection, pose
from .errors import TaskError
from .preprocess import Frame
from .results import Result

# gate name -> (measure, "min" or "max"): the check options --min-precision, --min-recall, --min-miou,
# --max-keypoint-distance, --min-top1
GATES = {"min_precision": ("precision", "min"), "min_recall": ("recall", "min"), "min_miou": ("miou", "min"),
         "max_keypoint_distance": ("keypoint_distance", "max"), "min_top1": ("top1", "min")}

# What `check` gates on when the task is known and no bound is given. A working int8 artifact measured here
# stays well inside them (docs/convert.md); scrambled weights or permuted class ids fall far outside.
DEFAULT_GATES = {"min_precision": 0.9, "min_recall": 0.9, "min_miou": 0.9, "max_keypoint_distance": 0.05,
                 "min_top1": 0.9}

CLEAR_MARGIN = 0.1  # reference top-1 probability minus the runner-up's, for a sample to count in top-1 agreement


class TaskCheck:
    def __init__(self, reference_model, task: str | None, labels=None) -> None:
        from .task import make_task

        self.labels = labels
        self.expected: list[Result] = []
        self.clear_cut: list[bool] = []
        self.task = make_task(reference_model, None if task in (None, "auto") else task, labels)
        if self.task is None:
            from .task import no_task_error

            raise no_task_error(reference_model)

    def decode(self, task, outputs_per_sample: list[list[np.ndarray]]) -> list[Result]:
        """The samples are already model inputs: results in the input's own pixels."""
        frame = Frame(task.width, task.height, task.width, task.height, 1.0, 1.0)
        return [task.postprocess(outputs, frame) for outputs in outputs_per_sample]

    def reference(self, outputs_per_sample: list[list[np.ndarray]]) -> list[Result]:
        """Decode the float reference's outputs once: what every artifact is compared with."""
        self.expected = self.decode(self.task, outputs_per_sample)
        if self.task.name == "classify":
            self.clear_cut = [_margin(outputs[self.task.which]) >= CLEAR_MARGIN for outputs in outputs_per_sample]
        return self.expected

    def measure(self, model, outputs_per_sample: list[list[np.ndarray]]) -> dict:
        """The artifact's results against the reference's, pooled over the samples."""
        from .task import make_task

        try:
            task = make_task(model, self.task.name, self.labels)
        except TaskError as exc:
            raise TaskError(f"the artifact does not fit task {self.task.name}: {exc.message}") from exc
        task.letterbox, task.conf, task.iou = self.task.letterbox, self.task.conf, self.task.iou
        got = self.decode(task, outputs_per_sample)
        pooled = {"detect": pooled_detection, "segment": pooled_segmentation, "pose": pooled_pose,
                  "classify": self._classification}[self.task.name]
        return {k: round(float(v), 6) if isinstance(v, float) else v for k, v in pooled(self.expected, got).items()}

    def _classification(self, reference: list[Result], got: list[Result]) -> dict:
        same = [bool(r.classes and g.classes and r.classes[0].class_id == g.classes[0].class_id)
                for r, g in zip(reference, got)]
        clear = [s for s, c in zip(same, self.clear_cut) if c]
        diffs = []
        for r, g in zip(reference, got):
            scores = {c.class_id: c.score for c in g.classes}
            diffs += [abs(c.score - scores.get(c.class_id, 0.0)) for c in r.classes]
        # no clear-cut sample at all: every sample counts rather than none (the count says which)
        return {"top1": float(np.mean(clear or same)) if same else None, "clear_cut_samples": len(clear),
                "top1_all": float(np.mean(same)) if same else None,
                "max_score_difference": max(diffs, default=0.0)}


def pooled_detection(reference: list[Result], got: list[Result]) -> dict:
    """Boxes matched one-to-one by IoU and class in each image, counted over all images."""
    matched = boxes = reference_boxes = 0
    iou_sum = 0.0
    for r, g in zip(reference, got):
        m = detection(r, g)
        n = round(m["recall"] * m["reference_boxes"]) if m["reference_boxes"] else 0
        matched += n
        iou_sum += m["mean_iou"] * n
        boxes += m["boxes"]
        reference_boxes += m["reference_boxes"]
    return {"precision": matched / boxes if boxes else (None if not reference_boxes else 0.0),
            "recall": matched / reference_boxes if reference_boxes else (None if not boxes else 0.0),
            "mean_iou": iou_sum / matched if matched else None,
            "boxes": boxes, "reference_boxes": reference_boxes}


def pooled_segmentation(reference: list[Result], got: list[Result]) -> dict:
    """Per class, intersection over union summed over all samples; mIoU over the classes either side found."""
    inter: dict[int, int] = {}
    union: dict[int, int] = {}
    ref_pixels: dict[int, int] = {}
    same = total = 0
    for r, g in zip(reference, got):
        a, b = r.mask, g.mask
        for c in np.union1d(np.unique(a), np.unique(b)).tolist():
            inter[c] = inter.get(c, 0) + int(np.count_nonzero((a == c) & (b == c)))
            union[c] = union.get(c, 0) + int(np.count_nonzero((a == c) | (b == c)))
            ref_pixels[c] = ref_pixels.get(c, 0) + int(np.count_nonzero(a == c))
        same += int(np.count_nonzero(a == b))
        total += a.size
    ious = {c: inter[c] / union[c] for c in union if union[c]}
    weight = sum(ref_pixels.values())
    return {"miou": float(np.mean(list(ious.values()))) if ious else None,
            "fwiou": sum(ious[c] * ref_pixels[c] for c in ious) / weight if weight else None,
            "pixel_agreement": same / total if total else None}


def pooled_pose(reference: list[Result], got: list[Result]) -> dict:
    """Mean keypoint distance (fraction of the image) over every keypoint the reference is sure of; a sample
    where one side finds a pose and the other none counts its keypoints as a whole image away."""
    total, count = 0.0, 0
    for r, g in zip(reference, got):
        m = pose(r, g)
        if m["keypoints"]:
            total += m["keypoint_distance"] * m["keypoints"]
            count += m["keypoints"]
        elif bool(r.poses) != bool(g.poses):
            kept = len(r.poses[0].keypoints) if r.poses else len(g.poses[0].keypoints)
            total += 1.0 * kept
            count += kept
    return {"keypoint_distance": total / count if count else None, "keypoints": count}


def _margin(scores: np.ndarray) -> float:
    """Top-1 minus runner-up probability (softmax first when the scores are not probabilities)."""
    s = np.asarray(scores, np.float64).reshape(-1)
    if s.size < 2:
        return 0.0
    if not (s.min() >= 0 and s.max() <= 1 and abs(s.sum() - 1) < 0.05):
        s = np.exp(s - s.max())
        s /= s.sum()
    top2 = np.partition(s, -2)[-2:]
    return float(top2[1] - top2[0])


def task_failures(where: str, metrics: dict | None, gates: dict[str, float | None]) -> list[str]:
    out = []
    for gate, bound in gates.items():
        if bound is None or not metrics:
            continue
        key, kind = GATES[gate]
        value = metrics.get(key)
        if value is None:
            continue
        if (kind == "min" and value < bound) or (kind == "max" and value > bound):
            word = "below" if kind == "min" else "above"
            what = key.replace("_", " ")
            if key == "top1":
                what = (f"top-1 agreement over {metrics['clear_cut_samples']} clear-cut samples"
                        if metrics.get("clear_cut_samples") else "top-1 agreement (no clear-cut sample: over all)")
            out.append(f"{where}: {what} {value:.4g} against the reference is {word} {bound:g}")
    return out
