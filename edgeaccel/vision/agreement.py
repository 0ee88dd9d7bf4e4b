"""How far two results of the same task on the same image agree: a converted artifact against its float
reference (``edgeaccel check``), or one executor against another. Each measure is 1.0 (or 0.0 for distances)
when they agree exactly.

detect: precision and recall of boxes matched one-to-one by IoU >= 0.5 with the same class (the reference's
    boxes are the truth), and the matched boxes' mean IoU;
segment: mIoU over the classes present in either mask (a speck of a class one side finds counts as much as
    the dog), the frequency-weighted IoU (each class by its share of the reference), and the fraction of
    pixels with the same class;
pose: mean distance of matching keypoints in fractions of the image (x / width, y / height), over keypoints
    the reference scores at least 0.3;
classify: whether top-1 is the same, and the largest score difference among the reference's top-k."""

from __future__ import annotations

import numpy as np

from .nms import iou_matrix
from .results import ClassifyResult, DetectResult, PoseResult, Result, SegmentResult

MATCH_IOU = 0.5
KEYPOINT_MIN_SCORE = 0.3


def agreement(reference: Result, result: Result) -> dict[str, float]:
    if isinstance(reference, DetectResult):
        return detection(reference, result)
    if isinstance(reference, SegmentResult):
        return segmentation(reference, result)
    if isinstance(reference, PoseResult):
        return pose(reference, result)
    if isinstance(reference, ClassifyResult):
        return classification(reference, result)
    raise TypeError(f"no agreement measure for {type(reference).__name__}")


def detection(reference: DetectResult, result: DetectResult, iou: float = MATCH_IOU) -> dict[str, float]:
    ref = np.array([b.xyxy for b in reference.boxes], np.float64).reshape(-1, 4)
    got = np.array([b.xyxy for b in result.boxes], np.float64).reshape(-1, 4)
    if not len(ref) or not len(got):
        same = float(len(ref) == len(got))
        return {"precision": same, "recall": same, "mean_iou": same, "boxes": len(got), "reference_boxes": len(ref)}
    overlap = iou_matrix(got, ref)
    same_class = np.array([[g.class_id == r.class_id for r in reference.boxes] for g in result.boxes])
    overlap = np.where(same_class, overlap, 0.0)
    matched, ious, used = 0, [], set()
    for g in np.argsort([-b.score for b in result.boxes], kind="stable"):  # greedy, best-scoring first (VOC)
        candidates = [(overlap[g, r], r) for r in range(len(ref)) if r not in used and overlap[g, r] >= iou]
        if candidates:
            best, r = max(candidates)
            used.add(r)
            matched += 1
            ious.append(best)
    return {"precision": matched / len(got), "recall": matched / len(ref),
            "mean_iou": float(np.mean(ious)) if ious else 0.0, "boxes": len(got), "reference_boxes": len(ref)}


def segmentation(reference: SegmentResult, result: SegmentResult) -> dict[str, float]:
    a, b = reference.mask, result.mask
    ious, weights = [], []
    for c in np.union1d(np.unique(a), np.unique(b)):
        inter = np.count_nonzero((a == c) & (b == c))
        union = np.count_nonzero((a == c) | (b == c))
        ious.append(inter / union)
        weights.append(np.count_nonzero(a == c))
    return {"miou": float(np.mean(ious)), "fwiou": float(np.average(ious, weights=weights)) if sum(weights) else 0.0,
            "pixel_agreement": float(np.mean(a == b))}


def pose(reference: PoseResult, result: PoseResult) -> dict[str, float]:
    if not reference.poses or not result.poses:
        return {"keypoint_distance": 0.0 if not reference.poses and not result.poses else 1.0, "keypoints": 0}
    w, h = reference.frame.width, reference.frame.height
    distances = [np.hypot((r.x - g.x) / w, (r.y - g.y) / h)
                 for r, g in zip(reference.poses[0].keypoints, result.poses[0].keypoints)
                 if r.score >= KEYPOINT_MIN_SCORE]
    return {"keypoint_distance": float(np.mean(distances)) if distances else 0.0, "keypoints": len(distances)}


def classification(reference: ClassifyResult, result: ClassifyResult) -> dict[str, float]:
    scores = {c.class_id: c.score for c in result.classes}
    top1 = float(bool(reference.classes) and bool(result.classes)
                 and reference.classes[0].class_id == result.classes[0].class_id)
    diff = max((abs(c.score - scores.get(c.class_id, 0.0)) for c in reference.classes), default=0.0)
    return {"top1": top1, "max_score_difference": float(diff)}
