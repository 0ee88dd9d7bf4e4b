"""Box geometry and class-aware non-maximum suppression in numpy: no torch, no OpenCV."""

from __future__ import annotations

import numpy as np

BLOCK = 256  # candidates taken at once: a 256 x 256 IoU matrix within the block, 2048 x 256 against those kept


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
    classes never suppress each other (each class is shifted to its own region of the plane, as torchvision's
    batched NMS does, and then handled alone: a class's greedy pass compares only its own boxes, so 8,400
    candidates of 80 classes cost 1/80 of the pairs). Greedy, like torchvision's: a box is kept when no kept box
    of its class overlaps it by more than ``iou``. Boxes are taken in score order a block at a time: the block
    against the boxes kept so far in one vectorized step, then within the block, so memory stays linear (an IoU
    matrix of 30000 candidates would take gigabytes). A box with a NaN edge suppresses every box after it, of
    every class, as the box-at-a-time loop this replaced did (such boxes keep one group for all classes)."""
    if len(boxes) == 0:
        return np.zeros(0, np.int64)
    boxes = boxes.astype(np.float64)
    if classes is not None:
        span = float(np.abs(boxes).max()) + 1.0
        boxes = boxes + (classes.astype(np.float64) * 2 * span)[:, None]
    order = np.argsort(-scores, kind="stable")
    if classes is None or not np.isfinite(boxes).all():
        groups = [order]
    else:
        by_class = order[np.argsort(classes[order], kind="stable")]
        groups = np.split(by_class, np.flatnonzero(np.diff(classes[by_class])) + 1)
    areas = np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0, None)
    table = np.concatenate([boxes, areas[:, None]], axis=1)  # x1 y1 x2 y2 area
    kept = np.concatenate([_greedy(g, table, iou, max_det) for g in groups])
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return kept[np.argsort(rank[kept], kind="stable")][:max_det].astype(np.int64)


def _greedy(idx: np.ndarray, table: np.ndarray, iou: float, max_det: int) -> np.ndarray:
    """Kept indices of ``idx`` (one class, in score order); ``table`` rows: x1, y1, x2, y2, area."""
    kept = np.zeros(0, np.int64)
    held = np.zeros((0, 5))  # the kept boxes' rows, gathered once
    for start in range(0, len(idx), BLOCK):
        if len(kept) >= max_det:
            break
        cand = idx[start:start + BLOCK]
        rows = table[cand]
        for s in range(0, len(held), 2048):
            if not len(cand):
                break
            ok = (_overlap(held[s:s + 2048], rows) <= iou).all(axis=0)
            cand, rows = cand[ok], rows[ok]
        if not len(cand):
            continue
        within = ~(_overlap(rows, rows) <= iou)
        alive = np.ones(len(cand), bool)
        new = []
        for k in range(len(cand)):
            if alive[k]:
                new.append(k)
                if len(kept) + len(new) >= max_det:
                    break
                alive[k + 1:] &= ~within[k, k + 1:]
        kept = np.concatenate([kept, cand[new]])
        held = np.concatenate([held, rows[new]])
    return kept


def _overlap(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """IoU of every row of ``a`` with every row of ``c`` (rows of x1, y1, x2, y2, area), computed as the loop it
    replaced did, operation for operation, so that a comparison at the threshold falls the same way."""
    w = np.minimum(a[:, None, 2], c[None, :, 2])
    w -= np.maximum(a[:, None, 0], c[None, :, 0])
    np.clip(w, 0, None, out=w)
    h = np.minimum(a[:, None, 3], c[None, :, 3])
    h -= np.maximum(a[:, None, 1], c[None, :, 1])
    np.clip(h, 0, None, out=h)
    w *= h  # the intersection
    union = a[:, None, 4] + c[None, :, 4]
    union -= w
    np.maximum(union, 1e-9, out=union)
    w /= union
    return w
