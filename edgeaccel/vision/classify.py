"""Classification: top-k classes with labels."""

from __future__ import annotations

import numpy as np

from .errors import TaskError
from ..modelfiles.labels import Labels
from .preprocess import Frame
from .results import Classification, ClassifyResult


def score_output(shapes: list[tuple]) -> int | None:
    """The output that holds class scores: C >= 2 values once singleton dimensions are dropped."""
    for i, shape in enumerate(shapes):
        dims = [d for d in shape if d != 1]
        if len(dims) == 1 and (dims[0] is None or dims[0] >= 2) and len(shape) >= 1:
            return i
    return None


def decode(arrays: list[np.ndarray], frame: Frame, labels: Labels, which: int, top_k: int = 5) -> ClassifyResult:
    scores = np.asarray(arrays[which], np.float32).reshape(-1)
    if scores.size < 2:
        raise TaskError(f"output {which} holds {scores.size} value(s); class scores need at least two")
    labels.check_count(scores.size)
    probabilities = bool(scores.min() >= 0 and scores.max() <= 1 and abs(float(scores.sum()) - 1) < 0.05)
    k = min(max(1, top_k), scores.size)
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    classes = [Classification(int(i), labels.name(i), float(scores[i])) for i in top]
    return ClassifyResult("classify", frame, classes=classes, probabilities=probabilities)
