"""Task-level agreement for ``edgeaccel check --task``: the artifact's outputs and the float reference's on
the same samples are both decoded by the task (boxes, masks, keypoints, classes) and compared as results
(``agreement``), averaged over the samples; ``--min-precision`` and friends gate on them."""

from __future__ import annotations

import numpy as np

from .agreement import agreement
from .errors import TaskError
from .preprocess import Frame
from .results import Result

# gate name -> (measure, "min" or "max"): the check options --min-precision, --min-recall, --min-miou,
# --max-keypoint-distance, --min-top1-task
GATES = {"min_precision": ("precision", "min"), "min_recall": ("recall", "min"), "min_miou": ("miou", "min"),
         "max_keypoint_distance": ("keypoint_distance", "max")}


class TaskCheck:
    def __init__(self, reference_model, task: str | None, labels=None) -> None:
        from .task import make_task

        self.labels = labels
        self.expected: list[Result] = []
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
        return self.expected

    def measure(self, model, outputs_per_sample: list[list[np.ndarray]]) -> dict:
        """The artifact's results against the reference's, each measure averaged over the samples."""
        from .task import make_task

        try:
            task = make_task(model, self.task.name, self.labels)
        except TaskError as exc:
            raise TaskError(f"the artifact does not fit task {self.task.name}: {exc.message}") from exc
        task.letterbox, task.conf, task.iou = self.task.letterbox, self.task.conf, self.task.iou
        got = self.decode(task, outputs_per_sample)
        measured = [agreement(r, g) for r, g in zip(self.expected, got)]
        keys = [k for k in measured[0] if k not in ("boxes", "reference_boxes", "keypoints")] if measured else []
        return {k: round(float(np.mean([m[k] for m in measured])), 6) for k in keys}


def task_failures(where: str, metrics: dict | None, gates: dict[str, float | None]) -> list[str]:
    out = []
    for gate, bound in gates.items():
        if bound is None or not metrics:
            continue
        key, kind = GATES[gate]
        if key not in metrics:
            continue
        value = metrics[key]
        if (kind == "min" and value < bound) or (kind == "max" and value > bound):
            word = "below" if kind == "min" else "above"
            out.append(f"{where}: {key.replace('_', ' ')} {value:.4g} against the reference is {word} {bound:g}")
    return out
