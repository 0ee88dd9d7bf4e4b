"""COCO-style box mAP, our own: IoU thresholds 0.50:0.05:0.95, 101-point interpolated precision, per-class AP,
at most 100 detections per image and class, crowd regions as COCO treats them (a detection on a crowd region is
neither a true nor a false positive; several may land on one). Only numpy.

It follows pycocotools' COCOeval step for step (the same matching order, tie-breaking by stable sort, the same
floating-point operations), so that the figure it gives equals the library's on the same predictions, which
tests/test_evaluation_map.py checks on edge cases; pycocotools itself stays an optional extra."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

IOU_THRESHOLDS = np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1, endpoint=True)
RECALL_POINTS = np.linspace(.0, 1.00, int(np.round((1.00 - .0) / .01)) + 1, endpoint=True)
MAX_DETS = 100
AREA_ALL = (0.0, 1e5 ** 2)  # COCO's "all" area range: a box outside it is ignored like a crowd one


@dataclass(frozen=True)
class GroundTruth:
    """One labelled object: ``xywh`` in pixels (x, y of the top-left corner). ``area`` is COCO's (the
    segment's area when the dataset gives one), the box's by default."""

    image_id: int
    class_id: int
    xywh: tuple[float, float, float, float]
    iscrowd: bool = False
    area: float | None = None

    @property
    def box_area(self) -> float:
        return float(self.xywh[2]) * float(self.xywh[3])


@dataclass(frozen=True)
class Detection:
    image_id: int
    class_id: int
    xywh: tuple[float, float, float, float]
    score: float


@dataclass
class ClassAP:
    ap50_95: float | None  # None: the class has no (non-crowd) object in the dataset
    ap50: float | None
    instances: int  # objects that count (not crowd)
    detections: int


@dataclass
class MapResult:
    map50_95: float | None  # None when no class has an object to find
    map50: float | None
    per_class: dict[int, ClassAP] = field(default_factory=dict)
    precision: np.ndarray | None = field(default=None, repr=False)  # T x R x K, -1 where a class has no object


def box_iou(dt: np.ndarray, gt: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """D x G IoU of xywh boxes; against a crowd box the union is the detection's own area (COCO's rule)."""
    if len(dt) == 0 or len(gt) == 0:
        return np.zeros((len(dt), len(gt)))
    d, g = dt.astype(np.float64), gt.astype(np.float64)
    dx, dy, gx, gy = d[:, None, 0], d[:, None, 1], g[None, :, 0], g[None, :, 1]
    w = np.minimum(d[:, None, 2] + dx, g[None, :, 2] + gx) - np.maximum(dx, gx)
    h = np.minimum(d[:, None, 3] + dy, g[None, :, 3] + gy) - np.maximum(dy, gy)
    overlap = (w > 0) & (h > 0)
    inter = np.where(overlap, w * h, 0.0)
    da, ga = d[:, 2] * d[:, 3], g[:, 2] * g[:, 3]
    union = np.where(crowd[None, :], da[:, None], da[:, None] + ga[None, :] - inter)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(overlap, inter / np.where(overlap, union, 1.0), 0.0)


@dataclass
class _ImageClass:
    """One image and class, matched at every threshold: what accumulation needs."""

    scores: np.ndarray  # D, best first
    matched: np.ndarray  # T x D bool
    ignored: np.ndarray  # T x D bool
    gt_ignored: np.ndarray  # G bool


def _match(gts: list[GroundTruth], dts: list[Detection], max_dets: int) -> _ImageClass | None:
    if not gts and not dts:
        return None
    ignore = np.array([g.iscrowd or not AREA_ALL[0] <= _area(g) <= AREA_ALL[1] for g in gts], bool)
    gt_order = np.argsort(ignore, kind="mergesort")  # objects that count first, as COCOeval
    gts = [gts[i] for i in gt_order]
    ignore, crowd = ignore[gt_order], np.array([g.iscrowd for g in gts], bool)
    dt_order = np.argsort([-d.score for d in dts], kind="mergesort")[:max_dets]
    dts = [dts[i] for i in dt_order]
    ious = box_iou(np.array([d.xywh for d in dts], np.float64).reshape(-1, 4),
                   np.array([g.xywh for g in gts], np.float64).reshape(-1, 4), crowd)
    T, D, G = len(IOU_THRESHOLDS), len(dts), len(gts)
    gt_taken = np.zeros((T, G), bool)
    matched, ignored = np.zeros((T, D), bool), np.zeros((T, D), bool)
    for d in range(D):
        # only objects overlapping by at least the lowest threshold can be matched; skipping the others keeps
        # COCOeval's result (its early stop at the first ignored object cannot change which one is taken)
        candidates = np.flatnonzero(ious[d] >= IOU_THRESHOLDS[0])
        if not len(candidates):
            continue
        for t, threshold in enumerate(IOU_THRESHOLDS):
            best, m = min(threshold, 1 - 1e-10), -1
            for g in candidates:
                if gt_taken[t, g] and not crowd[g]:
                    continue
                if m > -1 and not ignore[m] and ignore[g]:
                    break
                if ious[d, g] < best:
                    continue
                best, m = float(ious[d, g]), int(g)
            if m == -1:
                continue
            ignored[t, d] = ignore[m]
            matched[t, d] = True
            gt_taken[t, m] = True
    outside = np.array([not AREA_ALL[0] <= d.xywh[2] * d.xywh[3] <= AREA_ALL[1] for d in dts], bool)
    ignored |= ~matched & outside[None, :]
    return _ImageClass(np.array([d.score for d in dts], np.float64), matched, ignored, ignore)


def _area(g: GroundTruth) -> float:
    return g.box_area if g.area is None else float(g.area)


def _precision_curve(evaluated: list[_ImageClass], max_dets: int) -> np.ndarray | None:
    """T x R interpolated precision of one class, None when it has no object that counts."""
    gt_ignored = np.concatenate([e.gt_ignored for e in evaluated]) if evaluated else np.zeros(0, bool)
    objects = int(np.count_nonzero(gt_ignored == 0))
    if objects == 0:
        return None
    scores = np.concatenate([e.scores[:max_dets] for e in evaluated])
    order = np.argsort(-scores, kind="mergesort")
    matched = np.concatenate([e.matched[:, :max_dets] for e in evaluated], axis=1)[:, order]
    ignored = np.concatenate([e.ignored[:, :max_dets] for e in evaluated], axis=1)[:, order]
    tp_sum = np.cumsum(matched & ~ignored, axis=1).astype(dtype=float)
    fp_sum = np.cumsum(~matched & ~ignored, axis=1).astype(dtype=float)
    curve = np.zeros((len(IOU_THRESHOLDS), len(RECALL_POINTS)))
    for t, (tp, fp) in enumerate(zip(tp_sum, fp_sum, strict=True)):
        n = len(tp)
        recall = tp / objects
        precision = tp / (fp + tp + np.spacing(1))
        for i in range(n - 1, 0, -1):  # the precision envelope: best precision at this recall or beyond
            if precision[i] > precision[i - 1]:
                precision[i - 1] = precision[i]
        at = np.searchsorted(recall, RECALL_POINTS, side="left")
        valid = at < n
        curve[t, valid] = precision[at[valid]]
    return curve


def coco_map(ground_truth: list[GroundTruth], detections: list[Detection], image_ids, class_ids,
             max_dets: int = MAX_DETS) -> MapResult:
    """mAP50-95 and mAP50 over ``image_ids`` and ``class_ids``; detections of other classes or images are not
    counted (as COCOeval's catIds / imgIds)."""
    images, classes = sorted(set(int(i) for i in image_ids)), sorted(set(int(c) for c in class_ids))
    wanted_images, wanted_classes = set(images), set(classes)
    gts, dts = defaultdict(list), defaultdict(list)
    for g in ground_truth:
        if g.image_id in wanted_images and g.class_id in wanted_classes:
            gts[g.image_id, g.class_id].append(g)
    for d in detections:
        if d.image_id in wanted_images and d.class_id in wanted_classes:
            dts[d.image_id, d.class_id].append(d)
    precision = -np.ones((len(IOU_THRESHOLDS), len(RECALL_POINTS), len(classes)))
    per_class = {}
    for k, class_id in enumerate(classes):
        evaluated = [e for e in (_match(gts[i, class_id], dts[i, class_id], max_dets) for i in images)
                     if e is not None]
        curve = _precision_curve(evaluated, max_dets)
        instances = sum(1 for i in images for g in gts[i, class_id] if not g.iscrowd)
        found = sum(len(dts[i, class_id]) for i in images)
        if curve is None:
            per_class[class_id] = ClassAP(None, None, instances, found)
            continue
        precision[:, :, k] = curve
        per_class[class_id] = ClassAP(float(np.mean(curve)), float(np.mean(curve[0])), instances, found)
    return MapResult(_mean(precision), _mean(precision[IOU_THRESHOLDS == .5]), per_class, precision)


def _mean(values: np.ndarray) -> float | None:
    counted = values[values > -1]
    return float(np.mean(counted)) if counted.size else None
