"""Matching detections to tracks: IoU between boxes and an optimal assignment (SciPy's
``linear_sum_assignment``, the Hungarian/Jonker-Volgenant solver; imported when the first frame is tracked)."""

from __future__ import annotations

import numpy as np

from ..errors import RuntimeNotInstalledError


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` [N, 4] with every box of ``b`` [M, 4] (x1, y1, x2, y2): [N, M]."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)), np.float64)
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = np.clip(a[:, 2] - a[:, 0], 0, None) * np.clip(a[:, 3] - a[:, 1], 0, None)
    area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def assign(similarity: np.ndarray, minimum: float) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """The pairs (row, column) of greatest total similarity, each at least ``minimum``; then the rows and the
    columns left unmatched."""
    rows, cols = similarity.shape
    if rows == 0 or cols == 0:
        return [], list(range(rows)), list(range(cols))
    solve = _solver()
    # pairs below the minimum cost more than any admissible pair: the solver then never trades one of them
    # for an admissible one; they are dropped after solving
    cost = np.where(similarity >= minimum, 1.0 - similarity, 1e6)
    r, c = solve(cost)
    pairs = [(int(i), int(j)) for i, j in zip(r, c, strict=True) if similarity[i, j] >= minimum]
    matched_rows = {i for i, _ in pairs}
    matched_cols = {j for _, j in pairs}
    return pairs, [i for i in range(rows) if i not in matched_rows], [j for j in range(cols) if j not in matched_cols]


def _solver():
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError as exc:
        raise RuntimeNotInstalledError("tracking needs SciPy (its linear_sum_assignment matches boxes to tracks)",
                                       hint="pip install 'edgeaccel[track]'") from exc
    return linear_sum_assignment
