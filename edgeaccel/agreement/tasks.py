"""Task-level agreement: how far a candidate's decoded results (``edgeaccel.vision.results``) are from the
reference's on the same samples, every figure POOLED over all samples (``task_metrics``). Pooling is the
point: averaged per image, an image where both sides find nothing would score a perfect 1.0 and hide the
images where they differ. The reference's results are the truth.

detect: boxes matched one-to-one by IoU >= 0.5 and the same class (greedy, the candidate's best-scoring box
    first, as VOC/COCO do). precision = matched / candidate boxes, recall = matched / reference boxes,
    mean IoU and mean |score difference| of the matched pairs, all over every box of every sample. With the
    task's confidence threshold ``conf`` (both sides decoded down to ``LENIENT_MARGIN`` below it), a box
    counts when it scores at least conf and is matched by any box of the other side: a box at 0.2501 on one
    runtime and 0.2499 on another is the same detection, not a lost one and a false one. An image
    where both find nothing adds nothing; when neither side finds a box on any sample the figures are None
    and ``measured`` is False (nothing was measured, which is not agreement).
segment: IoU per class from one confusion matrix over every pixel of every sample; mIoU over the classes
    either side finds anywhere, fwIoU (each class weighted by its share of the reference's pixels) and the
    share of pixels with the same class.
pose: poses matched one-to-one (closest first) by their mean keypoint distance; each distance is normalized by
    the reference pose's size, sqrt(area of the box around its confident keypoints), as COCO's OKS does
    (``keypoint_distance``: 0.1 means a tenth of the person's size), and also reported as a fraction of the
    image (``keypoint_distance_image``, x / width, y / height), over the keypoints the reference scores at
    least 0.3. pose_recall / pose_precision: matched poses over the reference's / candidate's poses.
classify: top-1 agreement over all samples and over the clear-cut ones (the reference's winner leads its
    runner-up by more than 10% of its score), top-5 agreement (the reference's top-1 among the candidate's
    classes, five by default), and the largest score difference among the reference's classes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import InputError
from ..vision.nms import iou_matrix
from ..vision.results import ClassifyResult, DetectResult, PoseResult, Result, SegmentResult

MATCH_IOU = 0.5
KEYPOINT_MIN_SCORE = 0.3
# Two poses are the same person when their keypoints are on average within half the person's size.
POSE_MATCH_DISTANCE = 0.5
# The smallest object size a pose is normalized by, as a share of the image's: a pose with one or two
# confident keypoints close together has a box of about zero area, which would make any move look infinite.
MIN_POSE_SIZE = 0.05
CLEAR_CUT = 0.1  # the reference's winner leads its runner-up by more than this share of its own score
# Detections are compared with hysteresis: each side decoded down to this much below the confidence threshold,
# so that a box just over the threshold on one side finds its twin just under it on the other. 0.02 is a few
# uint8 steps of a 0..1 score (int8 rounding, runtimes' float differences are far smaller); a whole-score shift
# beyond it puts boxes on screen that the reference does not show, and is counted as such.
LENIENT_MARGIN = 0.02


def lenient(task):
    """A detect task's copy that keeps boxes down to LENIENT_MARGIN below its confidence threshold (the other
    side's matches for boxes near the threshold); any other task as it is."""
    import copy

    if getattr(task, "name", None) != "detect":
        return task
    twin = copy.copy(task)
    twin.conf = max(task.conf - LENIENT_MARGIN, task.conf / 2)
    return twin


def task_metrics(task_name: str, references: Sequence[Result], results: Sequence[Result],
                 conf: float | None = None) -> dict:
    """Pooled figures for ``task_name`` ("detect", "segment", "pose", "classify"): ``references[i]`` and
    ``results[i]`` are the two sides' results on sample i. Floats are None where nothing could be measured.
    ``conf`` (detect): the confidence threshold a box must reach to count, both sides having been decoded
    lower (``lenient``)."""
    # the result class each side must hold, and the measure that takes them (checked below, so Callable[...])
    kinds: dict[str, tuple[type, Callable[..., dict]]] = {
        "detect": (DetectResult, detection), "segment": (SegmentResult, segmentation),
        "pose": (PoseResult, pose), "classify": (ClassifyResult, classification)}
    if task_name not in kinds:
        raise InputError(f"no task metrics for {task_name!r}", hint=f"use one of {', '.join(kinds)}")
    if len(references) != len(results):
        raise InputError(f"{len(references)} reference results but {len(results)} to compare",
                         hint="pass one result per sample on each side, in the same order")
    kind, measure = kinds[task_name]
    for side, items in (("reference", references), ("candidate", results)):
        for i, item in enumerate(items):
            if not isinstance(item, kind):
                raise InputError(f"{side} result {i + 1} is a {type(item).__name__}, not a {kind.__name__} "
                                 f"({task_name})", hint="compare results of the same task")
    return measure(references, results, conf=conf) if task_name == "detect" else measure(references, results)


# -- detect ------------------------------------------------------------------------------------------------
def detection(references: Sequence[DetectResult], results: Sequence[DetectResult], iou: float = MATCH_IOU,
              conf: float | None = None) -> dict:
    found = matched = got_total = ref_total = 0
    ious: list[float] = []
    score_errors: list[float] = []
    images = 0
    for reference, result in zip(references, results, strict=True):
        strong_got = _counted(result, conf)
        strong_ref = _counted(reference, conf)
        got_total += len(strong_got)
        ref_total += len(strong_ref)
        if not strong_ref and not strong_got:
            continue  # both found nothing: nothing to count, not a perfect score
        images += 1
        found += len(_match_boxes(reference, result, iou, strong_got, range(len(reference.boxes))))
        for g, r, overlap in _match_boxes(reference, result, iou, range(len(result.boxes)), strong_ref):
            matched += 1
            ious.append(overlap)
            score_errors.append(abs(result.boxes[g].score - reference.boxes[r].score))
    measured = bool(got_total or ref_total)
    return {"precision": found / got_total if got_total else None,
            "recall": matched / ref_total if ref_total else None,
            "mean_iou": float(np.mean(ious)) if ious else None,
            "mean_score_error": float(np.mean(score_errors)) if score_errors else None,
            "max_score_error": float(np.max(score_errors)) if score_errors else None,
            "matched": matched, "boxes": got_total, "reference_boxes": ref_total,
            "images_with_boxes": images, "samples": len(references), "measured": measured}


def _counted(result: DetectResult, conf: float | None) -> list[int]:
    return [i for i, b in enumerate(result.boxes) if conf is None or b.score >= conf]


def _match_boxes(reference: DetectResult, result: DetectResult, iou: float, got_ids, ref_ids) \
        -> list[tuple[int, int, float]]:
    """(candidate box, reference box, IoU) pairs matched one-to-one with the same class, among the candidate's
    boxes ``got_ids`` and the reference's ``ref_ids``."""
    got_ids, ref_ids = list(got_ids), list(ref_ids)
    if not got_ids or not ref_ids:
        return []
    ref = np.array([reference.boxes[r].xyxy for r in ref_ids], np.float64).reshape(-1, 4)
    got = np.array([result.boxes[g].xyxy for g in got_ids], np.float64).reshape(-1, 4)
    overlap = iou_matrix(got, ref)
    same_class = np.array([[result.boxes[g].class_id == reference.boxes[r].class_id for r in ref_ids]
                           for g in got_ids])
    overlap = np.where(same_class, overlap, 0.0)
    pairs, used = [], set()
    for k in np.argsort([-result.boxes[g].score for g in got_ids], kind="stable"):
        candidates = [(overlap[k, j], j) for j in range(len(ref_ids)) if j not in used and overlap[k, j] >= iou]
        if candidates:
            best, j = max(candidates)
            used.add(j)
            pairs.append((got_ids[k], ref_ids[j], float(best)))
    return pairs


# -- segment -----------------------------------------------------------------------------------------------
def segmentation(references: Sequence[SegmentResult], results: Sequence[SegmentResult]) -> dict:
    ref_parts, got_parts = [], []
    for i, (reference, result) in enumerate(zip(references, results, strict=True)):
        a, b = np.asarray(reference.mask), np.asarray(result.mask)
        if a.shape != b.shape:
            raise InputError(f"sample {i + 1}: the candidate's mask is {list(b.shape)}, the reference's "
                             f"{list(a.shape)}", hint="decode both sides' outputs for the same image")
        ref_parts.append(a.ravel())
        got_parts.append(b.ravel())
    if not ref_parts or not sum(p.size for p in ref_parts):
        return {"miou": None, "fwiou": None, "pixel_agreement": None, "classes": 0, "pixels": 0,
                "samples": len(references), "measured": False}
    ref_ids, got_ids = np.concatenate(ref_parts), np.concatenate(got_parts)
    classes, inverse = np.unique(np.concatenate([ref_ids, got_ids]), return_inverse=True)
    n = len(classes)
    r, g = inverse[:ref_ids.size], inverse[ref_ids.size:]
    confusion = np.bincount(r * n + g, minlength=n * n).reshape(n, n).astype(np.float64)
    inter = np.diag(confusion)
    union = confusion.sum(axis=0) + confusion.sum(axis=1) - inter
    ious = inter / np.maximum(union, 1)
    weights = confusion.sum(axis=1)
    return {"miou": float(np.mean(ious)), "fwiou": float(np.average(ious, weights=weights)),
            "pixel_agreement": float(inter.sum() / confusion.sum()),
            "class_iou": {int(c): round(float(v), 6) for c, v in zip(classes, ious, strict=True)},
            "classes": n, "pixels": int(ref_ids.size), "samples": len(references), "measured": True}


# -- pose --------------------------------------------------------------------------------------------------
def pose(references: Sequence[PoseResult], results: Sequence[PoseResult]) -> dict:
    normalized: list[float] = []
    in_image: list[float] = []
    ref_poses = got_poses = matched = 0
    for reference, result in zip(references, results, strict=True):
        refs = [p for p in reference.poses if _confident(p)]
        gots = [p for p in result.poses if _confident(p)]
        ref_poses += len(refs)
        got_poses += len(gots)
        w, h = reference.frame.width, reference.frame.height
        floor = MIN_POSE_SIZE * float(np.sqrt(w * h))
        table = {}
        for i, r in enumerate(refs):
            for j, g in enumerate(gots):
                table[i, j] = _pose_distances(r, g, w, h, floor)
        used_r, used_g = set(), set()
        for (i, j), (norm, image) in sorted(table.items(), key=lambda kv: float(np.mean(kv[1][0]))):
            if i in used_r or j in used_g or float(np.mean(norm)) > POSE_MATCH_DISTANCE:
                continue
            used_r.add(i)
            used_g.add(j)
            matched += 1
            normalized += norm
            in_image += image
    measured = bool(ref_poses or got_poses)
    return {"keypoint_distance": float(np.mean(normalized)) if normalized else None,
            "keypoint_distance_image": float(np.mean(in_image)) if in_image else None,
            "max_keypoint_distance": float(np.max(normalized)) if normalized else None,
            "pose_recall": matched / ref_poses if ref_poses else None,
            "pose_precision": matched / got_poses if got_poses else None,
            "keypoints": len(normalized), "poses": got_poses, "reference_poses": ref_poses,
            "samples": len(references), "measured": measured}


def _confident(p) -> bool:
    return any(k.score >= KEYPOINT_MIN_SCORE for k in p.keypoints)


def _pose_distances(r, g, w: int, h: int, floor: float) -> tuple[list[float], list[float]]:
    """Per confident reference keypoint: distance / the reference pose's size, and as a fraction of the image."""
    kept = [(a, b) for a, b in zip(r.keypoints, g.keypoints, strict=True) if a.score >= KEYPOINT_MIN_SCORE]
    xs = [a.x for a, _ in kept]
    ys = [a.y for a, _ in kept]
    size = max(float(np.sqrt((max(xs) - min(xs)) * (max(ys) - min(ys)))), floor, 1e-9)
    norm = [float(np.hypot(a.x - b.x, a.y - b.y)) / size for a, b in kept]
    image = [float(np.hypot((a.x - b.x) / w, (a.y - b.y) / h)) for a, b in kept]
    return norm, image


# -- classify ----------------------------------------------------------------------------------------------
def classification(references: Sequence[ClassifyResult], results: Sequence[ClassifyResult]) -> dict:
    top1 = top5 = clear = clear_kept = counted = 0
    diff = 0.0
    for reference, result in zip(references, results, strict=True):
        if not reference.classes:
            continue
        counted += 1
        best = reference.classes[0]
        got_ids = [c.class_id for c in result.classes]
        same = bool(got_ids) and got_ids[0] == best.class_id
        top1 += same
        top5 += best.class_id in got_ids[:5]
        runner_up = reference.classes[1].score if len(reference.classes) > 1 else None
        if runner_up is None or best.score - runner_up > CLEAR_CUT * abs(best.score):
            clear += 1
            clear_kept += same
        scores = {c.class_id: c.score for c in result.classes}
        diff = max([diff, *(abs(c.score - scores.get(c.class_id, 0.0)) for c in reference.classes)])
    return {"top1": top1 / counted if counted else None,
            "top1_clear_cut": clear_kept / clear if clear else None, "clear_cut_samples": clear,
            "top5": top5 / counted if counted else None, "max_score_difference": float(diff),
            "samples": len(references), "measured": bool(counted)}
