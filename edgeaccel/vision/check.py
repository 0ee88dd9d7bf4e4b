"""Task-level agreement for ``edgeaccel check --task``: the artifact's outputs and the float reference's on
the same samples are both decoded by the task (boxes, masks, keypoints, classes) and compared as results,
pooled over the samples (``edgeaccel.agreement.tasks.task_metrics``); ``--min-precision`` and friends gate on
them."""

from __future__ import annotations

import numpy as np

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
        """The artifact's results against the reference's, every measure pooled over the samples (None where
        nothing could be measured, e.g. no box on either side of any sample)."""
        from ..agreement.tasks import task_metrics

        from .task import make_task

        try:
            task = make_task(model, self.task.name, self.labels)
        except TaskError as exc:
            raise TaskError(f"the artifact does not fit task {self.task.name}: {exc.message}") from exc
        task.letterbox, task.conf, task.iou = self.task.letterbox, self.task.conf, self.task.iou
        got = self.decode(task, outputs_per_sample)
        measured = task_metrics(self.task.name, self.expected, got)
        # the figures and counts, one number (or None: not measured) each; per-class detail stays in the library
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in measured.items()
                if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))}


def task_failures(where: str, metrics: dict | None, gates: dict[str, float | None]) -> list[str]:
    out = []
    for gate, bound in gates.items():
        if bound is None or not metrics:
            continue
        key, kind = GATES[gate]
        if key not in metrics:
            continue
        value = metrics[key]
        if value is None:  # nothing measured (no box on either side): not a pass, not a number to compare
            out.append(f"{where}: {key.replace('_', ' ')} could not be measured against the reference "
                       f"(nothing to compare on these samples)")
            continue
        if (kind == "min" and value < bound) or (kind == "max" and value > bound):
            word = "below" if kind == "min" else "above"
            out.append(f"{where}: {key.replace('_', ' ')} {value:.4g} against the reference is {word} {bound:g}")
    return out
