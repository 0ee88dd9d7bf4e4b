"""Box geometry and class-aware non-maximum suppression in numpy: no torch, no OpenCV."""

from __future__ import annotations

import numpy as np


def xywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    """(cx, cy, w, h) -> (x1, y1, x2, y2)."""
    half = boxes[:, 2:4] / 2
    return np.concatenate([boxes[:, :2] - half, boxes[:, :2] + half], axis=1)


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` (N x 4, xyxy) with every box of ``b`` (M x 4): N x M."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=2)
    area_a = np.prod(np.clip(a[:, 2:] - a[:, :2], 0, None), axis=1)
    area_b = np.prod(np.clip(b[:, 2:] - b[:, :2], 0, None), axis=1)
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-9)


def nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray | None = None, iou: float = 0.45,
        max_det: int = 300) -> np.ndarray:
    """Indices of the boxes kept, best first. Class-aware when ``classes`` is given: boxes of different
    classes never suppress each other (each class is shifted to its own region of the plane, so one pass
    serves every class). Greedy, like torchvision's: each step compares the best remaining box with all the
    others in one vectorized operation and drops those it suppresses, so the loop runs once per kept box and
    memory stays linear (an IoU matrix of 30000 candidates would take gigabytes)."""
    if len(boxes) == 0:
        return np.zeros(0, np.int64)
    boxes = boxes.astype(np.float64)
    if classes is not None:
        span = float(np.abs(boxes).max()) + 1.0
        boxes = boxes + (classes.astype(np.float64) * 2 * span)[:, None]
    x1, y1, x2, y2 = boxes.T
    areas = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size and len(keep) < max_det:
        i, rest = order[0], order[1:]
        keep.append(i)
        w = np.clip(np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]), 0, None)
        h = np.clip(np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]), 0, None)
        inter = w * h
        overlap = inter / np.maximum(areas[i] + areas[rest] - inter, 1e-9)
        order = rest[overlap <= iou]
    return np.asarray(keep, np.int64)
